import os
import sys

_HERE = os.path.dirname(__file__)
sys.path.insert(0, _HERE)
# The NumPy test adapter is declared through the torchlens.backends entry-point group, as a
# third-party adapter would be: its distribution metadata lives in this folder.
sys.path.insert(0, os.path.join(_HERE, "numpy_adapter_distribution"))
