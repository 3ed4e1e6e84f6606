"""Gradient clipping (``torch.nn.utils.clip_grad_norm_`` / ``clip_grad_value_``)."""

import math

import fiamma

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _grads(parameters):
    if isinstance(parameters, fiamma.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False):
    """The ``norm_type`` norm of all ``tensors`` together (as if concatenated)."""
    if isinstance(tensors, fiamma.Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return fiamma.tensor(0.0)
    with fiamma.no_grad():
        norms = fiamma.stack([fiamma.linalg.vector_norm(t.detach(), norm_type).float()
                              if t.dtype is not fiamma.float64 else
                              fiamma.linalg.vector_norm(t.detach(), norm_type)
                              for t in tensors]).double()
        total = fiamma.linalg.vector_norm(norms, norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`")
    return total


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale all gradients in place so their total norm is at most ``max_norm``; returns the
    total norm before clipping."""
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    coef = float(max_norm) / (total.item() + 1e-6)
    if coef < 1.0 or coef != coef:  # a NaN norm makes every gradient NaN (PyTorch's scaling)
        with fiamma.no_grad():
            for g in grads:
                g.mul_(coef)
    # PyTorch returns the norm in the gradients' dtype: a float64 model's norm keeps its
    # precision (float32 here cut it to 7 digits).
    dtype = fiamma.float32
    if grads:
        dtype = grads[0].dtype
        for g in grads[1:]:
            dtype = fiamma.promote_types(dtype, g.dtype)
    return total.to(dtype)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with fiamma.no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients in place by ``max_norm / (total_norm + 1e-6)`` when that is below 1
    (PyTorch's ``clip_grads_with_norm_``, the second half of ``clip_grad_norm_``, for a
    ``total_norm`` computed elsewhere, e.g. with :func:`get_total_norm` across shards).

    >>> import fiamma
    >>> p = fiamma.nn.Parameter(fiamma.ones(4)); p.grad = fiamma.full((4,), 2.0)
    >>> clip_grads_with_norm_([p], 1.0, get_total_norm([p.grad]))
    >>> round(p.grad.norm().item(), 4)
    1.0
    """
    grads = _grads(parameters)
    if not grads:
        return
    if isinstance(total_norm, fiamma.Tensor):
        if total_norm.numel() != 1:
            raise ValueError(f"clip_grads_with_norm_: total_norm must be a number or a "
                             f"one-element tensor, got shape {list(total_norm.shape)}")
        total_norm = total_norm.item()
    coef = float(max_norm) / (float(total_norm) + 1e-6)
    if coef < 1.0:  # clamped to 1: gradients below the limit stay as they are
        with fiamma.no_grad():
            for g in grads:
                g.mul_(coef)
