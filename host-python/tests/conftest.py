import os
import sys

_HERE = os.path.dirname(__file__)
sys.path.insert(0, _HERE)
