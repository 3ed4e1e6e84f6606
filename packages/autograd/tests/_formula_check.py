"""Finite-difference checks of first and second derivatives for the formula tests.

``check(fn, *inputs)`` compares, for a random output cotangent ``v``, the vector-Jacobian product
from backward with central differences of ``sum(v * fn(inputs))`` (one backward, two forward
passes per input element), then does the same for the backward itself (the derivative of
``sum(u * vjp)`` w.r.t. the inputs and ``v``, with ``create_graph=True``): that is gradcheck and
gradgradcheck along random directions, which catches the same errors as full Jacobians at a
fraction of the cost. Inputs are float64 tensors (they may be non-contiguous views made leaves
with ``detach().requires_grad_()``); non-tensor arguments pass through.
"""

import numpy as np

import fiamma
from fiamma.autograd import grad as autograd_grad

EPS = 1e-6


def _outs(fn, args):
    out = fn(*args)
    if isinstance(out, fiamma.Tensor):
        out = (out,)
    return [o for o in out if isinstance(o, fiamma.Tensor) and o.dtype.is_floating_point]


def _seeded(seed):
    return np.random.default_rng(seed)


def _rand_like(rng, t):
    return fiamma.tensor(rng.standard_normal(tuple(t.shape)), dtype=t.dtype)


def _dot(outs, vs):
    total = 0.0
    for o, v in zip(outs, vs):
        if o.numel():
            total += float((o.detach().to(fiamma.float64) * v.to(fiamma.float64)).sum())
    return total


def _numeric(scalar_fn, tensors):
    """Central differences of ``scalar_fn()`` w.r.t. every element of ``tensors`` (perturbed in
    place through a NumPy view of their memory)."""
    res = []
    for t in tensors:
        arr = t.detach().numpy()
        g = np.zeros(arr.shape)
        for idx in np.ndindex(*arr.shape):
            orig = arr[idx]
            arr[idx] = orig + EPS
            hi = scalar_fn()
            arr[idx] = orig - EPS
            lo = scalar_fn()
            arr[idx] = orig
            g[idx] = (hi - lo) / (2 * EPS)
        res.append(g)
    return res


def _as_np(g, t):
    if g is None:
        return np.zeros(tuple(t.shape))
    assert tuple(g.shape) == tuple(t.shape), f"gradient shape {tuple(g.shape)} != {tuple(t.shape)}"
    return g.detach().to(fiamma.float64).numpy()


def _compare(ana, num, what, atol, rtol):
    for i, (a, n) in enumerate(zip(ana, num)):
        if not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=False):
            raise AssertionError(f"{what} mismatch for input {i}:\nanalytical\n{a}\nnumerical\n{n}")


def check(fn, *args, gg=True, atol=1e-5, rtol=1e-3, seed=0):
    """Check fn's first (and with ``gg`` second) derivatives at ``args``; returns the outputs."""
    rng = _seeded(seed)
    diff = [a for a in args if isinstance(a, fiamma.Tensor) and a.requires_grad]
    assert diff, "check: no input requires grad"
    outs = _outs(fn, args)
    vs = [_rand_like(rng, o) for o in outs]
    live = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
    if live:
        grads = autograd_grad([o for o, _ in live], diff, [v for _, v in live],
                              allow_unused=True)
    else:
        grads = [None] * len(diff)
    ana = [_as_np(g, t) for g, t in zip(grads, diff)]
    with fiamma.no_grad():
        num = _numeric(lambda: _dot(_outs(fn, args), vs), diff)
    _compare(ana, num, "gradient", atol, rtol)
    if not gg or not live:
        return outs

    # second order: d/d(inputs, v) of sum(u * vjp(inputs, v))
    vs2 = [v.clone().requires_grad_() for _, v in live]
    us = [_rand_like(rng, t) for t in diff]

    def second(create):
        with fiamma.enable_grad():
            o2 = [o for o in _outs(fn, args) if o.requires_grad]
            g2 = autograd_grad(o2, diff, vs2, create_graph=create, allow_unused=True)
        return g2

    g2 = second(True)
    pairs = [(g, u) for g, u in zip(g2, us) if g is not None and g.requires_grad]
    wrt = diff + vs2
    if pairs:
        gg_res = autograd_grad([g for g, _ in pairs], wrt, [u for _, u in pairs],
                               allow_unused=True)
    else:
        gg_res = [None] * len(wrt)
    ana2 = [_as_np(g, t) for g, t in zip(gg_res, wrt)]

    def scalar2():
        g = second(False)
        return sum(float((gi.to(fiamma.float64) * u).sum()) for gi, u in zip(g, us)
                   if gi is not None)

    num2 = _numeric(scalar2, wrt)
    _compare(ana2, num2, "second derivative", atol, rtol)
    return outs


def leaf(t):
    """``t`` (any layout, e.g. a transposed view) as a float64 leaf requiring grad."""
    return t.detach().requires_grad_()


def rand(*shape, seed=None, low=None, high=None, rng=None):
    rng = rng or np.random.default_rng(seed)
    if low is not None:
        a = rng.uniform(low, high, size=shape)
    else:
        a = rng.standard_normal(size=shape)
    return fiamma.tensor(a, dtype=fiamma.float64).requires_grad_()


def noncontig(*shape, rng=None, low=None, high=None):
    """A float64 leaf of ``shape`` that is a transposed view (non-contiguous) when ndim >= 2,
    else a strided slice."""
    rng = rng or np.random.default_rng(1)
    if len(shape) >= 2:
        rshape = shape[:-2] + (shape[-1], shape[-2])
        base = rand(*rshape, rng=rng, low=low, high=high).detach()
        return leaf(base.transpose(-1, -2))
    if len(shape) == 1:
        base = rand(shape[0] * 2, rng=rng, low=low, high=high).detach()
        return leaf(base[::2])
    return rand(*shape, rng=rng, low=low, high=high)
