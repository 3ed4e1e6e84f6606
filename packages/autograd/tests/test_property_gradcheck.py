"""Property-based gradient checks of core's differentiable ops: gradcheck (float64, numerical
Jacobians) over random shapes (0-d and empty included), broadcasting, and operands that are
transposed, stepped, offset or expanded views; float32/float16/bfloat16 and mixed-precision
gradients against float64 ones. The fixed-shape formula tests (test_formulas_*) check second
derivatives and PyTorch's conventions at special points; these look for the shape, stride and
broadcast cases they do not list. Deterministic: see conftest.py."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from test_formulas_elementwise import BINARY, UNARY

import fiamma
from fiamma.autograd._gradprops import (
    F64,
    LAYOUTS,
    broadcast_shapes,
    check_grad,
    first,
    make_operand,
    operands,
    shapes,
)

FEW = settings(max_examples=6)
SOME = settings(max_examples=10)

# kinks inside the default [-2, 2] range (gradcheck's central differences straddle them)
KINKS = {"abs": (0.0,), "relu": (0.0,), "sign": (0.0,), "copysign": (0.0,),
         "nan_to_num": ()}
POSITIVE = {"pos_a": 0, "pos_b": 1}


# ---- elementwise ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(UNARY))
@FEW
@given(data=st.data(), shape=shapes(0, 3, 0, 3))
def test_unary(name, data, shape):
    fn, lo, hi = UNARY[name]
    lo, hi = (-2.0, 2.0) if lo is None else (lo, hi)
    ops = data.draw(operands([shape], lo, hi, KINKS.get(name, ())))
    check_grad(fn, ops)


@pytest.mark.parametrize("name", sorted(BINARY))
@FEW
@given(data=st.data(), shp=broadcast_shapes(2))
def test_binary_broadcast(name, data, shp):
    fn, kind = BINARY[name]
    domains = [(0.5, 2.0, ()) if POSITIVE.get(kind) == i else
               (-2.0, 2.0, KINKS.get(name, ()) if i == 1 else ()) for i in range(2)]
    rng_ops = data.draw(operands(shp, domains=domains))
    # fmod/remainder/floor division jump where a / b is an integer: keep a / b off them
    if name in ("remainder", "fmod", "div_floor", "div_trunc", "floor_divide"):
        a, b = (leaf.detach().numpy() for leaf, _ in rng_ops)
        ratio = np.broadcast_arrays(a, b)[0] / np.broadcast_arrays(a, b)[1]
        if np.any(np.abs(ratio - np.round(ratio)) < 1e-3):
            return
    check_grad(fn, rng_ops)


TERNARY = {
    "where": lambda c, a, b: fiamma.where(c > 0, a, b),
    "lerp": lambda s, a, b: fiamma.lerp(a, b, s),
    "addcmul": lambda a, b, c: fiamma.addcmul(a, b, c, value=0.7),
    "addcdiv": lambda a, b, c: fiamma.addcdiv(a, b, c.abs() + 0.5, value=-1.3),
    "clamp": lambda x, lo, hi: fiamma.clamp(x, lo - 1.0, hi + 1.0),
}


@pytest.mark.parametrize("name", sorted(TERNARY))
@FEW
@given(data=st.data(), shp=broadcast_shapes(3))
def test_ternary_broadcast(name, data, shp):
    check_grad(TERNARY[name], data.draw(operands(shp, away=(0.0,))))


# ---- reductions and scans ------------------------------------------------------------------

# name -> (fn(x, dim, keepdim), low, high, accepts a tuple of dims)
REDUCTIONS = {
    "sum": (lambda x, d, k: x.sum(d, keepdim=k), -2, 2, True),
    "mean": (lambda x, d, k: x.mean(d, keepdim=k), -2, 2, True),
    "nansum": (lambda x, d, k: fiamma.nansum(x, d, keepdim=k), -2, 2, True),
    "prod": (lambda x, d, k: x.prod(d, keepdim=k), 0.5, 1.5, False),
    "amax": (lambda x, d, k: x.amax(d, keepdim=k), -2, 2, True),
    "amin": (lambda x, d, k: x.amin(d, keepdim=k), -2, 2, True),
    "max_dim": (lambda x, d, k: x.max(d, keepdim=k), -2, 2, False),
    "min_dim": (lambda x, d, k: x.min(d, keepdim=k), -2, 2, False),
    "median_dim": (lambda x, d, k: x.median(d, keepdim=k), -2, 2, False),
    "var": (lambda x, d, k: x.var(d, keepdim=k), -2, 2, True),
    "var_c0": (lambda x, d, k: x.var(d, keepdim=k, correction=0), -2, 2, True),
    "std": (lambda x, d, k: x.std(d, keepdim=k), -2, 2, True),
    "norm2": (lambda x, d, k: x.norm(2, d, keepdim=k), 0.5, 2, True),
    "norm3": (lambda x, d, k: x.norm(3, d, keepdim=k), 0.5, 2, True),
    "logsumexp": (lambda x, d, k: x.logsumexp(d, keepdim=k), -2, 2, True),
    "softmax": (lambda x, d, k: x.softmax(d), -2, 2, False),
    "log_softmax": (lambda x, d, k: x.log_softmax(d), -2, 2, False),
    "cumsum": (lambda x, d, k: x.cumsum(d), -2, 2, False),
    "cumprod": (lambda x, d, k: x.cumprod(d), 0.5, 1.5, False),
    "cummax": (lambda x, d, k: fiamma.cummax(x, d), -2, 2, False),
    "sort": (lambda x, d, k: x.sort(d, descending=k), -2, 2, False),
}
NEEDS_TWO = {"var", "std"}  # a variance over one element is NaN (as in PyTorch)


@st.composite
def _dims(draw, nd, tuples):
    if nd == 0:
        return draw(st.sampled_from([0, -1]))
    if tuples and draw(st.booleans()):
        dims = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        return tuple(d - nd if draw(st.booleans()) else d for d in dims)
    return draw(st.integers(-nd, nd - 1))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@SOME
@given(data=st.data(), shape=shapes(0, 3, 1, 3), keepdim=st.booleans())
def test_reductions(name, data, shape, keepdim):
    fn, lo, hi, tuples = REDUCTIONS[name]
    dim = data.draw(_dims(len(shape), tuples))
    dims = dim if isinstance(dim, tuple) else (dim,)
    n = int(np.prod([shape[d] for d in dims])) if shape else 1
    if name in NEEDS_TWO and n < 2:
        return
    # no ties for the extremes and sorting; no constant lines for std (no derivative there)
    layouts = LAYOUTS if name not in ("max_dim", "min_dim", "median_dim", "sort", "cummax",
                                      "amax", "amin", "std") else LAYOUTS[:4]
    ops = data.draw(operands([shape], lo, hi, layouts=layouts))
    check_grad(lambda x: fn(x, dim, keepdim), ops)


@FEW
@given(data=st.data(), shape=shapes(0, 3, 1, 3))
def test_full_reductions(data, shape):
    ops = data.draw(operands([shape], 0.5, 1.5))
    check_grad(lambda x: x.sum() + x.mean() * x.prod() + x.norm() + x.logsumexp(
        tuple(range(x.dim()))), ops)


# ---- matmul family ---------------------------------------------------------------------------

@st.composite
def _matmul_shapes(draw):
    n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
    kind = draw(st.sampled_from(["1d1d", "2d1d", "1d2d", "2d2d", "batched"]))
    if kind == "1d1d":
        return (k,), (k,)
    if kind == "2d1d":
        return (n, k), (k,)
    if kind == "1d2d":
        return (k,), (k, m)
    if kind == "2d2d":
        return (n, k), (k, m)
    batch = draw(broadcast_shapes(2, 1, 2))
    return batch[0] + (n, k), batch[1] + (k, m)


@SOME
@given(data=st.data(), shp=_matmul_shapes())
def test_matmul_broadcast(data, shp):
    check_grad(fiamma.matmul, data.draw(operands(shp)))


MATMUL_FAMILY = {
    # name -> (fn, shapes from (n, k, m, b))
    "mm": (fiamma.mm, lambda n, k, m, b: [(n, k), (k, m)]),
    "bmm": (fiamma.bmm, lambda n, k, m, b: [(b, n, k), (b, k, m)]),
    "mv": (fiamma.mv, lambda n, k, m, b: [(n, k), (k,)]),
    "dot": (fiamma.dot, lambda n, k, m, b: [(k,), (k,)]),
    "inner": (fiamma.inner, lambda n, k, m, b: [(n, k), (m, k)]),
    "outer": (fiamma.outer, lambda n, k, m, b: [(n,), (m,)]),
    "addmm": (lambda c, a, x: fiamma.addmm(c, a, x, beta=0.5, alpha=-2.0),
              lambda n, k, m, b: [(m,), (n, k), (k, m)]),
    "addmv": (lambda c, a, x: fiamma.addmv(c, a, x, beta=1.5), lambda n, k, m, b: [(n,), (n, k),
                                                                                   (k,)]),
    "addr": (lambda c, a, x: fiamma.addr(c, a, x, alpha=0.5), lambda n, k, m, b: [(1, m), (n,),
                                                                                  (m,)]),
    "baddbmm": (lambda c, a, x: fiamma.baddbmm(c, a, x, beta=-1.0),
                lambda n, k, m, b: [(n, m), (b, n, k), (b, k, m)]),
    "addbmm": (fiamma.addbmm, lambda n, k, m, b: [(n, m), (b, n, k), (b, k, m)]),
    "einsum_bij": (lambda a, x: fiamma.einsum("bij,bjk->bik", a, x),
                   lambda n, k, m, b: [(b, n, k), (b, k, m)]),
    "einsum_trace": (lambda a: fiamma.einsum("ii->", a), lambda n, k, m, b: [(k, k)]),
    "einsum_outer_sum": (lambda a, x: fiamma.einsum("ij,k->jk", a, x),
                         lambda n, k, m, b: [(n, k), (m,)]),
    "tensordot": (lambda a, x: fiamma.tensordot(a, x, dims=([1, 2], [0, 1])),
                  lambda n, k, m, b: [(n, k, m), (k, m, b)]),
    "kron": (fiamma.kron, lambda n, k, m, b: [(n, k), (m, b)]),
}


@pytest.mark.parametrize("name", sorted(MATMUL_FAMILY))
@FEW
@given(data=st.data(), sizes=st.tuples(*[st.integers(1, 3)] * 4))
def test_matmul_family(name, data, sizes):
    fn, shp = MATMUL_FAMILY[name]
    check_grad(fn, data.draw(operands(shp(*sizes))))


# ---- indexing, gather, scatter ---------------------------------------------------------------

def _index_in(rng, size, count):
    return fiamma.tensor(rng.integers(0, size, count), dtype=fiamma.int64)


@SOME
@given(data=st.data(), shape=shapes(1, 3, 1, 3), seed=st.integers(0, 2**16))
def test_gather_scatter_family(data, shape, seed):
    rng = np.random.default_rng(seed)
    nd = len(shape)
    d = int(rng.integers(-nd, nd))
    dd = d % nd
    # an index shape no larger than the input's in the other dims
    ishape = tuple(int(rng.integers(1, s + 1)) if i != dd else int(rng.integers(1, 4))
                   for i, s in enumerate(shape))
    idx = fiamma.tensor(rng.integers(0, shape[dd], ishape), dtype=fiamma.int64)
    # scatter (overwrite) needs indices without duplicates along d, or which write wins is
    # unspecified: a permutation's first entries per line
    perm = np.argsort(rng.random(tuple(shape[i] if i == dd else ishape[i]
                                       for i in range(nd))), axis=dd)
    uniq = fiamma.tensor(np.take(perm, range(min(ishape[dd], shape[dd])), axis=dd),
                         dtype=fiamma.int64)
    x, src, src_u = data.draw(operands([shape, ishape, tuple(uniq.shape)]))
    check_grad(lambda t: t.gather(d, idx), [x])
    check_grad(lambda t, s: t.scatter_add(d, idx, s), [x, src])
    check_grad(lambda t, s: t.scatter(d, uniq, s), [x, src_u])
    along = fiamma.tensor(rng.integers(0, shape[dd], shape[:dd] + (3,) + shape[dd + 1:]),
                          dtype=fiamma.int64)
    check_grad(lambda t: t.take_along_dim(along, d), [x])
    sel = _index_in(rng, shape[dd], int(rng.integers(0, 4)))
    check_grad(lambda t: t.index_select(d, sel), [x])
    add_shape = shape[:dd] + (sel.numel(),) + shape[dd + 1:]
    (v,) = data.draw(operands([add_shape]))
    check_grad(lambda t, s: t.index_add(d, sel, s, alpha=0.5), [x, v])
    mask = fiamma.tensor(rng.random(shape) > 0.5)
    check_grad(lambda t: t.masked_fill(mask, 0.25), [x])
    check_grad(lambda t: t[mask], [x])
    flat = _index_in(rng, int(np.prod(shape)), 5)
    check_grad(lambda t: t.take(flat), [x])


@st.composite
def _basic_key(draw, shape):
    key = []
    for s in shape:
        kind = draw(st.sampled_from(["slice", "int", "all", "none"]))
        if kind == "int":
            key.append(draw(st.integers(-s, s - 1)))
        elif kind == "slice":
            a = draw(st.integers(-s - 1, s + 1))
            b = draw(st.integers(-s - 1, s + 1))
            key.append(slice(a, b, draw(st.integers(1, 3))))
        elif kind == "none":
            key += [None, slice(None)]
        else:
            key.append(slice(None))
    if draw(st.booleans()) and key:
        key[draw(st.integers(0, len(key) - 1))] = Ellipsis
    return tuple(key)


@SOME
@given(data=st.data(), shape=shapes(1, 3, 1, 4))
def test_getitem_setitem(data, shape):
    key = data.draw(_basic_key(shape))
    x, = data.draw(operands([shape]))
    check_grad(lambda t: t[key], [x])
    target_shape = tuple(fiamma.zeros(shape)[key].shape)
    (v,) = data.draw(operands([target_shape]))

    def put(t, s):
        y = t * 1.0
        y[key] = s * 2.0
        return y

    check_grad(put, [x, v])
    # advanced: an integer tensor on a random dim, with duplicates
    rng = np.random.default_rng(len(shape))
    d = int(rng.integers(0, len(shape)))
    idx = _index_in(rng, shape[d], 4)
    check_grad(lambda t: t[(slice(None),) * d + (idx,)], [x])


# ---- shape ops -------------------------------------------------------------------------------

def _shape_ops(x_shape, rng):
    """(name, fn) pairs, their parameters drawn once for x_shape."""
    nd = len(x_shape)
    d = int(rng.integers(-nd, nd)) if nd else 0
    at = int(rng.integers(-nd - 1, nd + 1))
    reps = tuple(int(r) for r in rng.integers(1, 3, nd + 1))
    ops = [
        ("reshape", lambda t: t.reshape(-1)),
        ("reshape_rev", lambda t: t.reshape(tuple(reversed(t.shape)))),
        ("flatten", lambda t: t.flatten()),
        ("unsqueeze", lambda t: t.unsqueeze(at)),
        ("expand", lambda t: t.unsqueeze(0).expand(2, *t.shape)),
        ("repeat", lambda t: t.repeat(*reps)),
        ("tile", lambda t: t.tile((2,))),
        ("stack", lambda t: fiamma.stack([t, -t], at)),
    ]
    if nd:
        perm = tuple(int(p) for p in rng.permutation(nd))
        s = x_shape[d % nd]
        start = int(rng.integers(0, s))
        length = int(rng.integers(0, s - start + 1))
        shift = int(rng.integers(-3, 4))
        piece = int(rng.integers(1, s + 1))
        ops += [
            ("cat", lambda t: fiamma.cat([t, t * 2.0, t.narrow(d, 0, 1)], d)),
            ("permute", lambda t: t.permute(perm)),
            ("transpose", lambda t: t.transpose(0, -1)),
            ("flip", lambda t: t.flip(d)),
            ("roll", lambda t: t.roll(shift, d)),
            ("narrow", lambda t: t.narrow(d, start, length)),
            ("split", lambda t: fiamma.cat([p * (i + 1.0) for i, p in enumerate(
                t.split(piece, d))], d)),
            ("chunk", lambda t: fiamma.stack([p.sum() for p in t.chunk(2, d)])),
            ("unbind", lambda t: fiamma.stack([p * (i + 1.0) for i, p in enumerate(
                t.unbind(d))])),
            ("squeeze", lambda t: t.squeeze(d)),
            ("movedim", lambda t: t.movedim(d, 0)),
            ("repeat_interleave", lambda t: t.repeat_interleave(2, d)),
            ("unflatten", lambda t: t.unflatten(d, (1, s))),
        ]
    if nd >= 2:
        k = int(rng.integers(-1, 2))
        ops += [
            ("diagonal", lambda t: t.diagonal(k, 0, -1)),
            ("tril", lambda t: t.tril(k)),
            ("triu", lambda t: t.triu(k)),
            ("mT", lambda t: t.mT),
        ]
    return ops


@SOME
@given(data=st.data(), shape=shapes(0, 3, 1, 3), seed=st.integers(0, 2**16))
def test_shape_ops(data, shape, seed):
    rng = np.random.default_rng(seed)
    for name, fn in _shape_ops(shape, rng):
        ops = data.draw(operands([shape]))
        try:
            check_grad(fn, ops)
        except AssertionError as e:
            raise AssertionError(f"{name} on {shape}: {e}") from None


# ---- dtypes ----------------------------------------------------------------------------------

DTYPE_OPS = {
    "exp_mul": (lambda a, b: (a.exp() * b).sum(), 2),
    "div_sub": (lambda a, b: (a / (b.abs() + 1.0) - b).sum(), 2),
    "tanh_sum": (lambda a, b: (a.tanh() + b.sigmoid()).sum(), 2),
    "matmul": (lambda a, b: (a.reshape(-1, 1) @ b.reshape(1, -1).to(a.dtype)).sum(), 2),
    "softmax": (lambda a, b: (a.softmax(-1) * b).sum(), 2),
    "norm_mean": (lambda a, b: a.norm() + b.mean(), 2),
}
LOW_PRECISION = {fiamma.float32: 1e-5, fiamma.float16: 2e-2, fiamma.bfloat16: 5e-2}


@pytest.mark.parametrize("name", sorted(DTYPE_OPS))
@pytest.mark.parametrize("dtype", sorted(LOW_PRECISION, key=str), ids=str)
@FEW
@given(data=st.data(), shape=shapes(1, 3, 1, 3), mixed=st.booleans())
def test_low_precision_gradients_follow_float64(name, dtype, data, shape, mixed):
    """The gradient of a float32/float16/bfloat16 input has the input's dtype and the float64
    gradient's values (mixed: the other operand float64, so the op promotes)."""
    fn, _ = DTYPE_OPS[name]
    seed = data.draw(st.integers(0, 2**32 - 1))
    layout = data.draw(st.sampled_from(LAYOUTS))
    grads = {}
    for dt in (F64, dtype):
        rng = np.random.default_rng(seed)
        a, ba = make_operand(rng, shape, layout, -1.0, 1.0, dtype=dt)
        b, bb = make_operand(rng, shape, "contig", -1.0, 1.0, dtype=F64 if mixed else dt)
        first(fn(ba(a), bb(b))).backward()
        assert a.grad.dtype is dt and b.grad.dtype is b.dtype
        assert tuple(a.grad.shape) == tuple(a.shape)
        grads[dt] = (a.grad.to(F64).numpy(), b.grad.to(F64).numpy())
    tol = LOW_PRECISION[dtype]
    for g, g64 in zip(grads[dtype], grads[F64]):
        np.testing.assert_allclose(g, g64, rtol=tol * 10, atol=tol * 10)
