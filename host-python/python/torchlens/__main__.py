"""``python -m torchlens doctor``: which host runs the core (and its build id), then the backend
scorecard table of ``tl.report.doctor()``."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._core import versions
from .report import doctor


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchlens")
    parser.add_argument(
        "command", choices=["doctor"], help="doctor: what each backend's shipped scorecard says"
    )
    parser.parse_args(argv)
    running = versions()
    print(
        f"core: {running['core_build_id']} on the {running['host']} host "
        f"(wasmtime {running['wasmtime']}); TORCHLENS_HOST picks native or wasmtime-py"
    )
    print(doctor())
    return 0


if __name__ == "__main__":
    sys.exit(main())
