"""Derivatives that complex numbers need beyond the conjugated real formulas.

PyTorch's convention: for a real loss L of z = x + iy, ``z.grad`` is dL/dx + i dL/dy (twice
the conjugate Wirtinger derivative dL/d(conj z)); a gradient flowing into output w of an op is
likewise dL/dRe(w) + i dL/dIm(w). For an op holomorphic in z the input gradient is then
``grad * conj(f'(z))``; the engine gets that from the real formulas by conjugating what they
saved (``ComplexNode``). The formulas here are the ones that are not holomorphic (real, imag,
abs, angle, sgn, conj, the views between the real and complex layouts, complex()) or whose
real formula compares values (pow).

The ``complex=True`` registrations are used when the op's result is complex; ops with a real
result from a complex input (angle, real, imag, view_as_real; abs in elementwise.py) have one
formula that looks at the input dtype.
"""

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import is_tensor


def _need(ctx, i):
    return ctx._next[i] is not None


def _cplx(ctx, i):
    dt = ctx.input_dtypes[i]
    return dt is not None and dt.is_complex


# ---- real results from complex inputs ----------------------------------------------------------

@derivative("real", save="none")
def _real(ctx, grad):
    # d Re(z): the gradient is real; the engine widens it to the input's complex dtype
    return (grad,)


@derivative("imag", save="none")
def _imag(ctx, grad):
    return (grad * 1j,)


@derivative("view_as_real", save="none")
def _view_as_real(ctx, grad):
    return (fiamma.complex(grad.select(-1, 0), grad.select(-1, 1)),)


@derivative("angle", save="inputs")
def _angle(ctx, grad):
    z = ctx.inputs[0]
    # d atan2(y, x) = (-y dx + x dy) / |z|^2: the gradient i z / |z|^2 (0 at 0)
    a2 = z.real * z.real + z.imag * z.imag
    nz = a2 == 0
    scale = fiamma.where(nz, 0.0, grad / fiamma.where(nz, 1.0, a2))
    return (z * scale * 1j,)


# ---- complex results -------------------------------------------------------------------------

@derivative("view_as_complex", save="none", complex=True)
def _view_as_complex(ctx, grad):
    return (fiamma.view_as_real(grad),)


@derivative("complex", save="none", complex=True)
def _complex(ctx, grad):
    return (grad.real if _need(ctx, 0) else None), (grad.imag if _need(ctx, 1) else None)


@derivative("conj", save="none", complex=True)
def _conj(ctx, grad):
    return (grad.conj(),)


@derivative("sgn", save="both", complex=True)
def _sgn(ctx, grad):
    # w = z/|z|: grad_z = (g - w Re(conj(g) w)) / |z|, 0 at z == 0
    z = ctx.inputs[0]
    w = ctx.output
    r = z.abs()
    nz = r == 0
    proj = (grad.conj() * w).real
    return (fiamma.where(nz, 0.0, (grad - w * proj) / fiamma.where(nz, 1.0, r)),)


@derivative("pow", "float_power", save="both", complex=True)
def _pow(ctx, grad):
    """PyTorch's complex pow: grad * conj(b a^(b-1)) (0 where b == 0) and
    grad * conj(a^b log a) (0 where a == 0 and Re(b) >= 0)."""
    a, b = ctx.inputs
    y = ctx.output
    ga = gb = None
    if _need(ctx, 0):
        if is_tensor(b):
            ga = fiamma.where(b == 0, 0.0, grad * (b * a.pow(b - 1)).conj())
        elif b == 0:
            ga = fiamma.zeros_like(grad)
        else:
            ga = grad * (a.pow(b - 1) * b).conj()
    if _need(ctx, 1):
        if is_tensor(a):
            br = b.real if is_tensor(b) and b.dtype.is_complex else b
            zero = (a == 0) & (br >= 0)
            safe = fiamma.where(zero, 1.0, a)
            gb = grad * fiamma.where(zero, 0.0, y * safe.log()).conj()
        else:
            import cmath

            if a == 0:
                br = b.real if b.dtype.is_complex else b
                gb = fiamma.where(br >= 0, 0.0, grad * (y * float("-inf")).conj())
            else:
                gb = grad * (y * cmath.log(a)).conj()
    return ga, gb


@derivative("acosh", save="inputs", complex=True)
def _acosh(ctx, grad):
    # sqrt((z-1)(z+1)) is not sqrt(z-1) sqrt(z+1) off the real line
    z = ctx.inputs[0]
    return (grad * ((z + 1).rsqrt() * (z - 1).rsqrt()).conj(),)
