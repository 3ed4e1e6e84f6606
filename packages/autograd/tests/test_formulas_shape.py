"""First and second derivatives of views, indexing, joins, copies and casts against finite
differences (float64): every view op on contiguous and non-contiguous inputs, overlapping views
(expand, unfold, as_strided) and views of expanded tensors, advanced indexing with duplicates
and masks, index_put/setitem with and without accumulation, cat/stack/split."""

import numpy as np
import pytest
from _formula_check import check, leaf, noncontig, rand

import fiamma

VIEWS = {
    "view": lambda t: t.view(4, 3),
    "reshape": lambda t: t.reshape(2, 6),
    "reshape_noncontig": lambda t: t.t().reshape(-1),
    "flatten": lambda t: t.flatten(),
    "unflatten": lambda t: t.unflatten(1, (2, 2)),
    "view_as": lambda t: t.view_as(fiamma.zeros(12)),
    "squeeze_unsqueeze": lambda t: t.unsqueeze(1).unsqueeze(-1).squeeze(),
    "squeeze_dim": lambda t: t.unsqueeze(0).squeeze(0),
    "t": lambda t: t.t(),
    "T": lambda t: t.T,
    "transpose": lambda t: t.transpose(0, 1),
    "permute": lambda t: t.unsqueeze(1).permute(2, 0, 1),
    "expand": lambda t: t.unsqueeze(0).expand(2, 3, 4) * fiamma.arange(24.0).view(2, 3, 4),
    "expand_as": lambda t: t[:1].expand_as(t) * t,
    "broadcast_to": lambda t: t[:, :1].broadcast_to((3, 4)) * t,
    "narrow": lambda t: t.narrow(1, 1, 2),
    "select": lambda t: t.select(1, 2),
    "unbind": lambda t: t.unbind(1)[3],
    "slice_step": lambda t: t[::2, 1::2],
    "getitem_int": lambda t: t[1],
    "getitem_neg": lambda t: t[-1, -2],
    "getitem_mixed": lambda t: t[None, 1:, ..., None, ::3],
    "getitem_ellipsis": lambda t: t[..., 2],
    "unfold": lambda t: t.unfold(1, 2, 1),            # overlapping windows
    "unfold_step": lambda t: t.unfold(0, 2, 1).unfold(1, 3, 2),
    "as_strided": lambda t: t.as_strided((3, 3), (1, 2), 1),  # overlapping
    "as_strided_view": lambda t: t.contiguous().as_strided((2, 2), (4, 1), 5),
    "chain": lambda t: t.t()[1:].unsqueeze(0).transpose(0, 2)[0, :, ::2],
    "chunk": lambda t: t.chunk(2, 1)[1],
    "split": lambda t: t.split([1, 3], 1)[1],
    "split_size": lambda t: t.split(2, 0)[1],
    "tensor_split": lambda t: t.tensor_split(3, dim=1)[1],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views(name):
    fn = VIEWS[name]
    rng = np.random.default_rng(0)
    check(fn, rand(3, 4, rng=rng))
    if name not in ("view", "view_as", "unflatten", "as_strided_view", "as_strided"):
        check(fn, noncontig(3, 4, rng=rng))
    # a view of a view of a non-contiguous leaf
    if name in ("narrow", "select", "slice_step", "getitem_int", "unfold", "chain"):
        base = rand(6, 8, rng=rng).detach()
        check(fn, leaf(base[1:4, ::2]))


def test_views_0d_and_empty():
    rng = np.random.default_rng(1)
    check(lambda t: t.reshape(1, 1).expand(2, 3), rand(rng=rng))
    check(lambda t: t.unsqueeze(0)[0], rand(rng=rng))
    check(lambda t: t[...], rand(rng=rng))
    check(lambda t: t.t(), rand(3, rng=rng))
    check(lambda t: t[1:1], rand(3, 2, rng=rng))
    check(lambda t: t.narrow(0, 0, 0), rand(0, 2, rng=rng))


def test_views_of_expanded_tensors():
    rng = np.random.default_rng(2)
    # the input of narrow/select/unfold is itself overlapping (stride 0)
    weights = fiamma.arange(8.0).view(2, 4)
    check(lambda t: t.expand(3, 4).narrow(0, 1, 2) * weights, rand(4, rng=rng))
    check(lambda t: t.expand(3, 4)[1], rand(4, rng=rng))
    check(lambda t: t.expand(3, 4).t()[::2], rand(4, rng=rng))
    check(lambda t: t.unsqueeze(1).expand(3, 4).unfold(1, 2, 2) * 1.5, rand(3, rng=rng))
    check(lambda t: t.expand(2, 3, 4).permute(2, 0, 1)[1:, 1], rand(3, 1, rng=rng))


def test_view_gradient_exact():
    x = fiamma.arange(6.0, dtype=fiamma.float64).reshape(2, 3).requires_grad_()
    (g,) = fiamma.autograd.grad(x.unfold(1, 2, 1).sum(), x)
    assert g.tolist() == [[1.0, 2.0, 1.0], [1.0, 2.0, 1.0]]
    (g,) = fiamma.autograd.grad(x.t()[1:].sum(), x)
    assert g.tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]


