"""ONNX converters for fiamma.fft: every transform as 1-d DFT nodes (opset 17+).

ONNX has no complex tensor type a runtime computes with, so a complex value is a float tensor
with a trailing dimension of 2 holding (real, imag) pairs: fiamma's pair layout
(``view_as_real``). The converters accept either form a trace may hold for a transform's
input or result: a float tensor in the pair layout, or a complex64/complex128 tensor (what
``fiamma.fft`` of a real input returns once real inputs give complex tensors); both are the
same pairs tensor in the file. Normalisation (``norm``) is applied explicitly, since ONNX's
inverse DFT always divides by n.
"""

import math

import numpy as np

from ._converters import converter

_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
_REAL = {"complex64": np.float32, "complex128": np.float64}


def _is_cplx_dtype(ctx, v):
    return ctx.meta(v)[1] in _REAL


def real_dtype(ctx, v):
    """The float dtype of ``v``'s values in the file (a complex dtype's component type)."""
    dt = ctx.meta(v)[1]
    return np.dtype(_REAL[dt]) if dt in _REAL else ctx.np_dtype(v)


def _signal(ctx, v, cplx):
    """(ONNX name, signal shape, is complex) of an fft input; the trailing pair dimension of a
    complex value is not a signal dimension."""
    shape = list(ctx.shape(v))
    if _is_cplx_dtype(ctx, v):
        return ctx.name(v), shape, True
    if cplx:
        if not shape or shape[-1] != 2:
            ctx.unsupported(f"{ctx.node.op}: a complex input in the pair layout needs a last "
                            f"dimension of 2, got shape {shape}")
        return ctx.name(v), shape[:-1], True
    return ctx.name(v), shape, False


def _resize(ctx, x, shape, d, n):
    """``x`` (pairs or [.., 1] layout, signal ``shape``) zero-padded or trimmed to ``n`` along
    signal dim ``d``."""
    m = shape[d]
    if n == m:
        return x
    if n < m:
        return ctx.add("Slice", [x, ctx.ints([0]), ctx.ints([n]), ctx.ints([d])])
    pads = [0] * (len(shape) + 1) * 2
    pads[len(shape) + 1 + d] = n - m
    return ctx.add("Pad", [x, ctx.ints(pads)], mode="constant")


def _scale(ctx, x, factor, dt):
    if factor == 1:
        return x
    return ctx.add("Mul", [x, ctx.const(np.asarray(factor, dt), "fft_scale")])


def _dft(ctx, x, rank, d, inverse, onesided=False):
    """One DFT over signal dim ``d`` of a [..., 1 or 2] tensor whose signal rank is ``rank``.
    A leading axis of 1 is added so the transformed axis is never the first (opset 17's batch
    axis)."""
    y = ctx.add("Unsqueeze", [x, ctx.ints([0])])
    attrs = dict(inverse=int(inverse), onesided=int(onesided))
    if ctx.opset >= 20:
        y = ctx.add("DFT", [y, "", ctx.const(np.asarray(d + 1, np.int64), "axis")], **attrs)
    else:
        y = ctx.add("DFT", [y], axis=d + 1, **attrs)
    return ctx.add("Squeeze", [y, ctx.ints([0])])


def _norm_factor(norm, n, inverse):
    """The factor turning ONNX's DFT (forward: none, inverse: 1/n) into fiamma's ``norm``."""
    norm = norm or "backward"
    want = {"backward": 1.0 if not inverse else 1.0 / n, "ortho": 1.0 / math.sqrt(n),
            "forward": 1.0 / n if not inverse else 1.0}[norm]
    have = 1.0 / n if inverse else 1.0
    return want / have


def _c2c(ctx, x, shape, cplx, d, n, inverse, norm, dt):
    """A complex (or real, promoted) transform along ``d``; returns pairs and the new shape."""
    if not cplx:
        x = ctx.add("Unsqueeze", [x, ctx.ints([len(shape)])])
    n = shape[d] if n is None else n
    x = _resize(ctx, x, shape, d, n)
    y = _dft(ctx, x, len(shape), d, inverse)
    shape = shape[:d] + [n] + shape[d + 1:]
    return _scale(ctx, y, _norm_factor(norm, n, inverse), dt), shape


