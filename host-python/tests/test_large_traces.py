"""A trace far past what one call may copy out of the core component: wasmtime stops a call
that moves too much between host and guest (``sandbox_trap ... fuel allocated for hostcalls has
been exhausted`` on ``trace.ops`` of a 200,000-op trace), so the hosts page the bulk queries.
Built from raw events (no framework), under both hosts' paging loops."""

from __future__ import annotations

import pytest

from torchlens import _core
from torchlens._hosts import wasmtime_py
from torchlens._hosts.wasmtime_py import bindings
from torchlens.collector_pause import collector_paused

#: Ops of the chain: well past the ~120,000 ops one unpaged ``ops`` call copied before it trapped.
CHAIN_OPS = 200_000


def _chain(core, ops: int):
    session = core.start_session(False, False)
    session.module(0, ["self"], "Chain", False, False)
    session.input("x", 1, (4,), "float32", None)
    session.enter(0)
    for step in range(ops):
        session.op("relu", [(step + 1, 0)], [(step + 2, (4,), "float32", None)], False, [], None)
    session.exit(0, [ops + 1])
    session.output("out", ops + 1)
    trace, _decisions = session.finish()
    return trace


def test_every_op_of_a_200k_op_trace_comes_back_without_a_trap():
    trace = _chain(_core.core(), CHAIN_OPS)
    # As Trace.ops does: 200,000 dicts at once would set the cyclic collector off many times.
    with collector_paused():
        ops = trace.ops()
    # The input, every relu, the output; in order, across page boundaries.
    assert len(ops) == CHAIN_OPS + 2
    assert [op["func_name"] for op in ops[1:-1]] == ["relu"] * CHAIN_OPS
    assert [op["id"] for op in ops] == list(range(CHAIN_OPS + 2))
    assert len(trace.ops(CHAIN_OPS - 5, 100)) == 7


@pytest.mark.parametrize("page", [1, 3, 16_384])
def test_the_pure_python_host_pages_the_same_ops(monkeypatch, page):
    # The wasmtime-py host lifts values in Python (about 14k ops/s): its paging loop is checked
    # on a small trace with small pages, against one unpaged call.
    core = wasmtime_py.core()
    trace = _chain(core, 10)
    whole = trace._call("ops", 0, 0xFFFFFFFF)
    monkeypatch.setattr(bindings, "OPS_PER_CALL", page)
    assert [op["id"] for op in trace.ops()] == [op["id"] for op in whole] == list(range(12))
    assert [op["id"] for op in trace.ops(4, 5)] == [4, 5, 6, 7, 8]
