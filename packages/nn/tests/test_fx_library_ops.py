"""fiamma.fx and fiamma.library operators: one call_function node per operator call (its
inside not traced), generated code naming it ``fiamma.ops.<ns>.<op>.<overload>``, mutating
operators kept by dead-code elimination, as torch.fx does with custom operators."""

import copy
import pickle

import fiamma
import fiamma.fx as fx
from fiamma.library import custom_op

T = fiamma.Tensor


@custom_op("fxlib::twice_np", mutates_args=())
def twice_np(x: T, k: int) -> T:
    return fiamma.from_numpy(x.numpy() * 2 + k)  # NumPy: a trace could not follow it


@custom_op("fxlib::fill", mutates_args={"out"})
def fill(out: T, v: float) -> None:
    out.fill_(v)


def _f(x, o):
    fill(o, 1.0)
    return fiamma.ops.fxlib.twice_np(x, 1) + o


def test_operator_calls_are_single_nodes_and_run():
    gm = fx.symbolic_trace(_f)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert calls[0].target is fiamma.ops.fxlib.fill.default
    assert calls[0].name == "fill_default"
    assert calls[1].target is fiamma.ops.fxlib.twice_np.default
    assert "fiamma.ops.fxlib.twice_np.default(x, 1)" in gm.code
    o = fiamma.zeros(2)
    assert gm(fiamma.ones(2), o).tolist() == [4.0, 4.0] and o.tolist() == [1.0, 1.0]


def test_dead_code_elimination_keeps_mutating_operators():
    gm = fx.symbolic_trace(_f)
    mutating = [n for n in gm.graph.nodes if n.target is fiamma.ops.fxlib.fill.default][0]
    pure = [n for n in gm.graph.nodes if n.target is fiamma.ops.fxlib.twice_np.default][0]
    assert mutating.is_impure() and not pure.is_impure()
    gm.graph.eliminate_dead_code()
    assert mutating in list(gm.graph.nodes)


def test_graph_modules_with_operators_copy_and_pickle():
    gm = fx.symbolic_trace(_f)
    for g2 in (copy.deepcopy(gm), pickle.loads(pickle.dumps(gm))):
        assert g2(fiamma.ones(2), fiamma.zeros(2)).tolist() == [4.0, 4.0]
