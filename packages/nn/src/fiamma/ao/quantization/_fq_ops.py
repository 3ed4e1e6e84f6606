"""The fake-quantize arithmetic of PyTorch's kernels (``fake_quantize_per_tensor_affine``,
``fake_quantize_per_channel_affine``, ``fused_moving_avg_obs_fake_quant``).

Forward: ``q = round_half_even(x * (1 / s)) + z`` (PyTorch multiplies by the float32 inverse
scale rather than dividing: the two round ties differently), ``(clamp(q, qmin, qmax) - z) * s``.
Backward: the incoming gradient where ``qmin <= q <= qmax``, zero where the value was clipped
(PyTorch's cachemask kernels), not a pure straight-through estimator.
"""
import numpy as np

import fiamma

_SMALL_SCALE = np.float32(6.1e-5)  # PyTorch's SMALL_SCALE_THRESHOLD in ChooseQuantizationParams
_FQ = None
_FQ_FLOAT_ZP = None


def _function():
    global _FQ
    if _FQ is None:
        from fiamma.autograd import Function

        class _FakeQuantize(Function):
            @staticmethod
            def forward(ctx, x, inv, scale, zp, qmin, qmax):
                q = fiamma.round(x * inv) + zp
                mask = (q >= qmin) & (q <= qmax)
                ctx.save_for_backward(mask)
                return (q.clamp(qmin, qmax) - zp) * scale

            @staticmethod
            def backward(ctx, grad):
                (mask,) = ctx.saved_tensors
                return grad * mask.to(grad.dtype), None, None, None, None, None

        _FQ = _FakeQuantize
    return _FQ


def _function_float_zp():
    """The fake quantization of float zero points (``per_channel_affine_float_qparams``):
    ``q = round(x * (1/s) + z)``, ``(clamp(q) - z) * s``, masked gradient."""
    global _FQ_FLOAT_ZP
    if _FQ_FLOAT_ZP is None:
        from fiamma.autograd import Function

        class _FakeQuantizeFloatZP(Function):
            @staticmethod
            def forward(ctx, x, inv, scale, zp, qmin, qmax):
                q = fiamma.round(x * inv + zp)
                mask = (q >= qmin) & (q <= qmax)
                ctx.save_for_backward(mask)
                return (q.clamp(qmin, qmax) - zp) * scale

            @staticmethod
            def backward(ctx, grad):
                (mask,) = ctx.saved_tensors
                return grad * mask.to(grad.dtype), None, None, None, None, None

        _FQ_FLOAT_ZP = _FakeQuantizeFloatZP
    return _FQ_FLOAT_ZP


