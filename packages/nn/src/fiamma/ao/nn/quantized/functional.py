"""Int8 kernels (``torch.ao.nn.quantized.functional``) with fbgemm's arithmetic.

Convolution and linear layers multiply ``uint8`` activations minus their zero point by
``int8`` weights minus theirs and accumulate exactly (the int32 sum of fbgemm; computed as a
float64 product of small integers, which is exact below 2**53), then requantize as fbgemm
does in float32: ``q = rint((acc + bias / (s_x * s_w)) * (s_x * s_w / s_out)) + z_out``,
clamped (at ``z_out`` from below when a ReLU is fused). This first version is vectorised
NumPy/core ops, not a hand-written int8 GEMM.

    >>> import fiamma
    >>> import fiamma.ao.nn.quantized.functional as qF
    >>> x = fiamma.quantize_per_tensor(fiamma.tensor([[1.0, -1.0]]), 0.1, 10, fiamma.quint8)
    >>> qF.relu(x).int_repr()
    tensor([[20, 10]], dtype=fiamma.uint8)
"""
import numpy as np

import fiamma
from fiamma.nn import _qtensor as Q

__all__ = ["conv1d", "conv2d", "conv3d", "linear", "relu", "max_pool2d", "adaptive_avg_pool2d",
           "avg_pool2d", "add", "add_relu", "mul", "cat", "requantize", "hardswish", "hardsigmoid",
           "relu6", "leaky_relu", "hardtanh", "threshold"]

_F32 = np.float32


def _check(op, x):
    if not isinstance(x, Q.QTensor):
        raise TypeError(f"{op}: expected a quantized tensor, got "
                        f"{getattr(x, 'dtype', type(x).__name__)} (use QuantStub / "
                        "fiamma.quantize_per_tensor first)")
    if x._axis is not None:
        raise RuntimeError(f"{op}: expected a per-tensor quantized activation")


def _ints(x):
    return np.asarray(x._int.numpy(), dtype=np.int64)


def _out(q, like, scale, zero_point, dtype=None):
    dtype = dtype or like._dtype
    return Q.QTensor._from_np(np.clip(q, dtype.qmin, dtype.qmax).astype(Q._NP[dtype.name]),
                              dtype, Q.per_tensor_affine, float(scale), int(zero_point))


def _weight_params(w, n_out):
    """Per-output-channel float32 scale and int64 zero point of a quantized weight."""
    if w._axis is None:
        return (np.full(n_out, w._scale, dtype=_F32),
                np.full(n_out, int(w._zero_point), dtype=np.int64))
    if w._axis != 0:
        raise RuntimeError(f"quantized weight: expected per-channel axis 0, got {w._axis}")
    return (np.asarray(w._scale.numpy(), dtype=_F32),
            np.asarray(w._zero_point.numpy(), dtype=np.int64))


def _requant(acc, x, w_scale, bias, scale, zero_point, relu, ch_axis):
    """fbgemm's float requantization of int32 accumulators ``acc`` (channel along
    ``ch_axis``)."""
    shape = [1] * acc.ndim
    shape[ch_axis] = -1
    act_w = (_F32(x._scale) * w_scale).astype(_F32).reshape(shape)
    raw = acc.astype(_F32)
    if bias is not None:
        raw = raw + (np.asarray(bias, dtype=_F32).reshape(shape) / act_w).astype(_F32)
    mult = (act_w / _F32(scale)).astype(_F32)
    q = np.rint((raw * mult).astype(_F32)).astype(np.int64) + int(zero_point)
    lo = int(zero_point) if relu else x._dtype.qmin
    return np.clip(q, lo, x._dtype.qmax)


_CONV_LAYOUT = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}


def _conv(nd, input, weight, bias, stride, padding, dilation, groups, padding_mode, scale,
          zero_point, _relu):
    op = f"quantized conv{nd}d"
    _check(op, input)
    if not isinstance(weight, Q.QTensor) or weight._dtype is not Q.qint8:
        raise TypeError(f"{op}: expected a qint8 weight")
    if input.ndim != nd + 2:
        raise ValueError(f"{op}: expected a {nd + 2}-d {_CONV_LAYOUT[nd]} input, got "
                         f"{input.ndim}-d")
    if weight.ndim != nd + 2:
        raise ValueError(f"{op}: expected a {nd + 2}-d weight, got {weight.ndim}-d")
    if padding_mode != "zeros":
        raise NotImplementedError(f"{op}: padding_mode {padding_mode!r} is not "
                                  "supported (only 'zeros')")
    n_out = weight.shape[0]
    w_scale, w_zp = _weight_params(weight, n_out)
    xs = fiamma.from_numpy((_ints(input) - int(input._zero_point)).astype(np.float64))
    wi = _ints(weight) - w_zp.reshape((-1,) + (1,) * (nd + 1))
    conv = {1: fiamma.conv1d, 2: fiamma.conv2d, 3: fiamma.conv3d}[nd]
    acc = conv(xs, fiamma.from_numpy(wi.astype(np.float64)), None, stride, padding,
               dilation, groups).numpy()
    acc = np.rint(acc).astype(np.int64)
    b = None if bias is None else bias.detach().numpy()
    return _out(_requant(acc, input, w_scale, b, scale, zero_point, _relu, 1), input, scale,
                zero_point)


