"""The spec's module path for the conformance command (``python -m tests.conformance.scorecard``)."""
