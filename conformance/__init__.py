"""The shared conformance suite: the same case ids over every registered backend.

Each backend supplies the standard models (MLP, CNN, attention, a shared module) in its own
framework (``conformance/models/<backend>.py``); every task (``conformance/tasks.py``) runs on
every model, and each cell is recorded as passed, failed, unsupported (a typed refusal with a
registered code) or not_run. ``python -m tests.conformance.scorecard --backend <name>
--write | --check | --graduation`` writes, checks and grades the scorecards
(``scorecards/<name>.json``, shipped as ``torchlens/backends/<name>/scorecard.json``)."""
