"""split / split_with_sizes / chunk / unbind record ONE multi-output view node (PyTorch's
SplitBackward0, SplitWithSizesBackward0, UnbindBackward0) whose backward joins the pieces'
gradients in one pass: first and second derivatives against finite differences, pieces without
a gradient, in-place writes into a piece or into the base after the split, and the tracer path
(one narrow/select per piece, unchanged)."""

import numpy as np
import pytest
from _formula_check import check, leaf, noncontig, rand

import fiamma
from fiamma import _grad_hook as G

CASES = {
    "split_int": lambda t: t.split(2, 1),
    "split_int_uneven": lambda t: t.split(3, 1),
    "split_sizes": lambda t: t.split([1, 3], 1),
    "split_sizes_zero_piece": lambda t: t.split([0, 4, 0], 1),
    "split_negdim": lambda t: t.split(1, -2),
    "chunk": lambda t: t.chunk(3, 1),
    "unbind0": lambda t: t.unbind(0),
    "unbind1": lambda t: t.unbind(1),
    "split_some_unused": lambda t: t.split(1, 1)[1:3],
    "unbind_one_used": lambda t: (t.unbind(0)[1] * 2,),
    "split_then_ops": lambda t: [a * b for a, b in zip(t.split(2, 1), t.split(2, 1)[::-1])],
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("layout", ["contiguous", "noncontig"])
def test_first_and_second_derivatives(name, layout):
    x = leaf(rand(3, 4, seed=1)) if layout == "contiguous" else noncontig(3, 4)
    check(CASES[name], x)


def test_node_names_and_one_node():
    x = fiamma.randn(4, 6, requires_grad=True)
    a, b = x.split(3, 1)
    assert a.grad_fn is b.grad_fn and a.grad_fn.name() == "SplitBackward0"
    assert x.chunk(2, 1)[0].grad_fn.name() == "SplitBackward0"
    p = x.split([2, 4], 1)
    assert p[0].grad_fn is p[1].grad_fn and p[0].grad_fn.name() == "SplitWithSizesBackward0"
    u = x.unbind(0)
    assert len({id(t.grad_fn) for t in u}) == 1 and u[0].grad_fn.name() == "UnbindBackward0"
    # pieces are views of x's memory
    assert a.data_ptr() == x.data_ptr() and a._base is x
    # a single piece keeps the single-view node
    assert x.split(6, 1)[0].grad_fn.name() == "NarrowBackward0"


def test_values_against_numpy():
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((5, 7))
    x = fiamma.tensor(xn, requires_grad=True)
    a, b, c = x.split([2, 0, 5], 1)
    (a.exp().sum() + (c * c).sum()).backward()
    ref = np.concatenate([np.exp(xn[:, :2]), 2 * xn[:, 2:]], 1)
    np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-12)
    x.grad = None
    rows = x.unbind(0)
    (rows[0] * rows[4]).sum().backward()
    ref = np.zeros_like(xn)
    ref[0], ref[4] = xn[4], xn[0]
    np.testing.assert_array_equal(x.grad.numpy(), ref)


def test_inplace_into_a_piece():
    xn = np.arange(12.0).reshape(3, 4)
    x = fiamma.tensor(xn, requires_grad=True)
    y = x * 1.0
    p, q = y.split(2, 1)
    p.mul_(5.0)
    (y * y).sum().backward()  # y = [5 x[:, :2], x[:, 2:]]
    ref = np.concatenate([50 * xn[:, :2], 2 * xn[:, 2:]], 1)
    np.testing.assert_allclose(x.grad.numpy(), ref)
    # the other piece, used after the write, still reaches x
    x.grad = None
    y = x * 1.0
    p, q = y.split(2, 1)
    p.add_(1.0)
    (q * 3.0).sum().backward()
    ref = np.concatenate([np.zeros((3, 2)), np.full((3, 2), 3.0)], 1)
    np.testing.assert_allclose(x.grad.numpy(), ref)


def test_base_written_after_split():
    x = fiamma.tensor(np.ones((2, 4)), requires_grad=True)
    y = x * 2.0
    a, b = y.unbind(0)
    y.mul_(3.0)  # a and b now show 6 x; their history follows the base's
    (a * 1.0 + b * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[6.0] * 4, [12.0] * 4])


def test_integer_and_no_grad_pieces_record_nothing():
    x = fiamma.arange(12).view(3, 4)
    assert all(t.grad_fn is None for t in x.split(2, 1))
    y = fiamma.randn(3, 4, requires_grad=True)
    with fiamma.no_grad():
        assert all(t.grad_fn is None and not t.requires_grad for t in y.unbind(0))


def test_tracer_sees_one_view_per_piece():
    seen = []

    class Tracer:
        def record(self, op, out, inputs, kwargs):
            seen.append((str(op), type(out).__name__))

    x = fiamma.randn(2, 4, requires_grad=True)
    prev = G.set_trace_hook(Tracer())
    try:
        x.split(2, 1)
        x.unbind(0)
    finally:
        G.set_trace_hook(prev)
    assert seen == [("narrow", "Tensor")] * 2 + [("select", "Tensor")] * 2


def test_lstm_style_time_loop_gradient():
    """The RNN idiom: unbind over time, a cell per step, stack: gradient against NumPy."""
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((6, 2, 3))
    wn = rng.standard_normal((3, 3)) * 0.5
    x = fiamma.tensor(xn, requires_grad=True)
    w = fiamma.tensor(wn, requires_grad=True)
    h = fiamma.zeros(2, 3, dtype=fiamma.float64)
    outs = []
    for xt in x.unbind(0):
        h = (xt + h @ w).tanh()
        outs.append(h)
    fiamma.stack(outs).sum().backward()

    # NumPy reference by reverse-mode by hand
    hs = [np.zeros((2, 3))]
    for t in range(6):
        hs.append(np.tanh(xn[t] + hs[-1] @ wn))
    gx = np.zeros_like(xn)
    gw = np.zeros_like(wn)
    gh = np.zeros((2, 3))
    for t in reversed(range(6)):
        gh = gh + 1.0
        gz = gh * (1 - hs[t + 1] ** 2)
        gx[t] = gz
        gw += hs[t].T @ gz
        gh = gz @ wn.T
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-10)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-10)
