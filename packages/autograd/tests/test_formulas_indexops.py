"""First and second derivatives of the gather/scatter family against finite differences
(float64), with duplicate indices and broadcasting masks, and the in-place forms. Skipped where
core does not have these ops yet."""

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma

pytestmark = pytest.mark.skipif(not hasattr(fiamma, "scatter_add"),
                                reason="core's gather/scatter ops are not available")


def _i(*rows):
    return fiamma.tensor(list(rows))


IDX = _i([0, 2, 2], [3, 3, 1], [1, 0, 0])  # (3, 3) into dim 1 of a (3, 4): duplicates


def test_gather_index_select_take():
    rng = np.random.default_rng(0)
    x = rand(3, 4, rng=rng)
    check(lambda t: fiamma.gather(t, 1, IDX), x)
    check(lambda t: fiamma.gather(t, 0, _i([0, 1, 2, 2], [2, 2, 0, 1])), noncontig(3, 4, rng=rng))
    check(lambda t: fiamma.index_select(t, 1, _i(3, 0, 3)), x)
    check(lambda t: fiamma.index_select(t, 0, _i(2, 2)), noncontig(3, 4, rng=rng))
    check(lambda t: fiamma.take(t, _i([0, 11], [-1, 5])), x)
    check(lambda t: fiamma.take_along_dim(t, _i([1], [0], [3]), 1), x)
    check(lambda t: fiamma.take_along_dim(t, fiamma.tensor([[[1, 3], [0, 0]]]), 2),
          rand(3, 1, 4, rng=rng))
    check(lambda t: fiamma.take_along_dim(t, _i(5, 0, 5)), x)


@pytest.mark.parametrize("op", ["scatter", "scatter_value", "scatter_add"])
def test_scatter(op):
    rng = np.random.default_rng(1)
    x, src = rand(3, 4, rng=rng), rand(3, 3, rng=rng)
    idx = _i([0, 2, 1], [3, 1, 2], [1, 0, 3])  # no duplicates for scatter (last write wins)
    if op == "scatter":
        check(lambda a, b: fiamma.scatter(a, 1, idx, b), x, src)
    elif op == "scatter_value":
        check(lambda a: fiamma.scatter(a, 1, idx, 0.5), x)
    else:
        check(lambda a, b: fiamma.scatter_add(a, 1, IDX, b), x, src)
        check(lambda a, b: fiamma.scatter_add(a, 0, _i([0, 2, 2]), b), rand(3, 3, rng=rng),
              rand(1, 3, rng=rng))


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    rng = np.random.default_rng(2)
    low, high = (0.5, 2.0) if reduce == "prod" else (None, None)
    x = rand(3, 4, rng=rng, low=low, high=high)
    src = rand(3, 3, rng=rng, low=low, high=high)
    check(lambda a, b: fiamma.scatter_reduce(a, 1, IDX, b, reduce, include_self=include_self),
          x, src)


def test_index_add_copy_fill():
    rng = np.random.default_rng(3)
    x = rand(3, 4, rng=rng)
    check(lambda a, b: fiamma.index_add(a, 1, _i(3, 0, 3), b, alpha=-2.0), x, rand(3, 3, rng=rng))
    check(lambda a, b: fiamma.index_copy(a, 0, _i(2, 0), b), x, rand(2, 4, rng=rng))
    check(lambda a: fiamma.index_fill(a, 1, _i(1, 3), -1.0), noncontig(3, 4, rng=rng))


def test_masked():
    rng = np.random.default_rng(4)
    x = rand(3, 4, rng=rng)
    mask = fiamma.tensor(rng.standard_normal((3, 4)) > 0)
    row = fiamma.tensor([[True, False, True, False]])
    check(lambda a: fiamma.masked_fill(a, mask, 2.0), x)
    check(lambda a: fiamma.masked_fill(a, row, -1.0), noncontig(3, 4, rng=rng))
    v = fiamma.tensor(0.5, dtype=fiamma.float64, requires_grad=True)
    check(lambda a, w: fiamma.masked_fill(a, mask, w), x, v)
    check(lambda a: fiamma.masked_select(a, mask), x)
    check(lambda a: fiamma.masked_select(a, row), rand(4, rng=rng))  # input broadcasts
    check(lambda a, s: fiamma.masked_scatter(a, row, s), x, rand(10, rng=rng))