def _check(op, x, qmin, qmax):
    if not isinstance(x, fiamma.Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise RuntimeError(f"{op}: expected a floating-point input, got {x.dtype}")
    if not qmin <= qmax:
        raise RuntimeError(f"{op}: `quant_min` should be less than or equal to `quant_max`, "
                           f"got {qmin} and {qmax}")


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """``(clamp(round(x / scale) + zero_point, qmin, qmax) - zero_point) * scale`` with the
    gradient masked to the unclipped values (``torch.fake_quantize_per_tensor_affine``)."""
    op = "fake_quantize_per_tensor_affine"
    _check(op, input, quant_min, quant_max)
    s = np.float32(float(scale.reshape(-1)[0]) if isinstance(scale, fiamma.Tensor) else scale)
    z = int(zero_point.reshape(-1)[0]) if isinstance(zero_point, fiamma.Tensor) else int(
        zero_point)
    if not quant_min <= z <= quant_max:
        raise RuntimeError(f"{op}: `zero_point` must be between `quant_min` and `quant_max`, "
                           f"got {z} outside [{quant_min}, {quant_max}]")
    inv = float(np.float32(1.0) / s)
    return _function().apply(input, inv, float(s), float(z), quant_min, quant_max)


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """Per-channel fake quantization along ``axis`` (``torch.fake_quantize_per_channel_affine``),
    gradient masked as the per-tensor one."""
    op = "fake_quantize_per_channel_affine"
    _check(op, input, quant_min, quant_max)
    axis = axis + input.ndim if axis < 0 else axis
    if not 0 <= axis < input.ndim:
        raise IndexError(f"{op}: axis {axis} out of range for a {input.ndim}-d input")
    n = input.shape[axis]
    if scale.numel() != n or zero_point.numel() != n:
        raise RuntimeError(f"{op}: dimensions of scale ({scale.numel()}) and zero_point "
                           f"({zero_point.numel()}) must match the input's size {n} at axis "
                           f"{axis}")
    shape = [1] * input.ndim
    shape[axis] = n
    s32 = scale.detach().cpu().numpy().astype(np.float32)
    inv = fiamma.from_numpy((np.float32(1.0) / s32).reshape(shape)).to(input.device)
    if zero_point.is_floating_point():  # float qparams: no range check, as PyTorch
        zf = zero_point.detach().cpu().numpy().astype(np.float32).reshape(shape)
        z = fiamma.from_numpy(zf).to(input.device).to(input.dtype)
        s = fiamma.from_numpy(s32.reshape(shape)).to(input.device).to(input.dtype)
        return _function_float_zp().apply(input, inv.to(input.dtype), s, z, quant_min,
                                           quant_max)
    zpn = zero_point.detach().cpu().numpy().astype(np.int64)
    if ((zpn < quant_min) | (zpn > quant_max)).any():
        raise RuntimeError(f"{op}: `zero_point` must be between `quant_min` and `quant_max`")
    s = fiamma.from_numpy(s32.reshape(shape)).to(input.device).to(input.dtype)
    z = fiamma.from_numpy(zpn.astype(np.float32).reshape(shape)).to(input.device)
    return _function().apply(input, inv.to(input.dtype), s, z.to(input.dtype), quant_min,
                             quant_max)


def choose_qparams(min_val, max_val, qmin, qmax, preserve_sparsity):
    """PyTorch's C++ ``ChooseQuantizationParams`` (what the fused fake-quant kernel uses),
    elementwise over float32 arrays: the scale (float32) from the range widened to include 0
    (made symmetric when ``preserve_sparsity``), the zero point nudged from the end with the
    smaller rounding error."""
    lo = np.array(min_val, dtype=np.float32, ndmin=1).copy()
    hi = np.array(max_val, dtype=np.float32, ndmin=1).copy()
    scales = np.empty(lo.shape, np.float32)
    zps = np.empty(lo.shape, np.int64)
    for i in range(lo.size):
        mn, mx = lo.flat[i], hi.flat[i]
        sym = bool(preserve_sparsity and mn < 0 and mx > 0)
        if sym:
            sqmin = -((qmax - qmin) // 2 + 1)
            sqmax = (qmax - qmin) // 2
            ms = max(float(abs(mn / np.float32(sqmin))), float(abs(mx / np.float32(sqmax))))
            mn, mx = np.float32(ms * sqmin), np.float32(ms * sqmax)
        mn, mx = min(mn, np.float32(0)), max(mx, np.float32(0))
        scale = (float(mx) - float(mn)) / (qmax - qmin)
        if np.float32(scale) == 0 or np.isinf(np.float32(1.0) / np.float32(scale)):
            scale = 0.1
        if np.float32(scale) < _SMALL_SCALE:
            org = scale
            scale = float(_SMALL_SCALE)
            if mn == 0:
                mx = np.float32(scale * (qmax - qmin))
            elif mx == 0:
                mn = np.float32(-scale * (qmax - qmin))
            else:
                amp = float(_SMALL_SCALE) / org
                mn, mx = np.float32(mn * amp), np.float32(mx * amp)
        zp_min = qmin - float(mn) / scale
        zp_max = qmax - float(mx) / scale
        err_min = abs(qmin) - abs(float(mn) / scale)
        err_max = abs(qmax) - abs(float(mx) / scale)
        zp = zp_min if err_min < err_max else zp_max
        if sym:
            zp = (qmin + qmax) / 2
        scales.flat[i] = np.float32(scale)
        zps.flat[i] = min(max(int(np.rint(zp)), qmin), qmax)
    return scales, zps
