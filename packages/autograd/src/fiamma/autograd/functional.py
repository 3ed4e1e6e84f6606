"""Higher-level derivatives built on backward: jacobian, hessian, vjp, jvp, hvp, vhp
(``torch.autograd.functional``'s API).

>>> import fiamma
>>> from fiamma.autograd.functional import jacobian
>>> jacobian(lambda x: x * x, fiamma.tensor([1.0, 2.0])).tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""

import fiamma
from fiamma import Tensor
from fiamma.autograd_hook import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(x):
    return (True, (x,)) if isinstance(x, Tensor) else (False, tuple(x))


def _prepare(inputs, create_graph):
    """Fresh leaves (or graph-connected aliases under create_graph) that require grad."""
    res = []
    for x in inputs:
        if create_graph and x.requires_grad:
            res.append(x.view_as(x))
        else:
            res.append(x.detach().requires_grad_(True))
    return tuple(res)


def _grad(outputs, inputs, grad_outputs, create_graph):
    outs, gos = [], []
    for o, g in zip(outputs, grad_outputs):
        if o.requires_grad:
            outs.append(o)
            gos.append(g)
    if not outs:
        return tuple(fiamma.zeros_like(x) for x in inputs)
    res = fiamma.autograd.grad(outs, inputs, gos, create_graph=create_graph, retain_graph=True,
                               allow_unused=True)
    return tuple(r if r is not None else fiamma.zeros_like(x) for r, x in zip(res, inputs))


def _finish(x, create_graph):
    return x if create_graph else x.detach()


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``."""
    single_in, inputs = _as_tuple(inputs)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        single_out, outs = _as_tuple(func(*xs))
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("vjp: v can only be None if func returns a single tensor "
                                   "with a single element")
            vs = (fiamma.ones_like(outs[0]),)
        else:
            vs = _as_tuple(v)[1]
        g = _grad(outs, xs, vs, create_graph)
    outs = tuple(_finish(o, create_graph) for o in outs)
    g = tuple(_finish(r, create_graph) for r in g)
    return (outs[0] if single_out else outs), (g[0] if single_in else g)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` by the double-vjp trick."""
    single_in, inputs = _as_tuple(inputs)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        single_out, outs = _as_tuple(func(*xs))
        if v is None:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("jvp: v can only be None if the input is a single tensor "
                                   "with a single element")
            vs = (fiamma.ones_like(inputs[0]),)
        else:
            vs = _as_tuple(v)[1]
        us = tuple(fiamma.zeros_like(o).requires_grad_(True) for o in outs)
        g = _grad(outs, xs, us, True)
        jv = _grad(g, us, vs, create_graph)
    outs = tuple(_finish(o, create_graph) for o in outs)
    jv = tuple(_finish(r, create_graph) for r in jv)
    return (outs[0] if single_out else outs), (jv[0] if single_out else jv)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: a tensor of shape out.shape + in.shape (nested
    tuples for several inputs/outputs)."""
    single_in, inputs = _as_tuple(inputs)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        single_out, outs = _as_tuple(func(*xs))
        jac = []
        for o in outs:
            rows = [[] for _ in xs]
            n = o.numel()
            for k in range(n):
                if o.requires_grad:
                    onehot = fiamma.zeros(n, dtype=o.dtype, device=o.device)
                    onehot[k] = 1
                    g = fiamma.autograd.grad(o, xs, onehot.reshape(tuple(o.shape)),
                                             retain_graph=True, create_graph=create_graph,
                                             allow_unused=True)
                else:
                    g = (None,) * len(xs)
                for i, (r, x) in enumerate(zip(g, xs)):
                    rows[i].append(fiamma.zeros_like(x) if r is None else r)
            per_in = []
            for i, x in enumerate(xs):
                if rows[i]:
                    j = fiamma.stack(rows[i]).reshape(tuple(o.shape) + tuple(x.shape))
                else:
                    j = fiamma.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype,
                                     device=x.device)
                per_in.append(_finish(j, create_graph))
            jac.append(per_in[0] if single_in else tuple(per_in))
    return jac[0] if single_out else tuple(jac)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``."""
    single_in, inputs = _as_tuple(inputs)

    def grads(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("hessian: the function given to hessian should return a single "
                               "Tensor with a single element")
        g = _grad((out,), xs, (fiamma.ones_like(out),), True)
        return g[0] if single_in else g

    return jacobian(grads, inputs[0] if single_in else inputs, create_graph=create_graph)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)``."""
    single_in, inputs = _as_tuple(inputs)
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        out = func(*xs)
        g = _grad((out,), xs, (fiamma.ones_like(out),), True)
        vs = _as_tuple(v)[1] if v is not None else tuple(fiamma.ones_like(x) for x in xs)
        r = _grad(g, xs, vs, create_graph)
    r = tuple(_finish(t, create_graph) for t in r)
    return _finish(out, create_graph), (r[0] if single_in else r)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` (equal to vhp for the symmetric Hessian)."""
    return vhp(func, inputs, v, create_graph, strict)