def conv1d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros", scale=1.0, zero_point=0, dtype=None, _relu=False):
    """Quantized 1-d convolution of a quint8 ``(N, C, L)`` input with a qint8 weight (the
    arithmetic of :func:`conv2d`: fbgemm runs it as a 2-d convolution of height 1)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups, padding_mode,
                 scale, zero_point, _relu)


def conv2d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros", scale=1.0, zero_point=0, dtype=None, _relu=False):
    """Quantized 2-d convolution of a quint8 ``(N, C, H, W)`` input with a qint8 weight."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups, padding_mode,
                 scale, zero_point, _relu)


def conv3d(input, weight, bias, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros", scale=1.0, zero_point=0, dtype=None, _relu=False):
    """Quantized 3-d convolution of a quint8 ``(N, C, D, H, W)`` input with a qint8 weight
    (exact integer sums, requantized as :func:`conv2d`)."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups, padding_mode,
                 scale, zero_point, _relu)


def linear(input, weight, bias=None, scale=1.0, zero_point=0, _relu=False):
    """Quantized linear layer: quint8 ``(*, in)`` input, qint8 ``(out, in)`` weight."""
    _check("quantized linear", input)
    if not isinstance(weight, Q.QTensor) or weight._dtype is not Q.qint8:
        raise TypeError("quantized linear: expected a qint8 weight")
    if input.shape[-1] != weight.shape[1]:
        raise ValueError(f"quantized linear: input has {input.shape[-1]} features, the "
                         f"weight expects {weight.shape[1]}")
    w_scale, w_zp = _weight_params(weight, weight.shape[0])
    xs = (_ints(input) - int(input._zero_point)).astype(np.float64)
    wi = (_ints(weight) - w_zp.reshape(-1, 1)).astype(np.float64)
    acc = np.rint(xs @ wi.T).astype(np.int64)
    b = None if bias is None else bias.detach().numpy()
    return _out(_requant(acc, input, w_scale, b, scale, zero_point, _relu, acc.ndim - 1),
                input, scale, zero_point)


def relu(input, inplace=False):
    """``max(q, zero_point)`` with the input's qparams."""
    _check("quantized relu", input)
    return input.relu()


def relu6(input, inplace=False):
    """``clamp(q, zero_point, quantize(6))`` with the input's qparams."""
    _check("quantized relu6", input)
    zp = int(input._zero_point)
    six = zp + int(np.rint(_F32(6.0) * (_F32(1) / _F32(input._scale))))
    q = np.clip(_ints(input), zp, min(six, input._dtype.qmax))
    return _out(q, input, input._scale, zp)


def _requantize_float(v, like, scale, zero_point):
    """Quantize float32 values ``v`` as ATen's ``quantize_val`` (``rint(v * (1/scale))``)."""
    inv = _F32(1.0) / _F32(scale)
    q = np.rint((np.asarray(v, dtype=_F32) * inv).astype(_F32)).astype(np.int64)
    return q + int(zero_point)


def _dq(x):
    return ((_ints(x) - int(x._zero_point)).astype(_F32) * _F32(x._scale)).astype(_F32)


def hardswish(input, scale, zero_point):
    """``x * relu6(x + 3) / 6`` on dequantized values, requantized to ``scale``/``zero_point``."""
    _check("quantized hardswish", input)
    x = _dq(input)
    v = x * np.minimum(np.maximum(x + _F32(3), _F32(0)), _F32(6)) / _F32(6)
    return _out(_requantize_float(v, input, scale, zero_point), input, scale, zero_point)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6`` on dequantized values, quantized with PyTorch's fixed output
    qparams (scale 1/256, zero point 0 for quint8; 1/256 and -128 for qint8)."""
    _check("quantized hardsigmoid", input)
    x = _dq(input)
    v = np.minimum(np.maximum(x + _F32(3), _F32(0)), _F32(6)) / _F32(6)
    zp = -128 if input._dtype is Q.qint8 else 0
    return _out(_requantize_float(v, input, 1.0 / 256, zp), input, 1.0 / 256, zp)


def _same_qparams(op, input, fn):
    """``fn`` of the dequantized float32 values, requantized with the input's qparams
    (PyTorch's quantized leaky_relu / hardtanh / threshold keep them)."""
    _check(op, input)
    v = fn(_dq(input))
    return _out(_requantize_float(v, input, input._scale, input._zero_point), input,
                input._scale, input._zero_point)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` where ``x > 0``, else ``negative_slope * x``, with the input's qparams."""
    a = _F32(negative_slope)
    return _same_qparams("quantized leaky_relu", input, lambda x: np.where(x > 0, x, x * a))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)`` with the input's qparams."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    lo, hi = _F32(min_val), _F32(max_val)
    return _same_qparams("quantized hardtanh", input, lambda x: np.minimum(np.maximum(x, lo), hi))


def threshold(input, threshold, value):
    """``value`` where ``x <= threshold``, else ``x``, with the input's qparams."""
    t, v = _F32(threshold), _F32(value)
    return _same_qparams("quantized threshold", input, lambda x: np.where(x <= t, v, x))


def requantize(input, scale, zero_point):
    """The same values with new qparams."""
    _check("requantize", input)
    return _out(_requantize_float(_dq(input), input, scale, zero_point), input, scale,
                zero_point)


def add(a, b, scale, zero_point, relu=False):
    """``a + b`` (dequantized, summed in float32, requantized)."""
    _check("quantized add", a)
    _check("quantized add", b)
    q = _requantize_float(_dq(a) + _dq(b), a, scale, zero_point)
    if relu:
        q = np.maximum(q, int(zero_point))
    return _out(q, a, scale, zero_point)


def add_relu(a, b, scale, zero_point):
    """``relu(a + b)``."""
    return add(a, b, scale, zero_point, relu=True)


def mul(a, b, scale, zero_point, relu=False):
    """``a * b`` (dequantized, multiplied in float32, requantized)."""
    _check("quantized mul", a)
    _check("quantized mul", b)
    q = _requantize_float(_dq(a) * _dq(b), a, scale, zero_point)
    if relu:
        q = np.maximum(q, int(zero_point))
    return _out(q, a, scale, zero_point)


def cat(xs, dim, scale, zero_point):
    """Concatenate quantized tensors, requantizing each to ``scale``/``zero_point``."""
    for x in xs:
        _check("quantized cat", x)
    parts = [_ints(x) if (x._scale == scale and int(x._zero_point) == int(zero_point))
             else _requantize_float(_dq(x), x, scale, zero_point) for x in xs]
    return _out(np.concatenate(parts, axis=dim), xs[0], scale, zero_point)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of the integers (order is kept by quantization); the input's qparams."""
    _check("quantized max_pool2d", input)
    if return_indices:
        raise NotImplementedError("quantized max_pool2d: return_indices is not supported")
    f = fiamma.from_numpy(_ints(input).astype(np.float32))
    out = fiamma.max_pool2d(f, kernel_size, stride, padding, dilation, ceil_mode).numpy()
    return _out(out.astype(np.int64), input, input._scale, input._zero_point)


def _pool_requant(acc, count, input):
    """ATen's quantized average: ``rint(acc * (s_in / s_out / count)) + z`` in float32 over
    ``acc``, the sum of ``q - z`` (same qparams in and out)."""
    mult = (_F32(1.0) / np.asarray(count, dtype=_F32)).astype(_F32)
    q = np.rint((acc.astype(_F32) * mult).astype(_F32)).astype(np.int64)
    return q + int(input._zero_point)


def adaptive_avg_pool2d(input, output_size):
    """Adaptive average pool of the integers (exact sums, rounded half to even)."""
    _check("quantized adaptive_avg_pool2d", input)
    x = _ints(input) - int(input._zero_point)
    h, w = x.shape[-2:]
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    oh, ow = oh or h, ow or w
    out = np.empty(x.shape[:-2] + (oh, ow), dtype=np.int64)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            acc = x[..., h0:h1, w0:w1].sum(axis=(-2, -1))
            out[..., i, j] = _pool_requant(acc, (h1 - h0) * (w1 - w0), input)
    return _out(out, input, input._scale, input._zero_point)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Average pool of the integers (exact sums via a float64 pool, rounded half to even)."""
    _check("quantized avg_pool2d", input)
    x = fiamma.from_numpy((_ints(input) - int(input._zero_point)).astype(np.float64))
    ones = fiamma.ones_like(x)
    acc = fiamma.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                            1).numpy()
    if divisor_override is not None:
        count = np.full(acc.shape, divisor_override)
    else:
        count = fiamma.avg_pool2d(ones, kernel_size, stride, padding, ceil_mode,
                                  count_include_pad, 1).numpy()
    return _out(_pool_requant(np.rint(acc).astype(np.int64), np.rint(count), input), input,
                input._scale, input._zero_point)
