"""Derivatives of every fiamma.fft transform (fft, ifft, rfft, irfft, hfft, ihfft and their
2-d / n-d forms) and of fftshift / ifftshift. Complex spectra are complex tensors; gradients
follow PyTorch's convention (for a complex tensor, dL/dRe + i dL/dIm), so the gradient of a
linear transform is its adjoint applied to the incoming gradient.

The adjoint of a DFT is the DFT in the other direction with the dual normalisation
('backward' <-> 'forward', 'ortho' <-> 'ortho'); the gradient is then cut or zero-padded back
to the input's length (the transform padded or cut it), and a real input keeps the real part.
rfft's adjoint zero-fills the missing negative frequencies; irfft's doubles the bins that stand
for a conjugate pair; hfft / ihfft are irfft / rfft of the conjugate with the swapped norm.
Written with fiamma.fft itself, so they differentiate again.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd_hook import ops

_DUAL = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _F():
    import fiamma.fft as F

    return F


def _fit(g, d, length):
    """``g`` cut or zero-padded along signal dim ``d`` to ``length``."""
    n = g.shape[d]
    if n == length:
        return g
    if n > length:
        return g.narrow(d, 0, length)
    shape = list(g.shape)
    shape[d] = length - n
    return fiamma.cat([g, fiamma.zeros(tuple(shape), dtype=g.dtype, device=g.device)], d)


def _signal_dims(ctx):
    """(input shape, how the input held its signal, number of signal dims): "complex" for a
    complex tensor, "pairs" for a real (..., 2) tensor read with complex_input=True, "real"."""
    shape = tuple(ctx.input_shapes[0])
    if ctx.input_dtypes[0].is_complex:
        return shape, "complex", len(shape)
    if ctx.kwargs.get("complex_input", False):
        return shape, "pairs", len(shape) - 1
    return shape, "real", len(shape)


def _c2c_dims(ctx, nd):
    kw = ctx.kwargs
    if "s" in kw or ctx.op in (ops.fft_fft2, ops.fft_ifft2, ops.fft_fftn, ops.fft_ifftn):
        s, dim = kw.get("s"), kw.get("dim")
        if dim is None:
            dims = list(range(nd)) if s is None else list(range(nd - len(s), nd))
        else:
            dims = [d % nd for d in ((dim,) if isinstance(dim, int) else dim)]
        return dims
    return [kw.get("dim", -1) % nd]


@derivative(ops.fft_fft, ops.fft_ifft, ops.fft_fft2, ops.fft_ifft2, ops.fft_fftn, ops.fft_ifftn,
            save="none")
def _c2c(ctx, grad):
    shape, cplx, nd = _signal_dims(ctx)
    dims = _c2c_dims(ctx, nd)
    inverse = ctx.op in (ops.fft_ifft, ops.fft_ifft2, ops.fft_ifftn)
    norm = _DUAL[ctx.kwargs.get("norm")]
    F = _F()
    fn = F.fftn if inverse else F.ifftn
    g = fn(grad, dim=tuple(dims), norm=norm)
    for d in dims:
        g = _fit(g, d, shape[d])
    if cplx == "pairs":
        return (fiamma.view_as_real(g),)
    return (g if cplx == "complex" else g.real,)


_SWAP = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _real_dims(ctx, nd):
    """The transformed dims of an r2c / c2r transform (1-d: ``dim``; n-d: ``dim`` / ``s``)."""
    kw = ctx.kwargs
    if "s" not in kw:
        return [kw.get("dim", -1) % nd]
    s, dim = kw.get("s"), kw.get("dim")
    if dim is None:
        return list(range(nd)) if s is None else list(range(nd - len(s), nd))
    return [d % nd for d in ((dim,) if isinstance(dim, int) else dim)]


def _adj_r2c(g, shape, dims, n_last, norm):
    """Adjoint of "real signal of ``shape`` -> half spectrum over ``dims`` (last one halved,
    full length ``n_last``)": zero-fill the missing frequencies, inverse-transform with the dual
    norm, keep the real part, cut/pad back to the signal's sizes."""
    full = _fit(g, dims[-1], n_last)
    x = _F().ifftn(full, dim=tuple(dims), norm=_DUAL[norm]).real
    for d in dims:
        x = _fit(x, d, shape[d])
    return x


