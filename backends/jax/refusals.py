"""What a JAX capture refuses, decided from the jaxpr before a single equation runs: callback
effects, nested-jaxpr primitives the interpreter cannot read, nested ``jit`` calls that are not
pure, control flow under ``jax_control_flow="reject"``, and inside attributed modules (Equinox,
Flax NNX) the transforms whose equations would escape the module attribution."""

from __future__ import annotations

from typing import Any

from torchlens.adapter_kit.package_files import in_packages
from torchlens.adapter_kit.refusals import Refusals

from .compat import jaxprs_in_params

#: Call-like primitives whose body is inlined (their forward value is the body's).
CALL_PRIMITIVES = frozenset(
    {"jit", "pjit", "custom_jvp_call", "closed_call", "core_call", "checkpoint", "remat", "remat2"}
)
#: Primitives recorded as regions (one boundary node, one projection per output).
REGION_PRIMITIVES = frozenset({"custom_vjp_call", "custom_vjp_call_jaxpr"})
_REMAT = frozenset({"checkpoint", "remat", "remat2"})
#: Primitives whose nested jaxpr is only a scalar combiner (scatter updates, generic reductions):
#: bound as one op, their combiner is not user code to capture.
COMBINER_PRIMITIVES = frozenset(
    {
        "scatter",
        "scatter-add",
        "scatter-sub",
        "scatter-mul",
        "scatter-min",
        "scatter-max",
        "scatter_add",
        "scatter_sub",
        "scatter_mul",
        "scatter_min",
        "scatter_max",
        "reduce",
        "reduce_window",
    }
)
CONTROL_PRIMITIVES = frozenset({"scan", "cond", "while"})
CALLBACK_PRIMITIVES = frozenset({"pure_callback", "io_callback", "debug_callback", "debug_print", "callback"})


#: This backend's typed refusals, built by the kit the same way for every backend.
REFUSALS = Refusals("jax")
refuse, option, value_invalid = REFUSALS.refuse, REFUSALS.option, REFUSALS.value_invalid


def _defined_in_library(closed: Any) -> bool:
    """Whether a jitted function is the framework's own (``jax.nn.relu`` jits internally),
    read from the jaxpr's debug info."""
    jaxpr = getattr(closed, "jaxpr", closed)
    info = getattr(jaxpr, "debug_info", None)
    source = getattr(info, "func_src_info", None) or ""
    return in_packages(source.rsplit(" at ", 1)[-1].rsplit(":", 1)[0], ("jax", "equinox", "flax"))


def _unspecified(sharding: Any) -> bool:
    return sharding is None or type(sharding).__name__ == "UnspecifiedValue"


def check_constants(consts: Any) -> None:
    """A closure array whose buffer is gone (deleted or donated) cannot be recorded."""
    for value in consts:
        is_deleted = getattr(value, "is_deleted", None)
        if is_deleted is not None and is_deleted():
            raise refuse(
                "the function closes over an array whose buffer was deleted or donated",
                "constant_unrealizable",
                "pass the array as an input or parameter, or keep it alive",
            )


def check(jaxpr: Any, mode: str, attributed: bool) -> None:
    """Raises ``BackendUnsupportedError`` for the first equation the capture cannot serve."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if eqn.effects or name in CALLBACK_PRIMITIVES:
            raise refuse(
                f"the function has callback effects ({name}); replay would run them again",
                "callback_effects",
                "remove jax.debug.print / pure_callback / io_callback from the traced function",
            )
        if name in ("jit", "pjit"):
            _check_jit(eqn, attributed)
        elif (
            name in CONTROL_PRIMITIVES
            or name in REGION_PRIMITIVES
            or name in ("checkpoint", "remat", "remat2")
        ):
            what = {"custom_vjp_call": "custom_vjp", "custom_vjp_call_jaxpr": "custom_vjp"}.get(name, name)
            if attributed:
                raise refuse(
                    f"{what} inside an attributed module: its equations would escape the module attribution",
                    "nested_primitive_unsupported",
                    "move it outside the module, or trace a raw function_root callable fn(params, *inputs)",
                )
            if mode == "reject" and name not in _REMAT:
                raise refuse(
                    f"{what} under jax_control_flow='reject'",
                    "nested_primitive_unsupported",
                    "use jax_control_flow='unroll' (the default) or 'region'",
                )
        elif name == "custom_linear_solve":
            check(eqn.params["jaxprs"].solve.jaxpr, mode, attributed)
            continue
        elif name in COMBINER_PRIMITIVES:
            continue
        elif name not in CALL_PRIMITIVES and any(True for _ in jaxprs_in_params(eqn.params)):
            raise refuse(
                f"the nested-jaxpr primitive {name} cannot be captured per equation",
                "nested_primitive_unsupported",
                "trace the function without it, or use the PyTorch backend",
            )
        if name in REGION_PRIMITIVES:
            continue
        for inner in jaxprs_in_params(eqn.params):
            check(inner, mode, attributed)


def _check_jit(eqn: Any, attributed: bool) -> None:
    params = eqn.params
    closed = params["jaxpr"]
    if attributed and not _defined_in_library(closed):
        raise refuse(
            "jax.jit inside an attributed module: its equations would escape the module attribution",
            "nested_primitive_unsupported",
            "remove the inner jax.jit, or trace a raw function_root callable fn(params, *inputs)",
        )
    if any(params.get("donated_invars", ())):
        raise refuse(
            "a nested jax.jit call donates its inputs",
            "nested_primitive_unsupported",
            "drop donate_argnums from the inner jax.jit",
        )
    shardings = tuple(params.get("in_shardings", ())) + tuple(params.get("out_shardings", ()))
    if not all(_unspecified(sharding) for sharding in shardings):
        raise refuse(
            "a nested jax.jit call has explicit shardings",
            "nested_primitive_unsupported",
            "drop in_shardings/out_shardings from the inner jax.jit",
        )
    if getattr(closed, "consts", ()):
        raise refuse(
            "a nested jax.jit call closes over constants",
            "nested_primitive_unsupported",
            "pass the closed-over arrays to the inner function as arguments",
        )