def _r2c(ctx, x, shape, d, n, norm, dt):
    """rfft along ``d`` of a real tensor: the n // 2 + 1 non-negative frequencies."""
    x = ctx.add("Unsqueeze", [x, ctx.ints([len(shape)])])
    n = shape[d] if n is None else n
    x = _resize(ctx, x, shape, d, n)
    y = _dft(ctx, x, len(shape), d, False, onesided=True)
    shape = shape[:d] + [n // 2 + 1] + shape[d + 1:]
    return _scale(ctx, y, _norm_factor(norm, n, False), dt), shape


def _c2r(ctx, x, shape, d, n, norm, dt):
    """irfft along ``d``: the half spectrum completed by Hermitian symmetry, an inverse complex
    DFT, the real part (the imaginary parts of the zero and Nyquist terms drop out, as in
    pocketfft's c2r)."""
    m = shape[d]
    n = 2 * (m - 1) if n is None else n
    if n < 1:
        ctx.unsupported(f"{ctx.node.op}: invalid number of data points ({n})")
    half = n // 2 + 1
    x = _resize(ctx, x, shape, d, half)
    rest = n - half
    if rest:
        mirror = ctx.add("Slice", [x, ctx.ints([rest]), ctx.ints([0]), ctx.ints([d]),
                                   ctx.ints([-1])])
        x = ctx.add("Concat", [x, _conj(ctx, mirror, dt)], axis=d)
    y = _dft(ctx, x, len(shape), d, True)
    y = ctx.add("Gather", [y, ctx.const(np.asarray(0, np.int64), "real")], axis=len(shape))
    shape = shape[:d] + [n] + shape[d + 1:]
    return _scale(ctx, y, _norm_factor(norm, n, True), dt), shape


def _conj(ctx, x, dt):
    return ctx.add("Mul", [x, ctx.const(np.asarray([1, -1], dt), "conj")])


def _dim(d, rank, op, ctx):
    if not -rank <= d < rank:
        ctx.unsupported(f"{op}: dim {d} out of range for a {rank}-d signal")
    return d % rank


def _axes(rank, s, dim, two):
    """fiamma.fft's (s, dim) defaults (as recorded: s and dim as the caller gave them)."""
    if s is not None:
        s = list(s) if isinstance(s, (tuple, list)) else [s]
    if dim is None:
        if two:
            dims = [rank - 2, rank - 1] if s is None else list(range(rank - len(s), rank))
        elif s is not None:
            dims = list(range(rank - len(s), rank))
        else:
            dims = list(range(rank))
    else:
        dims = [d % rank for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
    sizes = [None] * len(dims) if s is None else [None if v == -1 else v for v in s]
    return dims, sizes


def _finish(ctx, y, outs):
    return ctx.add("Identity", [y], outs)


def _args(node):
    kw = node.kwargs
    return node.args[0], kw.get("n"), kw.get("dim", -1), kw.get("norm")


@converter("fft_fft", "fft_ifft")
def _fft(ctx, node, outs):
    v, n, dim, norm = _args(node)
    x, shape, cplx = _signal(ctx, v, bool(node.kwargs.get("complex_input")))
    dt = real_dtype(ctx, v)
    d = _dim(dim, len(shape), node.op, ctx)
    y, _ = _c2c(ctx, x, shape, cplx, d, n, node.op == "fft_ifft", norm, dt)
    return _finish(ctx, y, outs)


@converter("fft_rfft", "fft_ihfft")
def _rfft(ctx, node, outs):
    v, n, dim, norm = _args(node)
    x, shape, cplx = _signal(ctx, v, False)
    if cplx:
        ctx.unsupported(f"{node.op} of a complex input")
    dt = real_dtype(ctx, v)
    d = _dim(dim, len(shape), node.op, ctx)
    if node.op == "fft_ihfft":
        y, _ = _r2c(ctx, x, shape, d, n, _SWAP[norm or "backward"], dt)
        return _finish(ctx, _conj(ctx, y, dt), outs)
    y, _ = _r2c(ctx, x, shape, d, n, norm, dt)
    return _finish(ctx, y, outs)


@converter("fft_irfft", "fft_hfft")
def _irfft(ctx, node, outs):
    v, n, dim, norm = _args(node)
    x, shape, _ = _signal(ctx, v, True)
    dt = real_dtype(ctx, v)
    d = _dim(dim, len(shape), node.op, ctx)
    if node.op == "fft_hfft":
        x, norm = _conj(ctx, x, dt), _SWAP[norm or "backward"]
    y, _ = _c2r(ctx, x, shape, d, n, norm, dt)
    return _finish(ctx, y, outs)


@converter("fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn")
def _fftn(ctx, node, outs):
    v = node.args[0]
    kw = node.kwargs
    x, shape, cplx = _signal(ctx, v, bool(kw.get("complex_input")))
    dt = real_dtype(ctx, v)
    dims, sizes = _axes(len(shape), kw.get("s"), kw.get("dim"), node.op.endswith("2"))
    inverse = node.op.startswith("fft_i")
    if not dims:  # no axes: the input as complex pairs
        y = x if cplx else ctx.add("Concat", [
            ctx.add("Unsqueeze", [x, ctx.ints([len(shape)])]),
            ctx.add("Unsqueeze", [ctx.add("Mul", [x, ctx.const(np.asarray(0, dt))]),
                                  ctx.ints([len(shape)])])], axis=len(shape))
        return _finish(ctx, y, outs)
    for d, n in zip(dims, sizes):
        x, shape = _c2c(ctx, x, shape, cplx, d, n, inverse, kw.get("norm"), dt)
        cplx = True
    return _finish(ctx, x, outs)


@converter("fft_rfft2", "fft_rfftn", "fft_ihfft2", "fft_ihfftn")
def _rfftn(ctx, node, outs):
    v = node.args[0]
    kw = node.kwargs
    x, shape, cplx = _signal(ctx, v, False)
    if cplx:
        ctx.unsupported(f"{node.op} of a complex input")
    dt = real_dtype(ctx, v)
    dims, sizes = _axes(len(shape), kw.get("s"), kw.get("dim"), node.op.endswith("2"))
    herm = "ihfft" in node.op
    norm = _SWAP[kw.get("norm") or "backward"] if herm else kw.get("norm")
    x, shape = _r2c(ctx, x, shape, dims[-1], sizes[-1], norm, dt)
    for d, n in zip(dims[:-1], sizes[:-1]):
        x, shape = _c2c(ctx, x, shape, True, d, n, False, norm, dt)
    return _finish(ctx, _conj(ctx, x, dt) if herm else x, outs)


@converter("fft_irfft2", "fft_irfftn", "fft_hfft2", "fft_hfftn")
def _irfftn(ctx, node, outs):
    v = node.args[0]
    kw = node.kwargs
    x, shape, _ = _signal(ctx, v, True)
    dt = real_dtype(ctx, v)
    dims, sizes = _axes(len(shape), kw.get("s"), kw.get("dim"), node.op.endswith("2"))
    norm = kw.get("norm")
    if "hfft" in node.op:
        x, norm = _conj(ctx, x, dt), _SWAP[norm or "backward"]
    for d, n in zip(dims[:-1], sizes[:-1]):
        x, shape = _c2c(ctx, x, shape, True, d, n, True, norm, dt)
    y, _ = _c2r(ctx, x, shape, dims[-1], sizes[-1], norm, dt)
    return _finish(ctx, y, outs)


@converter("fftshift", "ifftshift")
def _shift(ctx, node, outs):
    v = node.args[0]
    shape = list(ctx.shape(v))
    cplx = _is_cplx_dtype(ctx, v) or v.name in ctx.pairs
    rank = len(shape) - 1 if cplx and not _is_cplx_dtype(ctx, v) else len(shape)
    dim = node.kwargs.get("dim")
    dims = list(range(rank)) if dim is None else \
        [d % rank for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
    sign = 1 if node.op == "fftshift" else -1
    y = ctx.name(v)
    for d in dims:
        k = (sign * (shape[d] // 2)) % shape[d] if shape[d] else 0
        y = roll_axis(ctx, y, d, k)
    if cplx:
        ctx.pairs.update(node.outputs)
    return _finish(ctx, y, outs)


def roll_axis(ctx, x, d, k):
    """``x`` rolled by ``k`` (0 <= k < size) along axis ``d``: its last k entries first
    (negative slice bounds, so the same nodes roll a longer axis by k too)."""
    if not k:
        return x
    big = np.iinfo(np.int64).max
    tail = ctx.add("Slice", [x, ctx.ints([-k]), ctx.ints([big]), ctx.ints([d])])
    head = ctx.add("Slice", [x, ctx.ints([0]), ctx.ints([-k]), ctx.ints([d])])
    return ctx.add("Concat", [tail, head], axis=d)


FFT_OPS = {n for n in (
    "fft_fft fft_ifft fft_rfft fft_ihfft fft_irfft fft_hfft fft_fft2 fft_ifft2 fft_fftn "
    "fft_ifftn fft_rfft2 fft_rfftn fft_ihfft2 fft_ihfftn fft_irfft2 fft_irfftn fft_hfft2 "
    "fft_hfftn fftshift ifftshift").split()}

# the transforms whose result is complex (pairs in the file)
COMPLEX_RESULT = FFT_OPS - {"fft_irfft", "fft_hfft", "fft_irfft2", "fft_irfftn", "fft_hfft2",
                            "fft_hfftn", "fftshift", "ifftshift"}


def _complex_abs(ctx, node, outs):
    """|z| of complex values (pairs): the square root of the sum of squares of each pair."""
    x = node.args[0]
    sq = ctx.add("Mul", [x, x])
    r = len(ctx.shape(x))
    s = ctx.add("ReduceSum", [sq, ctx.ints([r])], keepdims=0)
    return ctx.add("Sqrt", [s], outs)


def _identity(ctx, node, outs):
    """view_as_real / view_as_complex: the pairs are the same tensor in the file."""
    return ctx.add("Identity", [node.args[0]], outs)


def _part(index):
    def conv(ctx, node, outs):
        x = node.args[0]
        return ctx.add("Gather", [x, ctx.const(np.asarray(index, np.int64), "part")], outs,
                       axis=len(ctx.shape(x)))
    return conv


# ---- complex arithmetic on pairs -------------------------------------------------------------

def _dtype_of(ctx, node):
    return real_dtype(ctx, node.outputs[0])


def _is_c(ctx, v):
    return isinstance(v, complex) or (hasattr(v, "name") and _is_cplx_dtype(ctx, v))


def _pairs(ctx, v, dt):
    """A complex operand as pairs; a real one as (x, 0) pairs."""
    if isinstance(v, complex) or not hasattr(v, "name"):
        z = complex(v)
        return ctx.const(np.asarray([z.real, z.imag], dt), "cplx")
    if _is_cplx_dtype(ctx, v):
        return ctx.name(v)
    u = _real_col(ctx, v, dt)
    return ctx.add("Concat", [u, ctx.add("Mul", [u, ctx.const(np.asarray(0, dt))])], axis=-1)


def _real_col(ctx, v, dt):
    """A real operand as [..., 1] (a Python number as a 0-d constant): it scales pairs."""
    if not hasattr(v, "name"):
        return ctx.const(np.asarray(v, dt), "scalar")
    x = ctx.name(v)
    if ctx.np_dtype(v) != dt:
        x = ctx.add("Cast", [x], to=ctx.helper.np_dtype_to_tensor_dtype(np.dtype(dt)))
    return ctx.add("Unsqueeze", [x, ctx.ints([-1])])


def _re_im(ctx, p):
    return (ctx.add("Slice", [p, ctx.ints([0]), ctx.ints([1]), ctx.ints([-1])]),
            ctx.add("Slice", [p, ctx.ints([1]), ctx.ints([2]), ctx.ints([-1])]))


def _cmul(ctx, a, b):
    (ar, ai), (br, bi) = _re_im(ctx, a), _re_im(ctx, b)
    re = ctx.add("Sub", [ctx.add("Mul", [ar, br]), ctx.add("Mul", [ai, bi])])
    im = ctx.add("Add", [ctx.add("Mul", [ar, bi]), ctx.add("Mul", [ai, br])])
    return ctx.add("Concat", [re, im], axis=-1)


def _complex_addsub(ctx, node, outs):
    dt = _dtype_of(ctx, node)
    a, b = (_pairs(ctx, v, dt) for v in node.args[:2])
    alpha = node.kwargs.get("alpha", 1)
    if alpha not in (1, None):
        b = ctx.add("Mul", [b, ctx.const(np.asarray(alpha, dt))])
    return ctx.add("Add" if node.op == "add" else "Sub", [a, b], outs)


def _complex_mul(ctx, node, outs):
    dt = _dtype_of(ctx, node)
    a, b = node.args[:2]
    if not _is_c(ctx, a) or not _is_c(ctx, b):  # a real factor scales both parts
        z, r = (a, b) if _is_c(ctx, a) else (b, a)
        return ctx.add("Mul", [_pairs(ctx, z, dt), _real_col(ctx, r, dt)], outs)
    return ctx.add("Identity", [_cmul(ctx, _pairs(ctx, a, dt), _pairs(ctx, b, dt))], outs)


def _complex_div(ctx, node, outs):
    dt = _dtype_of(ctx, node)
    a, b = node.args[:2]
    if node.kwargs.get("rounding_mode"):
        ctx.unsupported("div with rounding_mode of complex values")
    pa = _pairs(ctx, a, dt)
    if not _is_c(ctx, b):
        return ctx.add("Div", [pa, _real_col(ctx, b, dt)], outs)
    pb = _pairs(ctx, b, dt)
    num = _cmul(ctx, pa, _conj(ctx, pb, dt))
    den = ctx.add("ReduceSum", [ctx.add("Mul", [pb, pb]), ctx.ints([-1])], keepdims=1)
    return ctx.add("Div", [num, den], outs)


def _complex_neg(ctx, node, outs):
    return ctx.add("Neg", [node.args[0]], outs)


def _complex_conj(ctx, node, outs):
    return ctx.add("Identity", [_conj(ctx, ctx.name(node.args[0]), _dtype_of(ctx, node))], outs)


# converters for ops whose input or result is a complex tensor (complex64/128 in the trace)
COMPLEX_CONVERTERS = {"abs": _complex_abs, "view_as_real": _identity,
                      "view_as_complex": _identity, "real": _part(0), "imag": _part(1),
                      "add": _complex_addsub, "sub": _complex_addsub, "mul": _complex_mul,
                      "div": _complex_div, "neg": _complex_neg, "conj": _complex_conj,
                      "conj_physical": _complex_conj, "clone": _identity}
