"""``python -m tests.conformance.scorecard``: the spec's name for the conformance suite's
command, run from a checkout's root. The implementation is ``conformance/scorecard.py``."""

import sys

from conformance.scorecard import main

if __name__ == "__main__":
    sys.exit(main())
