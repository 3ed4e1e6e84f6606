"""fiamma.autograd: reverse-mode automatic differentiation for fiamma tensors.

Importing it registers the recorder with core (core does so itself the first time a tensor
asks for gradients). PyTorch's design: each result's ``grad_fn`` node records only how it was
made, so independent graphs mix freely and a graph is freed when its outputs die; saved tensors
are protected by version counters.

>>> import fiamma
>>> x = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (x * x).sum()
>>> y.backward()
>>> x.grad.tolist()
[2.0, 4.0, 6.0]
>>> fiamma.autograd.grad((x * 3).sum(), x)[0].tolist()
[3.0, 3.0, 3.0]
"""

import types

import fiamma
from fiamma import Tensor
from fiamma.autograd import _builtin, _engine as _E, _formulas  # noqa: F401
from fiamma.autograd._node import Node, RemovableHandle
from fiamma.autograd._version import __version__
from fiamma.autograd.anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_anomaly_enabled,
    set_detect_anomaly,
)
from fiamma.autograd.function import Function, FunctionCtx, once_differentiable
from fiamma.autograd.variable import Variable
from fiamma.autograd_hook import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    register_autograd,
    set_grad_enabled,
)

__all__ = [
    "backward", "grad", "Function", "FunctionCtx", "once_differentiable", "no_grad",
    "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled", "set_anomaly_enabled",
    "gradcheck", "gradgradcheck", "functional", "graph", "Node", "RemovableHandle", "__version__",
    "Variable", "forward_ad",
]


def _as_tuple(x):
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _root(t, i):
    if not isinstance(t, Tensor):
        raise TypeError(f"backward: expected Tensors as outputs, got {type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError(f"element {i} of tensors does not require grad and does not have a "
                           "grad_fn")
    return _E._edge1(t)