def test_put():
    rng = np.random.default_rng(5)
    x = rand(3, 4, rng=rng)
    check(lambda a, s: fiamma.put(a, _i(0, 5, -1), s), x, rand(3, rng=rng))
    check(lambda a, s: fiamma.put(a, _i(0, 5, 5), s, accumulate=True), x, rand(3, rng=rng))


@pytest.mark.parametrize("op", ["scatter_", "scatter_add_", "scatter_reduce_", "index_add_",
                                "index_copy_", "index_fill_", "masked_fill_", "masked_scatter_",
                                "put_"])
def test_inplace(op):
    rng = np.random.default_rng(6)
    mask = fiamma.tensor(rng.standard_normal((3, 4)) > 0)
    calls = {
        "scatter_": lambda y, s: y.scatter_(1, _i([0, 2, 1]), s[:1]),
        "scatter_add_": lambda y, s: y.scatter_add_(1, IDX, s),
        "scatter_reduce_": lambda y, s: y.scatter_reduce_(1, IDX, s, "mean"),
        "index_add_": lambda y, s: y.index_add_(1, _i(3, 0, 3), s),
        "index_copy_": lambda y, s: y.index_copy_(0, _i(2, 0), s[:2, :1].expand(2, 4)),
        "index_fill_": lambda y, s: y.index_fill_(1, _i(1), 3.0),
        "masked_fill_": lambda y, s: y.masked_fill_(mask, 3.0),
        "masked_scatter_": lambda y, s: y.masked_scatter_(mask, fiamma.cat([s.reshape(-1)] * 2)),
        "put_": lambda y, s: y.put_(_i(0, 7), s[0, :2]),
    }

    def f(a, s):
        y = a * 2.0
        calls[op](y, s)
        return y * a

    check(f, rand(3, 4, rng=rng), rand(3, 3, rng=rng))


@pytest.mark.parametrize("name", ["index_select", "embedding_rows", "where", "addcmul", "addcdiv"])
def test_unread_inputs_may_be_written_before_backward(name):
    # inputs whose values the derivative does not read are not saved, as in PyTorch: writing
    # into them after the forward pass (an optimizer step on an embedding table, the selected
    # values of where, addcmul's added input) keeps backward working with the same gradients
    rng = np.random.default_rng(0)
    mk = lambda *s: fiamma.tensor(rng.standard_normal(s) + 2.0, requires_grad=True)  # noqa: E731
    idx = fiamma.tensor([2, 0, 2])
    if name in ("index_select", "embedding_rows"):
        xs, written = [mk(4, 3)], 0
        f = (lambda w: w.index_select(0, idx)) if name == "index_select" else (lambda w: w[idx])
    elif name == "where":
        xs, written = [mk(3), mk(3)], 0
        f = lambda a, b: fiamma.where(fiamma.tensor([True, False, True]), a, b)  # noqa: E731
    else:
        xs, written = [mk(3), mk(3), mk(3)], 0
        f = getattr(fiamma, name)
    y = f(*xs)
    g = fiamma.tensor(rng.standard_normal(tuple(y.shape)))
    want = fiamma.autograd.grad(y, xs, g, retain_graph=True)
    with fiamma.no_grad():
        xs[written].add_(0.5)
        if name == "where":
            xs[1].add_(0.5)
    got = fiamma.autograd.grad(y, xs, g)
    for a, e in zip(got, want):
        np.testing.assert_array_equal(a.numpy(), e.numpy())