# ---- advanced indexing ----------------------------------------------------------------------

def _i(*v):
    return fiamma.tensor(list(v))


INDEXING = {
    "int_tensor": lambda t: t[_i(2, 0, 2)],                      # duplicates accumulate
    "int_tensor_2d": lambda t: t[fiamma.tensor([[0, 1], [2, 2]])],
    "list": lambda t: t[[1, 1, 0]],
    "second_dim": lambda t: t[:, _i(3, 1, 3)],
    "two_adjacent": lambda t: t[_i(0, 2), _i(1, 3)],
    "broadcast_pair": lambda t: t[_i(0, 2).view(2, 1), _i(1, 3, 3)],
    "separated": lambda t: t.unsqueeze(1).expand(3, 2, 4)[_i(0, 2), :, _i(1, 3)],
    "int_and_adv": lambda t: t[1, _i(0, 0, 3)],
    "slice_and_adv": lambda t: t[1:, _i(2, 0)],
    "mask": lambda t: t[t > 0],
    "row_mask": lambda t: t[fiamma.tensor([True, False, True])],
    "mask_cols": lambda t: t[:, fiamma.tensor([False, True, True, False])],
    "bool_scalar": lambda t: t[True],
    "negative": lambda t: t[_i(-1, -3)],
}


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_advanced_indexing(name):
    rng = np.random.default_rng(3)
    fn = INDEXING[name]
    check(fn, rand(3, 4, rng=rng))
    check(fn, noncontig(3, 4, rng=rng))


def test_index_duplicates_exact():
    x = fiamma.zeros(3, dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad(x[_i(2, 0, 2, 2)].sum(), x)
    assert g.tolist() == [1.0, 0.0, 3.0]


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate):
    rng = np.random.default_rng(4)
    x, v = rand(3, 4, rng=rng), rand(2, 4, rng=rng)
    idx = (_i(2, 0),)
    check(lambda a, b: a.index_put(idx, b, accumulate=accumulate), x, v)
    check(lambda a, b: fiamma.index_put(a, (None, _i(1, 3)), b, accumulate), x,
          rand(3, 2, rng=rng))
    check(lambda a, b: a.index_put((_i(0, 1), _i(2, 2)), b, accumulate=accumulate), x,
          rand(1, rng=rng))                                       # broadcast value
    check(lambda a, b: a.index_put((_i(1, 1),), b, accumulate=True), x, rand(4, rng=rng))
    mask = fiamma.tensor(rng.standard_normal((3, 4)) > 0)
    check(lambda a, b: a.index_put((mask,), b, accumulate=accumulate), noncontig(3, 4, rng=rng),
          rand(rng=rng))
    check(lambda a: a.index_put((_i(1),), fiamma.tensor(2.0, dtype=fiamma.float64),
                                accumulate=accumulate), x)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_inplace(accumulate):
    rng = np.random.default_rng(5)

    def f(a, b):
        y = a * 2.0
        y.index_put_((_i(0, 2),), b, accumulate=accumulate)
        return y

    check(f, rand(3, 4, rng=rng), rand(4, rng=rng))


SETITEM_KEYS = [1, (slice(None), 2), (slice(1, None), slice(None, None, 2)), _i(0, 2),
                (Ellipsis, _i(3, 0)), "mask"]


@pytest.mark.parametrize("k", range(len(SETITEM_KEYS)))
def test_setitem(k):
    rng = np.random.default_rng(6)
    key = SETITEM_KEYS[k]
    x = rand(3, 4, rng=rng)
    if key == "mask":
        key = fiamma.tensor(rng.standard_normal((3, 4)) > 0)
    probe = fiamma.zeros(3, 4)[key]

    def f(a, v):
        y = a * 2.0  # (exp would save its output: writing into it must raise)
        y[key] = v
        return y * a

    check(f, x, rand(*probe.shape, rng=rng))
    check(f, x, rand(rng=rng))                                    # broadcast value

    def g(a):
        y = a * 3.0
        y[key] = 0.5
        return y

    check(g, noncontig(3, 4, rng=rng))


def test_setitem_into_saved_output_raises():
    x = rand(3, seed=13)
    y = x.exp()
    y[0] = 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_setitem_through_view():
    rng = np.random.default_rng(7)

    def f(a, v):
        y = a * 1.0
        y[1:, 1:][0] = v
        return y.sin()

    check(f, rand(3, 4, rng=rng), rand(3, rng=rng))


def test_copy_():
    rng = np.random.default_rng(8)

    def f(a, s):
        y = a * 2.0
        y[1].copy_(s)
        return y

    check(f, rand(3, 4, rng=rng), rand(4, rng=rng))

    def g(a, s):
        y = a.exp()
        y.copy_(s)  # broadcast source
        return y * a

    check(g, rand(3, 4, rng=rng), rand(1, 4, rng=rng))


