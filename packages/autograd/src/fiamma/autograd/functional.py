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


def _as_tuple(x, api=None, what="outputs"):
    if isinstance(x, Tensor):
        return True, (x,)
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return False, tuple(x)
    raise TypeError(f"{api or 'autograd.functional'}: the {what} must be a Tensor or a tuple of "
                    f"Tensors, got {type(x).__name__}")


def _check_strategy(strategy, api):
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError(f"{api}: expected strategy 'forward-mode' or 'reverse-mode', got "
                         f"{strategy!r}")


def _prepare(inputs, create_graph):
    """Fresh leaves (or graph-connected aliases under create_graph) that require grad."""
    res = []
    for x in inputs:
        if create_graph and x.requires_grad:
            res.append(x.view_as(x))
        else:
            res.append(x.detach().requires_grad_(True))
    return tuple(res)


def _grad(outputs, inputs, grad_outputs, create_graph, strict=None):
    """Gradients of ``outputs`` w.r.t. ``inputs`` (zeros where independent). ``strict``, a
    function of the input index giving an error message, raises instead of filling zeros."""
    outs, gos = [], []
    for o, g in zip(outputs, grad_outputs):
        if o.requires_grad:
            outs.append(o)
            gos.append(g)
    res = (None,) * len(inputs)
    if outs:
        res = fiamma.autograd.grad(outs, inputs, gos, create_graph=create_graph,
                                   retain_graph=True, allow_unused=True)
    if strict is not None:
        for i, r in enumerate(res):
            if r is None:
                raise RuntimeError(strict(i))
    return tuple(r if r is not None else fiamma.zeros_like(x) for r, x in zip(res, inputs))


def _check_outputs(outs, api):
    """strict mode: every output must be computed differentiably from the inputs."""
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(f"{api}: output {i} of the user-provided function does not "
                               "require gradients (strict=True needs every output computed "
                               "differentiably from the inputs)")


def _indep(api, what="the output of the user-provided function"):
    return lambda i: (f"{api}: {what} is independent of input {i}; this is not allowed with "
                      "strict=True")


def _finish(x, create_graph):
    return x if create_graph else x.detach()


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``."""
    single_in, inputs = _as_tuple(inputs, None, "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        single_out, outs = _as_tuple(func(*xs), "vjp")
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("vjp: v can only be None if func returns a single tensor "
                                   "with a single element")
            vs = (fiamma.ones_like(outs[0]),)
        else:
            vs = _as_tuple(v, None, "v")[1]
        if strict:
            _check_outputs(outs, "vjp")
        g = _grad(outs, xs, vs, create_graph, _indep("vjp") if strict else None)
    outs = tuple(_finish(o, create_graph) for o in outs)
    g = tuple(_finish(r, create_graph) for r in g)
    return (outs[0] if single_out else outs), (g[0] if single_in else g)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` by the double-vjp trick."""
    single_in, inputs = _as_tuple(inputs, None, "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        single_out, outs = _as_tuple(func(*xs), "jvp")
        if v is None:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError("jvp: v can only be None if the input is a single tensor "
                                   "with a single element")
            vs = (fiamma.ones_like(inputs[0]),)
        else:
            vs = _as_tuple(v, None, "v")[1]
        if strict:
            _check_outputs(outs, "jvp")
        # dummy cotangents: ones, not zeros (see fiamma.autograd._linearize)
        us = tuple(fiamma.ones_like(o).requires_grad_(True) for o in outs)
        g = _grad(outs, xs, us, True, _indep("jvp") if strict else None)
        jv = _grad(g, us, vs, create_graph, _indep(
            "jvp", "the gradient (double backward trick)") if strict else None)
    outs = tuple(_finish(o, create_graph) for o in outs)
    jv = tuple(_finish(r, create_graph) for r in jv)
    return (outs[0] if single_out else outs), (jv[0] if single_out else jv)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: a tensor of shape out.shape + in.shape (nested
    tuples for several inputs/outputs)."""
    _check_strategy(strategy, "jacobian")
    if strict and vectorize:
        raise RuntimeError("jacobian: strict=True and vectorize=True are not supported "
                           "together; set one of them to False")
    single_in, inputs = _as_tuple(inputs, None, "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        single_out, outs = _as_tuple(func(*xs), "jacobian")
        jac = []
        for j, o in enumerate(outs):
            if strict and not o.requires_grad:
                raise RuntimeError(f"jacobian: output {j} of the user-provided function is "
                                   "independent of input 0; this is not allowed with "
                                   "strict=True")
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
                for i, r in enumerate(g):
                    if strict and r is None:
                        raise RuntimeError(f"jacobian: output {j} of the user-provided "
                                           f"function is independent of input {i}; this is "
                                           "not allowed with strict=True")
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
    _check_strategy(outer_jacobian_strategy, "hessian")
    if strict and vectorize:
        raise RuntimeError("hessian: strict=True and vectorize=True are not supported "
                           "together; set one of them to False")
    single_in, inputs = _as_tuple(inputs, None, "inputs")

    def grads(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("hessian: the function given to hessian should return a single "
                               "Tensor with a single element")
        if strict:
            _check_outputs((out,), "hessian")
        g = _grad((out,), xs, (fiamma.ones_like(out),), True,
                  _indep("hessian") if strict else None)
        return g[0] if single_in else g

    # strict checks first-order dependence only (see vhp)
    return jacobian(grads, inputs[0] if single_in else inputs, create_graph=create_graph)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)``."""
    return _vhp(func, inputs, v, create_graph, strict, "vhp")


def _vhp(func, inputs, v, create_graph, strict, api):
    single_in, inputs = _as_tuple(inputs, None, "inputs")
    with enable_grad():
        xs = _prepare(inputs, create_graph)
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError(f"{api}: the function given to {api} should return a single "
                               "Tensor with a single element")
        if strict:
            _check_outputs((out,), api)
        g = _grad((out,), xs, (fiamma.ones_like(out),), True,
                  _indep(api) if strict else None)
        # strict checks first-order dependence only: whether a gradient formula's result
        # records a dependence on the input it does not have (pooling's, for one) differs
        # from PyTorch's graphs, so second-order independence gives zeros, never an error
        if v is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError(f"{api}: v can only be None if the input is a single Tensor "
                                   "with a single element")
            vs = (fiamma.ones_like(xs[0]),)
        else:
            vs = _as_tuple(v, api, "v")[1]
        r = _grad(g, xs, vs, create_graph)
    r = tuple(_finish(t, create_graph) for t in r)
    return _finish(out, create_graph), (r[0] if single_in else r)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` (equal to vhp for the symmetric Hessian)."""
    return _vhp(func, inputs, v, create_graph, strict, "hvp")
