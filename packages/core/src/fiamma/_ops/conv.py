"""Convolutions with PyTorch's names and semantics: ``conv1d/2d/3d``, ``conv_transpose1d/2d/3d``,
``convolution`` (the general form every one of them calls), ``convolution_backward_weight``
(the weight gradient, a recorded op so double backward works) and ``im2col``/``col2im`` (the
column matrices behind ``fiamma.nn.functional.unfold``/``fold``).

All the work is ``fm_conv`` in C (csrc/conv.c): im2col + GEMM in float32 or float64, and direct
loops for depthwise convolutions (groups == input channels, csrc/conv_dw.c); float16 and
bfloat16 compute in float32 (on the cuda backend with cuDNN in their own dtype: the
backend's ``conv_native``, fiamma/_backend/xp/cudnn.py). The gradient of a convolution by its
input is a transposed convolution (and vice versa), so autograd needs only ``convolution`` and
``convolution_backward_weight``.
"""

import builtins
import operator

from fiamma import _autocast as _AC, _dtype as D, _grad_hook as G
from fiamma._autograd_api import ops
from fiamma._backend import check, codes as K
from fiamma._ops._common import cast
from fiamma._tensor import Tensor, new_empty

__all__ = ["convolution", "convolution_backward_weight", "conv1d", "conv2d", "conv3d",
           "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "im2col", "col2im"]

_AC_ON = False  # True while an autocast region is enabled (fiamma._autocast keeps it)


def _tuple(v, n, name, op):
    if isinstance(v, (builtins.list, builtins.tuple)):
        if len(v) == 1:
            v = builtins.tuple(v) * n
        if len(v) != n:
            raise ValueError(f"{op}: expected {name} to be a single integer or a sequence of {n} "
                             f"integers, got {builtins.list(v)}")
        return builtins.tuple(operator.index(x) for x in v)
    return (operator.index(v),) * n


def _check_tensor(t, name, op):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")


def _device(op, *ts):
    """The one device of the tensors ``ts`` (None entries skipped); mixing raises naming both."""
    dev = ts[0]._storage.device
    for t in ts[1:]:
        if t is not None and t._storage.device is not dev and t._storage.device != dev:
            raise RuntimeError(f"{op}: expected all tensors on one device, got {dev} and "
                               f"{t._storage.device}")
    return dev


def _compute_dtype(op, *ts, native=False):
    """(result dtype, compute dtype). float16/bfloat16 compute in float32, unless ``native``
    (a convolution, not im2col/col2im) and the tensors' backend computes them in their own
    dtype (``conv_native``: the cuda backend with cuDNN)."""
    dt = ts[0]._dtype
    for t in ts[1:]:
        if t is not None and t._dtype is not dt:
            raise RuntimeError(f"{op}: expected input, weight and bias to have the same dtype, "
                               f"got {', '.join(str(x._dtype) for x in ts if x is not None)}")
    if dt._kind != 2:
        raise RuntimeError(f"{op}: not implemented for dtype {dt} (expected a floating dtype)")
    if dt is D.float32 or dt is D.float64:
        return dt, dt
    if native and (dt is D.float16 or dt is D.bfloat16):
        ask = getattr(ts[0]._storage.backend, "conv_native", None)
        if ask is not None and ask(dt):
            return dt, dt
    return dt, D.float32


def _prep(t, cdt):
    """``t`` for the kernel (which reads it only): a contiguous copy-if-needed of ``t`` in the
    compute dtype."""
    if t._contig and t._dtype is cdt:
        return t
    t = cast(t.detach(), cdt)
    return t if t._contig else t.clone()


def _params(op, nd, stride, padding, dilation):
    s = _tuple(stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    d = _tuple(dilation, nd, "dilation", op)
    if builtins.any(v <= 0 for v in s):
        raise RuntimeError(f"{op}: non-positive stride is not supported, got {builtins.list(s)}")
    if builtins.any(v < 0 for v in p):
        raise RuntimeError(f"{op}: negative padding is not supported, got {builtins.list(p)}")
    if builtins.any(v <= 0 for v in d):
        raise RuntimeError(f"{op}: dilation should be greater than zero, got {builtins.list(d)}")
    return s, p, d


def _run(op, mode, cdt, nd, n, cb, cs, groups, big, small, k, s, p, d, a, b, bias, out):
    if out._numel == 0:
        return
    rc = out._storage.backend.conv(mode, nd, n, cb, cs, groups, big, small, k, s, p, d, a, b,
                                   bias, out)
    check(rc, op)


def _geometry(input, weight, bias, stride, padding, dilation, transposed, output_padding,
              groups):
    """The checked geometry of a convolution: (op, nd, n, cb, cs, groups, big, small, k, s, p,
    d, out_shape, output_padding); raises naming the op for bad shapes or parameters."""
    op = "conv_transpose" if transposed else "convolution"
    _check_tensor(input, "input", op)
    _check_tensor(weight, "weight", op)
    if bias is not None:
        _check_tensor(bias, "bias", op)
    nd = weight.dim() - 2
    if nd not in (1, 2, 3):
        raise RuntimeError(f"{op}: expected weight to be 3-D, 4-D or 5-D (1 to 3 spatial dims), "
                           f"got {weight.dim()}-D weight of shape {builtins.list(weight.shape)}")
    if input.dim() != nd + 2:
        raise RuntimeError(f"{op}: expected {nd + 2}-D input (batched) for {weight.dim()}-D "
                           f"weight {builtins.list(weight.shape)}, got {input.dim()}-D input of "
                           f"shape {builtins.list(input.shape)}")
    s, p, d = _params(op, nd, stride, padding, dilation)
    groups = operator.index(groups)
    if groups <= 0:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got {groups}")
    _compute_dtype(op, input, weight, bias, native=True)  # its errors come in this order
    wsh, xsh = weight._shape, input._shape
    k = wsh[2:]
    if builtins.any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: expected a non-empty kernel, got weight of shape "
                           f"{builtins.list(wsh)}")
    n = xsh[0]
    if not transposed:
        cout, cin = wsh[0], xsh[1]
        if cout % groups or cout == 0:
            raise RuntimeError(f"{op}: expected weight's output channels {cout} to be positive "
                               f"and divisible by groups={groups}")
        if wsh[1] * groups != cin:
            raise RuntimeError(f"{op}: Given groups={groups}, weight of size {builtins.list(wsh)}"
                               f", expected input{builtins.list(xsh)} to have {wsh[1] * groups} "
                               f"channels, but got {cin} channels instead")
        big = xsh[2:]
        small = builtins.tuple((big[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
                               for i in range(nd))
        if builtins.any(big[i] + 2 * p[i] < d[i] * (k[i] - 1) + 1 for i in range(nd)):
            raise RuntimeError(f"{op}: Calculated padded input size per channel "
                               f"({builtins.list(big[i] + 2 * p[i] for i in range(nd))}) is "
                               f"smaller than the (dilated) kernel size "
                               f"({builtins.list(d[i] * (k[i] - 1) + 1 for i in range(nd))})")
        cb, cs, bshape = cin, cout, cout
        out_shape = (n, cout) + small
    else:
        cin = xsh[1]
        if wsh[0] != cin:
            raise RuntimeError(f"{op}: Given transposed=1, weight of size {builtins.list(wsh)}, "
                               f"expected input{builtins.list(xsh)} to have {wsh[0]} channels, "
                               f"but got {cin} channels instead")
        if cin % groups or cin == 0:
            raise RuntimeError(f"{op}: expected input channels {cin} to be positive and "
                               f"divisible by groups={groups}")
        op_ = _tuple(output_padding, nd, "output_padding", op)
        if builtins.any(v < 0 for v in op_):
            raise RuntimeError(f"{op}: negative output_padding is not supported")
        small = xsh[2:]
        if builtins.any(v <= 0 for v in small):
            raise RuntimeError(f"{op}: expected non-empty spatial input, got {builtins.list(xsh)}")
        big = builtins.tuple((small[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1 + op_[i]
                             for i in range(nd))
        if builtins.any(v <= 0 for v in big):
            raise RuntimeError(f"{op}: Given input size per channel {builtins.list(small)}, "
                               f"calculated output size {builtins.list(big)} is too small")
        cout = wsh[1] * groups
        cb, cs, bshape = cout, cin, cout
        out_shape = (n, cout) + big
    if bias is not None and builtins.tuple(bias._shape) != (bshape,):
        raise RuntimeError(f"{op}: expected bias of shape [{bshape}], got "
                           f"{builtins.list(bias.shape)}")
    if not transposed and builtins.any(v <= 0 for v in small):
        raise RuntimeError(f"{op}: calculated output size {builtins.list(small)} is too small")
    return (op, nd, n, cb, cs, groups, big, small, k, s, p, d, out_shape,
            _tuple(output_padding, nd, "output_padding", op))


_GEOMETRY = {}  # (shapes, parameters) -> _geometry's result, for the next call of that geometry


def _plain(*params):
    """Whether the parameters are ints or tuples of ints: only those make a cache key (a
    tensor hashes by identity and could change in place)."""
    for v in params:
        if type(v) is not int and (type(v) is not tuple or
                                   builtins.any(type(e) is not int for e in v)):
            return False
    return True


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """The general convolution (PyTorch's ``torch.convolution``): ``input`` (N, C_in, *spatial)
    with ``weight`` (C_out, C_in / groups, *kernel), or when ``transposed`` the transposed
    convolution with ``weight`` (C_in, C_out / groups, *kernel). 1, 2 or 3 spatial dims.

    >>> import fiamma
    >>> x = fiamma.ones(1, 1, 4); w = fiamma.ones(1, 1, 2)
    >>> fiamma.convolution(x, w, None, [1], [0], [1], False, [0], 1).tolist()
    [[[2.0, 2.0, 2.0]]]
    """
    if _AC_ON:  # on autocast's lower-precision list
        input, weight, bias = _AC.cast_lower(None, input, weight, bias)
    try:
        # a geometry checked before: only the per-call checks (tensors, dtypes, device) remain
        key = (input._shape, weight._shape, None if bias is None else bias._shape, stride,
               padding, dilation, transposed, output_padding, groups)
        geo = _GEOMETRY.get(key)
    except (AttributeError, TypeError):  # not tensors, or list parameters (not hashable)
        key = geo = None
    if geo is None or not (isinstance(input, Tensor) and isinstance(weight, Tensor)
                           and (bias is None or isinstance(bias, Tensor))):
        geo = _geometry(input, weight, bias, stride, padding, dilation, transposed,
                        output_padding, groups)
        if (key is not None and type(transposed) in (bool, int)
                and _plain(stride, padding, dilation, output_padding, groups)):
            if len(_GEOMETRY) >= 1024:
                _GEOMETRY.clear()
            _GEOMETRY[key] = geo
    op, nd, n, cb, cs, groups, big, small, k, s, p, d, out_shape, opad = geo
    odt, cdt = _compute_dtype(op, input, weight, bias, native=True)
    dev = _device(op, input, weight, bias)
    x, w = _prep(input, cdt), _prep(weight, cdt)
    b = None if bias is None else _prep(bias, cdt)
    out = new_empty(out_shape, cdt, dev)
    mode = K.CONV_BWD_DATA if transposed else K.CONV_FWD
    _run(op, mode, cdt, nd, n, cb, cs, groups, big, small, k, s, p, d, x, w, b, out)
    if cdt is not odt:
        out = cast(out, odt)
    if G.any_requires_grad(input, weight, bias):
        G.record(ops.convolution, out, (input, weight, bias),
                 {"stride": s, "padding": p, "dilation": d, "transposed": builtins.bool(transposed),
                  "output_padding": opad, "groups": groups})
    return out


def _geometry_w(input, grad_output, weight_size, stride, padding, dilation, groups):
    """convolution_backward_weight's checked geometry: (weight shape, nd, s, p, d, groups,
    input shape, grad_output shape, kernel, big, small)."""
    op = "convolution_backward_weight"
    _check_tensor(input, "input", op)
    _check_tensor(grad_output, "grad_output", op)
    wsh = builtins.tuple(operator.index(v) for v in weight_size)
    nd = len(wsh) - 2
    if nd not in (1, 2, 3) or input.dim() != nd + 2 or grad_output.dim() != nd + 2:
        raise RuntimeError(f"{op}: expected weight_size of 3 to 5 dims and input and grad_output "
                           f"of as many, got {builtins.list(wsh)}, {builtins.list(input.shape)}, "
                           f"{builtins.list(grad_output.shape)}")
    s, p, d = _params(op, nd, stride, padding, dilation)
    groups = operator.index(groups)
    _compute_dtype(op, input, grad_output, native=True)  # its errors come in this order
    xsh, gsh = input._shape, grad_output._shape
    k = wsh[2:]
    if (groups <= 0 or xsh[0] != gsh[0] or wsh[0] != gsh[1] or wsh[1] * groups != xsh[1]
            or wsh[0] % groups or builtins.any(v <= 0 for v in k)):
        raise RuntimeError(f"{op}: shapes do not match: input {builtins.list(xsh)}, grad_output "
                           f"{builtins.list(gsh)}, weight_size {builtins.list(wsh)}, "
                           f"groups={groups}")
    big, small = xsh[2:], gsh[2:]
    if builtins.any(v <= 0 for v in big + small):
        raise RuntimeError(f"{op}: expected non-empty spatial sizes, got input "
                           f"{builtins.list(xsh)} and grad_output {builtins.list(gsh)}")
    return wsh, nd, s, p, d, groups, xsh, gsh, k, big, small


_GEOMETRY_W = {}


def convolution_backward_weight(input, grad_output, weight_size, stride, padding, dilation,
                                groups):
    """The gradient of ``convolution(input, w, ...)`` by ``w`` given the gradient of its result
    (PyTorch's ``torch.nn.grad.conv*d_weight``): ``input`` (N, C_in, *spatial) and
    ``grad_output`` (N, C_out, *out_spatial) give a tensor of shape ``weight_size``."""
    op = "convolution_backward_weight"
    try:
        key = (input._shape, grad_output._shape, weight_size, stride, padding, dilation, groups)
        geo = _GEOMETRY_W.get(key)
    except (AttributeError, TypeError):  # not tensors, or list arguments (not hashable)
        key = geo = None
    if geo is None or not (isinstance(input, Tensor) and isinstance(grad_output, Tensor)):
        geo = _geometry_w(input, grad_output, weight_size, stride, padding, dilation, groups)
        if key is not None and _plain(weight_size, stride, padding, dilation, groups):
            if len(_GEOMETRY_W) >= 1024:
                _GEOMETRY_W.clear()
            _GEOMETRY_W[key] = geo
    wsh, nd, s, p, d, groups, xsh, gsh, k, big, small = geo
    odt, cdt = _compute_dtype(op, input, grad_output, native=True)
    dev = _device(op, input, grad_output)
    x, g = _prep(input, cdt), _prep(grad_output, cdt)
    out = new_empty(wsh, cdt, dev)
    if out._numel:
        check(out._storage.backend.conv(K.CONV_BWD_WEIGHT, nd, xsh[0], xsh[1], gsh[1], groups,
                                        big, small, k, s, p, d, x, g, None, out), op)
    if cdt is not odt:
        out = cast(out, odt)
    if G.any_requires_grad(input, grad_output):
        G.record(ops.convolution_backward_weight, out, (input, grad_output, wsh),
                 {"stride": s, "padding": p, "dilation": d, "groups": groups})
    return out


def _cols_geometry(op, x, nd, kernel_size, dilation, padding, stride):
    k = _tuple(kernel_size, nd, "kernel_size", op)
    if builtins.any(v <= 0 for v in k):
        raise RuntimeError(f"{op}: kernel_size should be greater than zero, got {builtins.list(k)}")
    s, p, d = _params(op, nd, stride, padding, dilation)
    return k, s, p, d


def im2col(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks of a batched image (N, C, *spatial) as columns (N, C * prod(kernel),
    L): the matrix ``fiamma.nn.functional.unfold`` returns. The number of spatial dims is
    ``len(kernel_size)`` (an int kernel means 2)."""
    op = "im2col"
    _check_tensor(input, "input", op)
    nd = len(kernel_size) if isinstance(kernel_size, (builtins.list, builtins.tuple)) else 2
    if input.dim() != nd + 2:
        raise RuntimeError(f"{op}: expected {nd + 2}-D input (N, C, *spatial), got shape "
                           f"{builtins.list(input.shape)}")
    k, s, p, d = _cols_geometry(op, input, nd, kernel_size, dilation, padding, stride)
    odt, cdt = _compute_dtype(op, input)
    n, c = input._shape[:2]
    big = input._shape[2:]
    small = builtins.tuple((big[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
                           for i in range(nd))
    if builtins.any(v <= 0 for v in small) or builtins.any(v <= 0 for v in big):
        raise RuntimeError(f"{op}: given input with spatial size {builtins.list(big)}, "
                           f"kernel_size={builtins.list(k)}, dilation={builtins.list(d)}, "
                           f"padding={builtins.list(p)}, calculated shape of the array of sliding "
                           f"blocks is {builtins.list(small)}, but its components must be at "
                           f"least one")
    kp = 1
    for v in k:
        kp *= v
    L = 1
    for v in small:
        L *= v
    out = new_empty((n, c * kp, L), cdt, input._storage.device)
    if c and out._numel:
        x = _prep(input, cdt)
        _run(op, K.CONV_IM2COL, cdt, nd, n, c, c, 1, big, small, k, s, p, d, x, None, None,
             out)
    if cdt is not odt:
        out = cast(out, odt)
    if input.requires_grad:
        G.record(ops.im2col, out, (input,),
                 {"kernel_size": k, "dilation": d, "padding": p, "stride": s})
    return out


def col2im(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum columns (N, C * prod(kernel), L) back into an image (N, C, *output_size): the
    adjoint of ``im2col`` (``fiamma.nn.functional.fold``)."""
    op = "col2im"
    _check_tensor(input, "input", op)
    nd = len(kernel_size) if isinstance(kernel_size, (builtins.list, builtins.tuple)) else 2
    big = _tuple(output_size, nd, "output_size", op)
    k, s, p, d = _cols_geometry(op, input, nd, kernel_size, dilation, padding, stride)
    if input.dim() != 3:
        raise RuntimeError(f"{op}: expected 3-D input (N, C * prod(kernel_size), L), got shape "
                           f"{builtins.list(input.shape)}")
    odt, cdt = _compute_dtype(op, input)
    n, ck, L = input._shape
    kp = 1
    for v in k:
        kp *= v
    if ck % kp:
        raise RuntimeError(f"{op}: expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ck} and "
                           f"kernel_size={builtins.list(k)}")
    small = builtins.tuple((big[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
                           for i in range(nd))
    Lexp = 1
    for v in small:
        Lexp *= v
    if builtins.any(v <= 0 for v in small) or builtins.any(v <= 0 for v in big) or L != Lexp:
        raise RuntimeError(f"{op}: given output_size={builtins.list(big)}, kernel_size="
                           f"{builtins.list(k)}, dilation={builtins.list(d)}, padding="
                           f"{builtins.list(p)}, stride={builtins.list(s)}, expected size of "
                           f"input's dimension 2 to match the calculated number of sliding blocks "
                           f"{' * '.join(str(v) for v in small)} = {Lexp}, but got "
                           f"input.size(2)={L}")
    c = ck // kp
    out = new_empty((n, c) + big, cdt, input._storage.device)
    if c and out._numel:
        x = _prep(input, cdt)
        _run(op, K.CONV_COL2IM, cdt, nd, n, c, c, 1, big, small, k, s, p, d, x, None, None,
             out)
    if cdt is not odt:
        out = cast(out, odt)
    if input.requires_grad:
        G.record(ops.col2im, out, (input,), {"output_size": big, "kernel_size": k, "dilation": d,
                                     "padding": p, "stride": s})
    return out


# ---- the public conv*d / conv_transpose*d --------------------------------------------------

def _batched(op, input, nd):
    _check_tensor(input, "input", op)
    if input.dim() == nd + 1:
        return input.unsqueeze(0), True
    if input.dim() != nd + 2:
        raise RuntimeError(f"{op}: Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{op}, but got input of size: {builtins.list(input.shape)}")
    return input, False


def _conv(op, nd, input, weight, bias, stride, padding, dilation, groups):
    if _AC_ON:  # on autocast's lower-precision list
        input, weight, bias = _AC.cast_lower(None, input, weight, bias)
    x, unbatched = _batched(op, input, nd)
    _check_tensor(weight, "weight", op)
    if weight.dim() != nd + 2:
        raise RuntimeError(f"{op}: expected {nd + 2}-D weight, got shape "
                           f"{builtins.list(weight.shape)}")
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            s = _tuple(stride, nd, "stride", op)
            if builtins.any(v != 1 for v in s):
                raise RuntimeError(f"{op}: padding='same' is not supported for strided "
                                   "convolutions")
            d = _tuple(dilation, nd, "dilation", op)
            total = [d[i] * (weight._shape[2 + i] - 1) for i in range(nd)]
            padding = builtins.tuple(t // 2 for t in total)
            extra = [t - 2 * (t // 2) for t in total]
            if builtins.any(extra):
                from fiamma._ops.pad import pad as _pad

                amounts = []
                for e in reversed(extra):
                    amounts += [0, e]
                x = _pad(x, amounts)
        else:
            raise ValueError(f"{op}: Invalid padding string {padding!r}, should be one of "
                             "'valid' or 'same'")
    out = convolution(x, weight, bias, stride, padding, dilation, False, 0, groups)
    return out.squeeze(0) if unbatched else out


def _conv_t(op, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    if _AC_ON:  # on autocast's lower-precision list
        input, weight, bias = _AC.cast_lower(None, input, weight, bias)
    x, unbatched = _batched(op, input, nd)
    _check_tensor(weight, "weight", op)
    if weight.dim() != nd + 2:
        raise RuntimeError(f"{op}: expected {nd + 2}-D weight, got shape "
                           f"{builtins.list(weight.shape)}")
    if isinstance(padding, str):
        raise ValueError(f"{op}: string padding is not supported for transposed convolutions")
    s = _tuple(stride, nd, "stride", op)
    d = _tuple(dilation, nd, "dilation", op)
    o = _tuple(output_padding, nd, "output_padding", op)
    for i in range(nd):
        if o[i] >= s[i] and o[i] >= d[i]:
            raise RuntimeError(f"{op}: output padding must be smaller than either stride or "
                               f"dilation, but got output_padding={builtins.list(o)}, stride="
                               f"{builtins.list(s)}, dilation={builtins.list(d)}")
    out = convolution(x, weight, bias, s, padding, d, True, o, groups)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of ``input`` (N, C_in, L) or (C_in, L) with ``weight`` (C_out, C_in /
    groups, k). ``padding`` may be an int, a tuple, ``'valid'`` or ``'same'``.

    >>> import fiamma
    >>> fiamma.conv1d(fiamma.ones(1, 1, 4), fiamma.ones(1, 1, 2)).tolist()
    [[[2.0, 2.0, 2.0]]]
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of ``input`` (N, C_in, H, W) or (C_in, H, W) with ``weight`` (C_out,
    C_in / groups, kH, kW) (cross-correlation, as in PyTorch).

    >>> import fiamma
    >>> fiamma.conv2d(fiamma.ones(1, 1, 3, 3), fiamma.ones(2, 1, 2, 2)).shape
    fiamma.Size([1, 2, 2, 2])
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of ``input`` (N, C_in, D, H, W) or unbatched with ``weight`` (C_out,
    C_in / groups, kD, kH, kW)."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution ("deconvolution") of ``input`` (N, C_in, L) with ``weight``
    (C_in, C_out / groups, k): the gradient of ``conv1d`` by its input.

    >>> import fiamma
    >>> fiamma.conv_transpose1d(fiamma.ones(1, 1, 2), fiamma.ones(1, 1, 2)).tolist()
    [[[1.0, 2.0, 1.0]]]
    """
    return _conv_t("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding,
                   groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution of ``input`` (N, C_in, H, W) with ``weight`` (C_in,
    C_out / groups, kH, kW)."""
    return _conv_t("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding,
                   groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution of ``input`` (N, C_in, D, H, W) with ``weight`` (C_in,
    C_out / groups, kD, kH, kW)."""
    return _conv_t("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding,
                   groups, dilation)


_AC.listen(globals())