@pytest.mark.parametrize("case", ["max_dim", "min_dim_keepdim", "lerp_scalar"])
def test_call_dependent_unsaved_inputs(case):
    # derivative(unsaved=callable): max/min along a dim do not keep the input (the indices
    # route the gradient), lerp with a scalar weight does not keep its ends, as in PyTorch
    rng = np.random.default_rng(1)
    a = fiamma.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = fiamma.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    if case == "max_dim":
        xs, f = [a], lambda x: x.max(1)[0]
    elif case == "min_dim_keepdim":
        xs, f = [a], lambda x: fiamma.min(x, 0, keepdim=True)[0]
    else:
        xs, f = [a, b], lambda x, y: fiamma.lerp(x, y, 0.25)
    y = f(*xs)
    g = fiamma.tensor(rng.standard_normal(tuple(y.shape)))
    want = fiamma.autograd.grad(y, xs, g, retain_graph=True)
    with fiamma.no_grad():
        for x in xs:
            x.mul_(-3.0)
    got = fiamma.autograd.grad(y, xs, g)
    for u, v in zip(got, want):
        np.testing.assert_array_equal(u.numpy(), v.numpy())


@pytest.mark.parametrize("case", ["max_all", "lerp_tensor_weight"])
def test_call_dependent_inputs_still_saved(case):
    a = fiamma.tensor([1.0, 3.0, 2.0], requires_grad=True)
    if case == "max_all":
        y = a.max()                         # the gradient is split among equal maxima: needs a
    else:
        y = fiamma.lerp(a, a * 2, fiamma.tensor([0.1, 0.2, 0.3], requires_grad=True)).sum()
    with fiamma.no_grad():
        a.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_with_zeros(include_self):
    # a group's lone zero gets the product of the others; with two zeros every gradient is 0
    x = fiamma.tensor([0.0, 2.0, 3.0, 0.0], dtype=fiamma.float64)
    src = fiamma.tensor([0.0, 5.0, 0.0, 4.0, 7.0], dtype=fiamma.float64)
    idx = fiamma.tensor([0, 0, 1, 1, 2])
    check(lambda a, b: fiamma.scatter_reduce(a, 0, idx, b, "prod", include_self=include_self),
          x.clone().requires_grad_(), src.clone().requires_grad_())
    a, b = x.clone().requires_grad_(), src.clone().requires_grad_()
    gx, gs = fiamma.autograd.grad(
        fiamma.scatter_reduce(a, 0, idx, b, "prod", include_self=include_self).sum(), (a, b))
    if include_self:  # groups {x0, s0, s1}, {x1, s2, s3}, {x2, s4}; x3 untouched
        assert gx.tolist() == [0.0, 0.0, 7.0, 1.0]
        assert gs.tolist() == [0.0, 0.0, 8.0, 0.0, 3.0]
    else:
        assert gx.tolist() == [0.0, 0.0, 0.0, 1.0]
        assert gs.tolist() == [5.0, 0.0, 4.0, 0.0, 1.0]
    # index_reduce shares the formula
    a = x.reshape(1, 4).clone().requires_grad_()
    g, = fiamma.autograd.grad(fiamma.index_reduce(a, 1, idx, src.reshape(1, 5), "prod",
                                                  include_self=include_self).sum(), a)
    assert g.reshape(-1).tolist() == gx.tolist()


def test_index_fill_value_grad_counts_positions_once():
    x = fiamma.zeros(2, 5, dtype=fiamma.float64)
    v = fiamma.tensor(1.0, dtype=fiamma.float64, requires_grad=True)
    y = fiamma.index_fill(x, 1, _i(0, 0, 1, -4), v)  # -4 is position 1 again
    g, = fiamma.autograd.grad(y.sum(), v)
    assert g.item() == 4.0  # 2 rows x positions {0, 1}
    check(lambda a, b: fiamma.index_fill(a, 1, _i(3, 3, 0), b), rand(2, 4),
          fiamma.tensor(0.5, dtype=fiamma.float64, requires_grad=True))


def test_take_along_dim_negative_indices_grad():
    x = rand(3, 4)
    check(lambda t: fiamma.take_along_dim(t, _i([-1, 0], [2, -4], [-2, -2]), 1), x)
    a = x.clone().requires_grad_()
    g, = fiamma.autograd.grad(fiamma.take_along_dim(a, _i([-1], [0], [-1]), 1).sum(), a)
    assert g.tolist() == [[0, 0, 0, 1], [1, 0, 0, 0], [0, 0, 0, 1]]