# ---- joins -----------------------------------------------------------------------------------

def test_cat_stack():
    rng = np.random.default_rng(9)
    a, b, c = rand(2, 3, rng=rng), rand(1, 3, rng=rng), noncontig(3, 3, rng=rng)
    check(lambda x, y, z: fiamma.cat([x, y, z]), a, b, c)
    check(lambda x, y: fiamma.cat([x, y.t()], 1), rand(3, 2, rng=rng), rand(1, 3, rng=rng))
    check(lambda x: fiamma.cat([x, x * 2, x], -1), a)
    check(lambda x, y: fiamma.cat([x, fiamma.zeros(0), y]), rand(2, rng=rng), rand(3, rng=rng))
    check(lambda x, y: fiamma.cat([x, y]), rand(0, 3, rng=rng), b)
    check(lambda x: fiamma.cat([x, b.detach()], 0), a)
    check(lambda x, y: fiamma.stack([x, y], 1), a, rand(2, 3, rng=rng))
    check(lambda x, y: fiamma.stack([x, y]), rand(rng=rng), rand(rng=rng))
    check(lambda x, y: fiamma.hstack([x, y]), a, rand(2, 1, rng=rng))
    check(lambda x, y: fiamma.vstack([x, y]), rand(3, rng=rng), rand(3, rng=rng))
    check(lambda x, y: fiamma.dstack([x, y]), a, a)
    check(lambda x, y: fiamma.column_stack([x, y]), rand(3, rng=rng), rand(3, 2, rng=rng))


def test_cat_mixed_dtypes():
    a = rand(2, seed=10)
    b = fiamma.tensor([1.0, 2.0], dtype=fiamma.float32, requires_grad=True)
    out = fiamma.cat([a, b])
    assert out.dtype is fiamma.float64
    ga, gb = fiamma.autograd.grad((out * fiamma.arange(4.0, dtype=fiamma.float64)).sum(), (a, b))
    assert ga.tolist() == [0.0, 1.0] and gb.tolist() == [2.0, 3.0] and gb.dtype is fiamma.float32


# ---- copies and casts --------------------------------------------------------------------------

def test_clone_contiguous():
    rng = np.random.default_rng(11)
    check(lambda t: t.clone() * t, rand(3, 4, rng=rng))
    check(lambda t: t.contiguous(), noncontig(3, 4, rng=rng))


def test_casts():
    x = rand(2, 3, seed=12)
    y = x.to(fiamma.float32)
    assert y.dtype is fiamma.float32 and y.requires_grad
    z = (y * y).to(fiamma.float64).sum() + x.float().double().sum()
    (g,) = fiamma.autograd.grad(z, x)
    assert g.dtype is fiamma.float64
    np.testing.assert_allclose(g.numpy(), 2 * x.detach().numpy() + 1, rtol=1e-6)
    # float32 leaf through float64 math
    w = fiamma.tensor([0.5, 1.5], dtype=fiamma.float32, requires_grad=True)
    (g,) = fiamma.autograd.grad(w.double().exp().sum(), w)
    assert g.dtype is fiamma.float32
    np.testing.assert_allclose(g.numpy(), np.exp([0.5, 1.5]), rtol=1e-6)
    # second order through casts
    check(lambda t: t.to(fiamma.float64) * t, x)
    check(lambda t: t.type_as(t).sin(), x)


# ---- fills ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fill", [
    lambda t: t.fill_(0.5), lambda t: t.zero_(), lambda t: t.uniform_(),
    lambda t: t.normal_(), lambda t: t.bernoulli_(0.5), lambda t: t.exponential_(),
])
def test_fills_cut_the_old_values(fill):
    x = rand(4, seed=14)
    y = x * 2.0
    fill(y[1:3])
    (g,) = fiamma.autograd.grad((y * 3.0).sum(), x)
    assert g.tolist() == [6.0, 0.0, 0.0, 6.0]
    y = x * 2.0
    fill(y)
    (g,) = fiamma.autograd.grad((y * 3.0).sum(), x)
    assert g.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_fill_on_leaf_requiring_grad_raises():
    x = rand(3, seed=15)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.fill_(1.0)
    with fiamma.no_grad():
        x.zero_()
    assert x.tolist() == [0.0, 0.0, 0.0]


def test_fill_with_tensor_value():
    x = rand(3, seed=16)
    v = fiamma.tensor(2.0, dtype=fiamma.float64, requires_grad=True)
    y = x * 1.0
    y.fill_(v)
    gx, gv = fiamma.autograd.grad((y * fiamma.arange(3.0, dtype=fiamma.float64)).sum(), (x, v))
    assert gx.tolist() == [0.0, 0.0, 0.0] and gv.item() == 3.0
