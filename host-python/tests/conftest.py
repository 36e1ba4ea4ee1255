import importlib.util
import os
import sys

_HERE = os.path.dirname(__file__)
sys.path.insert(0, _HERE)
# The test models live in the conformance suite (conformance/models/), at the checkout's root.
import conformance_paths  # noqa: E402, F401

# Paddle crashes when it is first imported after TensorFlow in one process. Every process that
# runs tests (each pytest-xdist worker included, whatever share of the files it gets) imports
# Paddle before any test can import TensorFlow, where both are installed.
if importlib.util.find_spec("paddle") is not None and importlib.util.find_spec("tensorflow") is not None:
    import paddle  # noqa: F401