def _adj_c2r(g, cshape, dims, norm):
    """Adjoint of "half spectrum (complex sizes ``cshape``) -> real signal ``g``'s sizes over
    ``dims``": the forward real transform with the dual norm, the bins that stand for a
    conjugate pair doubled, cut/pad back to the spectrum's sizes."""
    d = dims[-1]
    n = g.shape[d]
    z = _F().rfftn(g, dim=tuple(dims), norm=_DUAL[norm])
    bins = z.shape[d]
    paired = n - bins
    if paired > 0:
        w = fiamma.ones((bins,), dtype=g.dtype, device=z.device)
        w = fiamma.cat([w[:1], w[1:1 + paired] * 2.0, w[1 + paired:]])
        z = z * w.reshape((bins,) + (1,) * (z.ndim - 1 - d))
    for k in dims:
        z = _fit(z, k, cshape[k])
    return z


def _n_last(ctx, shape, dims):
    kw = ctx.kwargs
    if "s" in kw:
        s = kw.get("s")
        return s[-1] if s is not None else shape[dims[-1]]
    return kw.get("n") or shape[dims[-1]]


@derivative(ops.fft_rfft, ops.fft_rfft2, ops.fft_rfftn, save="none")
def _rfft(ctx, grad):
    shape = tuple(ctx.input_shapes[0])
    dims = _real_dims(ctx, len(shape))
    norm = ctx.kwargs.get("norm")
    return (_adj_r2c(grad, shape, dims, _n_last(ctx, shape, dims), norm),)


@derivative(ops.fft_ihfft, ops.fft_ihfft2, ops.fft_ihfftn, save="none")
def _ihfft(ctx, grad):
    """ihfft(x) = conj(rfft(x)) with the swapped norm."""
    shape = tuple(ctx.input_shapes[0])
    dims = _real_dims(ctx, len(shape))
    norm = _SWAP[ctx.kwargs.get("norm")]
    return (_adj_r2c(grad.conj(), shape, dims, _n_last(ctx, shape, dims), norm),)


@derivative(ops.fft_irfft, ops.fft_irfft2, ops.fft_irfftn, save="none")
def _irfft(ctx, grad):
    cshape = tuple(ctx.input_shapes[0])
    dims = _real_dims(ctx, len(cshape))
    return (_adj_c2r(grad, cshape, dims, ctx.kwargs.get("norm")),)


@derivative(ops.fft_hfft, ops.fft_hfft2, ops.fft_hfftn, save="none")
def _hfft(ctx, grad):
    """hfft(x) = irfft(conj(x)) with the swapped norm."""
    cshape = tuple(ctx.input_shapes[0])
    dims = _real_dims(ctx, len(cshape))
    return (_adj_c2r(grad, cshape, dims, _SWAP[ctx.kwargs.get("norm")]).conj(),)


@derivative(ops.fftshift, ops.ifftshift, save="inputs")
def _fftshift(ctx, grad):
    """A roll by n // 2 (fftshift) or -(n // 2): rolled back. The trailing (real, imag) pair of
    a tensor marked with ``as_complex_layout`` is not a signal dim."""
    x = ctx.inputs[0]
    F = _F()
    nd = x.ndim - 1 if F.is_complex_layout(x) else x.ndim
    dim = ctx.kwargs.get("dim")
    dims = list(range(nd)) if dim is None else \
        [d % nd for d in ((dim,) if isinstance(dim, int) else dim)]
    if not dims:
        return (grad,)
    sign = -1 if ctx.op == ops.fftshift else 1
    shifts = tuple(sign * (grad.shape[d] // 2) for d in dims)
    return (fiamma.roll(grad, shifts, tuple(dims)),)
