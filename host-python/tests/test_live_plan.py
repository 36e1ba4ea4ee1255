"""The live plan as the adapter evaluates it: compiled by the real core against declared modules,
turned into one function by the session's kit, and asked about ops the way a capture asks
(function name, the module calls open now, whether the value can still be named)."""

from __future__ import annotations

import pytest

import torchlens as tl
from torchlens._core import core
from torchlens.adapter_kit.live_plan import (
    REJECTED,
    ROOT_CALL,
    SELECTED,
    WAIT_CORE,
    WAIT_EXIT,
    WAIT_GRAPH,
    WAIT_WINDOW,
    compile_live_plan,
)

ENCODER, BLOCK, SHARED = 3, 4, 5


def plan_for(selector):
    session = core().start_session(True, False, selector.arena())
    session.module(0, ["self"], "Net", False, False)
    session.module(ENCODER, ["encoder"], "Encoder", False, False)
    session.module(BLOCK, ["encoder.block"], "Block", False, False)
    session.module(SHARED, ["shared", "encoder.alias"], "Linear", False, False)
    session.flush()
    plan = compile_live_plan(session.live_plan())
    session.abandon()
    return plan


ROOT_ONLY = {ROOT_CALL: [1]}
IN_BLOCK = {ROOT_CALL: [1], ENCODER: [1], BLOCK: [2]}
IN_SHARED_SECOND_CALL = {ROOT_CALL: [1], SHARED: [2]}


@pytest.mark.parametrize(
    "selector, func, open_calls, named, answer",
    [
        (tl.func("relu"), "relu", ROOT_ONLY, True, SELECTED),
        (tl.func("relu"), "relu_", ROOT_ONLY, True, SELECTED),
        (tl.func("add"), "__radd__", ROOT_ONLY, True, SELECTED),
        (tl.func("relu"), "gelu", ROOT_ONLY, True, REJECTED),
        (tl.in_module("encoder"), "relu", IN_BLOCK, True, SELECTED),
        (tl.in_module("encoder.block:2"), "relu", IN_BLOCK, True, SELECTED),
        (tl.in_module("encoder.block:1"), "relu", IN_BLOCK, True, REJECTED),
        (tl.in_module("encoder.alias:2"), "relu", IN_SHARED_SECOND_CALL, True, SELECTED),
        (tl.in_module("self"), "relu", ROOT_ONLY, True, SELECTED),
        (tl.module("encoder"), "relu", IN_BLOCK, True, WAIT_EXIT),
        (tl.module("encoder"), "relu", IN_BLOCK, False, REJECTED),
        (tl.module("encoder"), "relu", ROOT_ONLY, True, REJECTED),
        (tl.label("conv2d_3_7"), "conv2d", ROOT_ONLY, True, WAIT_CORE),
        (tl.label("conv2d_3_7:2"), "relu", ROOT_ONLY, True, REJECTED),
        (tl.label_contains("Norm"), "layer_norm", ROOT_ONLY, True, SELECTED),
        (tl.label_contains("m_1"), "layer_norm", ROOT_ONLY, True, WAIT_CORE),
        (tl.label_contains(":2"), "relu", ROOT_ONLY, True, WAIT_CORE),
        (tl.label_contains("conv"), "relu", ROOT_ONLY, True, REJECTED),
        (tl.func("relu") & tl.in_module("encoder"), "relu", ROOT_ONLY, True, REJECTED),
        (tl.func("relu") | tl.module("encoder"), "gelu", IN_BLOCK, True, WAIT_EXIT),
        (tl.func("relu") | tl.module("encoder"), "relu", IN_BLOCK, True, SELECTED),
        (~tl.module("encoder"), "relu", IN_BLOCK, False, SELECTED),
        (~tl.label("relu_1_2"), "relu", ROOT_ONLY, True, WAIT_CORE),
        (tl.func("relu") & tl.label("relu_1_2"), "gelu", ROOT_ONLY, True, REJECTED),
        (tl.label("relu_1_2") | tl.module("encoder"), "relu", IN_BLOCK, True, WAIT_CORE | WAIT_EXIT),
    ],
    ids=lambda value: repr(value) if not isinstance(value, dict) else None,
)
def test_the_plan_decides_from_the_ops_own_record(selector, func, open_calls, named, answer):
    assert plan_for(selector).decide(func, open_calls, named) == answer


def test_temporal_terms_wait_for_their_window_unless_the_first_term_rejects():
    plan = plan_for(tl.followed_by(tl.func("linear"), tl.func("relu"), within=3))
    assert plan.window == 3
    assert plan.decide("linear", ROOT_ONLY, True) == WAIT_WINDOW
    assert plan.decide("conv2d", ROOT_ONLY, True) == REJECTED
    look_back = plan_for(tl.preceded_by(tl.func("relu"), tl.func("linear")))
    assert look_back.decide("relu", ROOT_ONLY, True) == WAIT_CORE


def test_influence_terms_wait_for_the_core_without_sending_early():
    # The core answers from the graph with a later batch: the plan says so unless another term
    # already rejects the op.
    downstream = plan_for(tl.downstream_of(tl.func("conv2d")) & tl.func("relu"))
    assert downstream.decide("relu", ROOT_ONLY, True) == WAIT_GRAPH
    assert downstream.decide("gelu", ROOT_ONLY, True) == REJECTED
    upstream = plan_for(tl.upstream_of("output_1") | tl.func("relu"))
    assert upstream.decide("relu", ROOT_ONLY, True) == SELECTED
    assert upstream.decide("gelu", ROOT_ONLY, True) == WAIT_GRAPH
    assert not WAIT_GRAPH & WAIT_CORE


def test_module_boundary_terms_name_the_calls_they_match():
    plan = plan_for(tl.module("encoder.alias:2") | tl.module("self"))
    assert plan.is_boundary(SHARED, 2, False)
    assert not plan.is_boundary(SHARED, 1, False)
    assert plan.is_boundary(0, 1, True)
    assert not plan.is_boundary(ENCODER, 1, False)


def test_the_core_normalizes_function_names_for_the_plan():
    assert core().op_type("__iadd__") == "add"
    assert core().op_type("layer_norm") == "layernorm"


def test_rules_answer_at_the_op_ask_the_core_for_labels_and_wait_for_exits():
    """A capture driven by hand through the real session: rules registered before the forward
    answer op by op the way an adapter's live edit or early stop asks."""
    from torchlens.adapter_kit import CaptureRequest, CaptureSession, SaveRequest
    from torchlens.options import CaptureOptions

    request = CaptureRequest(
        spec=None, model=None, args=(), kwargs={}, options=CaptureOptions(), save=SaveRequest()
    )
    with CaptureSession(request) as session:
        session.module(0, ["self"], "Net", False, False)
        session.module(1, ["block"], "Block", False, False)
        by_func = session.rule(tl.func("relu"))
        by_label = session.rule(tl.label("tanh_1_3"))
        by_boundary = session.rule(tl.module("block"))
        session.input("x", 1, None, (2,), "float32")
        session.enter(1)
        session.op("relu", [(1, 0)], [(2, None, (2,), "float32")], keep=False)
        assert by_func.at_op("relu", 2) is True
        assert by_label.at_op("relu", 2) is False
        assert by_boundary.at_op("relu", 2) is None
        assert by_boundary.waits_for_exits and not by_func.waits_for_exits
        session.op("tanh", [(2, 0)], [(3, None, (2,), "float32")], keep=False)
        assert by_label.at_op("tanh", 3) is True
        session.exit(1, [3])
        assert by_boundary.at_exit([3]) == [3]
        assert by_func.at_exit([3]) == []
        session.abort()