def _make_grads(outputs, grads, op):
    if grads is None:
        grads = (None,) * len(outputs)
    else:
        grads = _as_tuple(grads) if not isinstance(grads, Tensor) else (grads,)
    if len(grads) != len(outputs):
        raise RuntimeError(f"{op}: got {len(grads)} gradients for {len(outputs)} outputs")
    res = []
    for i, (t, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if t._dtype._kind == 3:
                raise RuntimeError("grad can be implicitly created only for real scalar "
                                   f"outputs (got {t.dtype})")
            g = fiamma.ones_like(t)
        elif not isinstance(g, Tensor):
            g = fiamma.full(tuple(t.shape), g, dtype=t.dtype, device=t.device)
        elif tuple(g.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} "
                               f"and output[{i}] has a shape of {t.shape}.")
        res.append(g)
    return res


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute the gradients of ``tensors`` w.r.t. the graph leaves and accumulate them into
    the leaves' ``.grad`` (only into ``inputs`` when given).

    >>> import fiamma
    >>> w = fiamma.tensor([2.0], requires_grad=True)
    >>> fiamma.autograd.backward((w * w).sum())
    >>> w.grad.tolist()
    [4.0]
    """
    tensors = _as_tuple(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    roots = [_root(t, i) for i, t in enumerate(tensors)]
    grads = _make_grads(tensors, grad_tensors, "backward")
    if inputs is None:
        _E.execute(roots, grads, retain_graph, create_graph)
        return
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("backward: inputs argument to backward() cannot be empty.")
    targets = [_root(x, i) for i, x in enumerate(inputs)]
    res = _E.execute(roots, grads, retain_graph, create_graph, targets, accumulate=True)
    for x, g in zip(inputs, res):
        # non-leaf inputs accumulate too (one that retains its gradient got it from the engine)
        if x.grad_fn is not None and g is not None and not x.retains_grad:
            prev = x._grad  # not .grad: a non-leaf's read warns
            x.grad = (g if create_graph else g.detach().clone()) if prev is None else prev + g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` w.r.t. ``inputs`` (a tuple, one per input), without
    touching ``.grad``.

    >>> import fiamma
    >>> x = fiamma.tensor(3.0, requires_grad=True)
    >>> (g,) = fiamma.autograd.grad(x * x, x, create_graph=True)
    >>> g.item(), fiamma.autograd.grad(g, x)[0].item()
    (6.0, 2.0)
    """
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    single_input = isinstance(inputs, Tensor)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if retain_graph is None:
        retain_graph = create_graph
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"grad: inputs must be Tensors, got {type(x).__name__}")
        if not x.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    roots = [_root(t, i) for i, t in enumerate(outputs)]
    grads = _make_grads(outputs, grad_outputs, "grad")
    targets = [_root(x, i) for i, x in enumerate(inputs)]
    res = _E.execute(roots, grads, retain_graph, create_graph, targets, accumulate=False)
    out = []
    for x, g in zip(inputs, res):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            if materialize_grads:
                g = fiamma.zeros_like(x)
        out.append(g)
    del single_input
    return tuple(out)


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """``grad(..., is_grads_batched=True)``: the first dimension of every ``grad_outputs``
    tensor indexes independent vector-Jacobian products (PyTorch vmaps the backward over it;
    here one backward per index through the retained graph, then stacked). Zuko's exact
    continuous-flow trace takes the whole Jacobian this way."""
    outs = _as_tuple(outputs)
    if grad_outputs is None:
        gos = (None,) * len(outs)
    else:
        gos = _as_tuple(grad_outputs)
    sizes = [g.shape[0] for g in gos if isinstance(g, Tensor)]
    if len(sizes) != len(outs) or any(g.dim() == 0 for g in gos if isinstance(g, Tensor)):
        raise RuntimeError("grad: is_grads_batched=True expected a grad_outputs tensor with a "
                           f"batch dimension for each of the {len(outs)} outputs, got "
                           f"{[None if g is None else tuple(g.shape) for g in gos]}")
    if len(set(sizes)) != 1:
        raise ValueError("grad: is_grads_batched=True expected all grad_outputs to have the "
                         f"same size in the batched (first) dimension, got sizes {sizes}")
    n = sizes[0]
    keep = create_graph if retain_graph is None else retain_graph
    ins = _as_tuple(inputs)
    per = []
    for b in range(n):
        per.append(grad(outs, ins, [g[b] for g in gos],
                        retain_graph=True if b < n - 1 else keep, create_graph=create_graph,
                        allow_unused=True if materialize_grads else allow_unused))
    res = []
    for i, x in enumerate(ins):
        gs = [p[i] for p in per]
        if n == 0:
            res.append(fiamma.zeros((0,) + tuple(x.shape), dtype=x.dtype, device=x.device))
        elif all(g is None for g in gs):
            res.append(fiamma.zeros((n,) + tuple(x.shape), dtype=x.dtype, device=x.device)
                       if materialize_grads else None)
        else:
            res.append(fiamma.stack([fiamma.zeros_like(x) if g is None else g for g in gs]))
    return tuple(res)


def _profiler_enabled():
    """Whether a profile records now (PyTorch's private ``torch.autograd._profiler_enabled``,
    which PyTorch Lightning's profiler reads)."""
    return fiamma.profiler.is_profiler_enabled()


# ---- registration with core -------------------------------------------------------------------

def _tensor_backward(t, gradient, retain_graph, create_graph, inputs):
    backward(t, gradient, retain_graph, create_graph, inputs)


_recorder = types.SimpleNamespace(
    record=_E.record,
    record_new=_E.record_new,
    record_inplace=_E.record_inplace,
    check_inplace=_E.check_inplace_target,
    inplace=_E.inplace,
    requires_grad_=_E.requires_grad_,
    backward=_tensor_backward,
    retain_grad=_E.retain_grad,
    retains_grad=_E.retains_grad,
    register_hook=_E.register_hook,
    register_post_accumulate_grad_hook=_E.register_post_accumulate_grad_hook,
)

_formulas.load_all()
_formulas.check_complete()  # a differentiable op of core without a formula fails the import
register_autograd(_recorder)

from fiamma.autograd import forward_ad, functional, graph, profiler  # noqa: E402,F401
from fiamma.autograd.gradcheck import gradcheck, gradgradcheck  # noqa: E402
