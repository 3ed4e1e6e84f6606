"""The normalisation functions of ``fiamma.nn.functional`` (PyTorch's names, signatures and
checks): batch_norm, instance_norm, layer_norm, group_norm, rms_norm over core's fused kernels,
and local_response_norm composed of core ops."""

import fiamma

__all__ = ["batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm",
           "local_response_norm"]


def _prod(xs):
    p = 1
    for v in xs:
        p *= v
    return p


def _verify_batch_size(size):
    if size[0] * _prod(size[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{list(size)}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalisation (see :class:`fiamma.nn.BatchNorm2d`): batch statistics and running
    stats update in training, running stats otherwise.

    >>> import fiamma
    >>> from fiamma.nn import functional as F
    >>> F.batch_norm(fiamma.tensor([[1.0], [3.0]]), None, None, training=True).shape
    fiamma.Size([2, 1])
    """
    if training:
        _verify_batch_size(tuple(input.shape))
        if not eps > 0:
            raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    elif eps < 0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    return fiamma.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                             eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Instance normalisation: each channel of each sample over its spatial dims."""
    if use_input_stats:
        size = tuple(input.shape)
        if _prod(size[2:]) == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {list(size)}")
    return fiamma.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                                momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the last ``len(normalized_shape)`` dims."""
    if input.is_nested:
        return _nested_norm(input, normalized_shape, "layer_norm",
                            lambda v: fiamma.layer_norm(v, normalized_shape, weight, bias, eps))
    return fiamma.layer_norm(input, normalized_shape, weight, bias, eps)


def _nested_norm(input, normalized_shape, op, fn):
    """A normalisation over trailing dims of a nested tensor: once on its values when none of
    them is ragged (PyTorch's rule for jagged tensors), per component for the strided layout."""
    k = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    nd = input.dim()
    if input.layout is fiamma.jagged:
        if k >= nd or not all(isinstance(input.size(d), int) for d in range(nd - k, nd)):
            raise RuntimeError(f"{op}: not supported for nested tensors over the ragged dim or "
                               f"the batch dim (normalized over the last {k} of size "
                               f"{tuple(input.shape)})")
        return input.map_dense(fn)
    return input.map_dense(fn, per_component=True)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation over groups of channels (and the spatial dims)."""
    if input.dim() < 2:
        raise RuntimeError(f"group_norm: Expected at least 2 dimensions for input tensor but "
                           f"received {input.dim()}")
    size = tuple(input.shape)
    if num_groups > 0 and size[1] % num_groups == 0:
        _verify_batch_size([size[0] * size[1] // num_groups, num_groups] + list(size[2:]))
    return fiamma.group_norm(input, num_groups, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalisation (``eps=None``: ``finfo(input.dtype).eps``)."""
    if input.is_nested:
        return _nested_norm(input, normalized_shape, "rms_norm",
                            lambda v: fiamma.rms_norm(v, normalized_shape, weight, eps))
    return fiamma.rms_norm(input, normalized_shape, weight, eps)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Local response normalisation across channels (dim 1):
    ``x / (k + alpha / size * sum of x^2 over the size neighbouring channels) ** beta``, the
    window zero-padded by ``size // 2`` before and ``(size - 1) // 2`` after."""
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    size = int(size)
    C = input.shape[1]
    sq = input * input
    before, after = size // 2, (size - 1) // 2
    parts = []
    if before:
        parts.append(fiamma.zeros((sq.shape[0], before) + tuple(sq.shape[2:]), dtype=sq.dtype,
                                  device=sq.device))
    parts.append(sq)
    if after:
        parts.append(fiamma.zeros((sq.shape[0], after) + tuple(sq.shape[2:]), dtype=sq.dtype,
                                  device=sq.device))
    padded = fiamma.cat(parts, 1) if len(parts) > 1 else sq
    total = padded[:, 0:C]
    for j in range(1, size):
        total = total + padded[:, j:j + C]
    div = (total * (alpha / size) + k) ** beta
    return input / div
