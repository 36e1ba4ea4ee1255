"""The capability matrix, generated from the registry (never written by hand).

python -m torchlens.backends.matrix > docs/backends.md
"""

from __future__ import annotations

from .gate import capability_names
from .registry import built_in_specs


def render() -> str:
    """``docs/backends.md``: one row per registered backend, one column per capability."""
    capabilities = capability_names()
    lines = [
        "# Backends",
        "",
        "Generated from the backend registry by `python -m torchlens.backends.matrix`; a test",
        "regenerates it and fails when it differs. `yes`: the capability is flagged and bound to an",
        "implementation; `no`: the request refuses with the capability's refusal code; `planned`:",
        "the backend is registered but not built yet (every request refuses with",
        "`backend_not_built`).",
        "",
        "| backend | aliases | maturity | framework | supported | CI pin | install extra |",
        "|---|---|---|---|---|---|---|",
    ]
    specs = sorted(built_in_specs(), key=lambda spec: (spec.maturity != "stable", spec.name))
    for spec in specs:
        requirement = spec.requirement
        lines.append(
            f"| {spec.name} | {', '.join(spec.aliases) or '-'} | {spec.maturity} | {requirement.module} | "
            f"[{requirement.minimum}, {requirement.ceiling}) | {requirement.pinned} | "
            f"`torchlens[{requirement.extra}]` |"
        )
    lines += ["", "| capability | " + " | ".join(spec.name for spec in specs) + " |"]
    lines.append("|---" * (len(specs) + 1) + "|")
    for capability in capabilities:
        cells = []
        for spec in specs:
            if spec.adapter is None:
                cells.append("planned")
            else:
                cells.append("yes" if spec.capabilities.get(capability, False) else "no")
        lines.append(f"| {capability} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
