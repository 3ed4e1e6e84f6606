"""Hypothesis strategies for property-based gradient checks: random shapes (0-d, empty sides),
broadcast-compatible shape sets, and float64 leaves in awkward layouts, checked with the public
``fiamma.autograd.gradcheck`` (numerical Jacobians).

A layout is how an operand reaches the op: ``contig``; ``transposed`` (a permuted view);
``stepped`` (every other element of a larger buffer); ``offset`` (a view starting inside its
storage); ``expanded`` (a smaller leaf broadcast up with ``expand`` inside the checked function,
since gradcheck perturbs leaves and a stride-0 leaf would alias its own elements).

Values come from a NumPy generator seeded by a drawn integer, so an example is reproducible
from what hypothesis prints.

A private test helper shipped in fiamma-autograd's wheel so that the property tests of
fiamma-autograd and of fiamma-nn (which depends on it) share one copy: each package's tests run
alone from its wheel, so neither can import the other's tests folder. It imports hypothesis and
NumPy (test extras, not runtime dependencies); nothing in fiamma imports it.
"""

import numpy as np
from hypothesis import strategies as st

import fiamma
from fiamma.autograd import gradcheck

LAYOUTS = ("contig", "transposed", "stepped", "offset", "expanded")
F64 = fiamma.float64


def shapes(min_dims=0, max_dims=3, min_side=1, max_side=3):
    return st.lists(st.integers(min_side, max_side), min_size=min_dims,
                    max_size=max_dims).map(tuple)


@st.composite
def broadcast_shapes(draw, n, min_dims=0, max_dims=3, max_side=3):
    """``n`` shapes that broadcast together: each drops some leading dims of a common shape
    and turns some of its sides into 1."""
    full = draw(shapes(min_dims, max_dims, 1, max_side))
    out = []
    for _ in range(n):
        lead = draw(st.integers(0, len(full)))
        ones = draw(st.lists(st.booleans(), min_size=len(full) - lead,
                             max_size=len(full) - lead))
        out.append(tuple(1 if o else s for s, o in zip(full[lead:], ones)))
    return out


def values(rng, shape, low=-2.0, high=2.0, away=()):
    """Uniform values in [low, high], moved at least 0.05 away from each point of ``away``
    (the op's kinks, where a numerical derivative means nothing)."""
    a = rng.uniform(low, high, size=shape)
    for k in away:
        near = np.abs(a - k) < 0.05
        a = np.where(near, k + np.where(a >= k, 0.1, -0.1), a)
    return a


def _leaf(t):
    return t.detach().requires_grad_()


def make_operand(rng, shape, layout, low=-2.0, high=2.0, away=(), dtype=F64):
    """``(leaf, build)``: ``build(leaf)`` is a tensor of ``shape`` in ``layout``."""
    shape = tuple(shape)
    nd = len(shape)
    if layout == "expanded" and any(s > 1 for s in shape):
        small = tuple(1 if s > 1 and rng.random() < 0.6 else s for s in shape)
        if small == shape:
            small = tuple(1 if s > 1 else s for s in shape)
        leaf = _leaf(fiamma.tensor(values(rng, small, low, high, away), dtype=dtype))
        return leaf, lambda t: t.expand(shape)
    a = values(rng, shape, low, high, away)
    if layout == "transposed" and nd >= 2:
        rev = tuple(range(nd - 1, -1, -1))
        base = fiamma.tensor(np.ascontiguousarray(a.transpose(rev)), dtype=dtype)
        return _leaf(base.permute(rev)), _same
    if layout == "stepped" and nd >= 1:
        big = np.zeros(tuple(2 * s for s in shape))
        big[tuple(slice(None, None, 2) for _ in shape)] = a
        view = fiamma.tensor(big, dtype=dtype)[tuple(slice(None, None, 2) for _ in shape)]
        return _leaf(view), _same
    if layout == "offset":
        flat = np.concatenate([np.zeros(3), a.reshape(-1)])
        return _leaf(fiamma.tensor(flat, dtype=dtype)[3:].view(shape)), _same
    return _leaf(fiamma.tensor(a, dtype=dtype)), _same


def _same(t):
    return t


@st.composite
def operands(draw, shape_list, low=-2.0, high=2.0, away=(), layouts=LAYOUTS, dtype=F64,
             domains=None):
    """One operand per shape, each in a drawn layout, all from one generator (so operands
    never share values by sharing a seed); ``domains``: a (low, high, away) per operand."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for i, shape in enumerate(shape_list):
        layout = draw(st.sampled_from(layouts))
        lo, hi, aw = domains[i] if domains else (low, high, away)
        out.append(make_operand(rng, shape, layout, lo, hi, aw, dtype))
    return out


def first(out):
    """An op's differentiable output: the values of a (values, indices) pair."""
    return out[0] if isinstance(out, tuple) else out


def check_grad(fn, ops, atol=1e-5, rtol=1e-3):
    """gradcheck of ``fn`` on the operands' built tensors, w.r.t. their leaves."""
    leaves = tuple(leaf for leaf, _ in ops)
    builds = [build for _, build in ops]

    def f(*ls):
        return first(fn(*[b(t) for b, t in zip(builds, ls)]))

    assert gradcheck(f, leaves, atol=atol, rtol=rtol)
