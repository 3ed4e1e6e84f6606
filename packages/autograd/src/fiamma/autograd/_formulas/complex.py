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
from fiamma.autograd._formulas.linalg import qr_backward, svd_backward
from fiamma.autograd_hook import ops


def _need(ctx, i):
    return ctx._needs(i)  # ctx.needs_input_grad[i], without building the tuple


def _cplx(ctx, i):
    dt = ctx.input_dtypes[i]
    return dt is not None and dt.is_complex


# ---- real results from complex inputs ----------------------------------------------------------

@derivative(ops.real, save="none")
def _real(ctx, grad):
    # d Re(z): the gradient is real; the engine widens it to the input's complex dtype
    return (grad,)


@derivative(ops.imag, save="none")
def _imag(ctx, grad):
    return (grad * 1j,)


@derivative(ops.view_as_real, save="none")
def _view_as_real(ctx, grad):
    return (fiamma.complex(grad.select(-1, 0), grad.select(-1, 1)),)


@derivative(ops.angle, save="inputs")
def _angle(ctx, grad):
    z = ctx.inputs[0]
    if not z.dtype.is_complex:  # 0 or pi: piecewise constant, a zero gradient (NaN too)
        return (fiamma.zeros_like(z),)
    # d atan2(y, x) = (-y dx + x dy) / |z|^2: the gradient i z / |z|^2 (0 at 0)
    a2 = z.real * z.real + z.imag * z.imag
    nz = a2 == 0
    scale = fiamma.where(nz, 0.0, grad / fiamma.where(nz, 1.0, a2))
    return (z * scale * 1j,)


# ---- complex results -------------------------------------------------------------------------

@derivative(ops.view_as_complex, save="none", complex=True)
def _view_as_complex(ctx, grad):
    return (fiamma.view_as_real(grad),)


@derivative(ops.complex, save="none", complex=True)
def _complex(ctx, grad):
    return (grad.real if _need(ctx, 0) else None), (grad.imag if _need(ctx, 1) else None)


@derivative(ops.conj, save="none", complex=True)
def _conj(ctx, grad):
    return (grad.conj(),)


@derivative(ops.sgn, save="both", complex=True)
def _sgn(ctx, grad):
    # w = z/|z|: grad_z = (g - w Re(conj(g) w)) / |z|, 0 at z == 0
    z = ctx.inputs[0]
    w = ctx.output
    r = z.abs()
    nz = r == 0
    proj = (grad.conj() * w).real
    return (fiamma.where(nz, 0.0, (grad - w * proj) / fiamma.where(nz, 1.0, r)),)


@derivative(ops.pow, ops.float_power, save="both", complex=True)
def _pow(ctx, grad):
    """PyTorch's complex pow: grad * conj(b a^(b-1)) (0 where b == 0) and
    grad * conj(a^b log a) (0 where a == 0 and Re(b) >= 0)."""
    a, b = ctx.inputs
    y = ctx.output
    # in the result's dtype, as the forward: a negative real base has a complex log
    a = a.to(y.dtype) if is_tensor(a) and a.dtype is not y.dtype else a
    b = b.to(y.dtype) if is_tensor(b) and b.dtype is not y.dtype else b
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


@derivative(ops.acosh, save="inputs", complex=True)
def _acosh(ctx, grad):
    # sqrt((z-1)(z+1)) is not sqrt(z-1) sqrt(z+1) off the real line
    z = ctx.inputs[0]
    return (grad * ((z + 1).rsqrt() * (z - 1).rsqrt()).conj(),)


# ---- linalg on complex matrices ------------------------------------------------------------------

def _mH(t):
    return t.transpose(-2, -1).conj()


def _eye(n, device):
    ar = fiamma.arange(n, device=device)
    return ar.unsqueeze(1) == ar.unsqueeze(0)


def _diag(v):
    n = v.shape[-1]
    return fiamma.where(_eye(n, v.device), v.unsqueeze(-1), 0.0)


@derivative(ops.linalg_svd, save="output", complex=True)
def _svd(ctx, grad):
    """A = U diag(S) Vh, complex: the real formula with conjugate transposes, plus the term
    i Im(diag(U^H gU)) / S that only complex SVDs have. As in PyTorch the loss must not depend
    on the phases of the singular vectors (they are not unique)."""
    return svd_backward(
        ctx, grad, _mH, lambda gs: _diag(gs).to(ctx.output[0].dtype),
        lambda uhgu, sinv: _diag(uhgu.diagonal(0, -2, -1).imag * sinv * 1j))


@derivative(ops.linalg_qr, save="output", complex=True)
def _qr(ctx, grad):
    """A = QR (m >= n, reduced or square), complex: gA = (gQ + Q copyltu(M)) R^-H with
    M = R gR^H - gQ^H Q and copyltu(M) = tril(M, -1) + tril(M, -1)^H + Re(diag(M))."""
    return qr_backward(ctx, grad, _mH,
                       lambda mm: _diag(mm.diagonal(0, -2, -1).real).to(mm.dtype))


def _inv(a):
    import fiamma.linalg as L

    return L.inv_ex(a)[0]


@derivative(ops.linalg_cholesky, ops.linalg_cholesky_ex, save="output", complex=True)
def _cholesky(ctx, grad):
    """A = L L^H: gA = Herm(L^-H Phi(L^H gL) L^-1), Phi = the lower triangle with the
    diagonal halved, Herm(X) = (X + X^H) / 2."""
    import fiamma.linalg as L

    y = ctx.output
    if isinstance(y, tuple):
        y, grad = y[0], grad[0]
    upper = ctx.kwargs.get("upper", False)
    low = _mH(y) if upper else y
    gl = _mH(grad) if upper else grad
    n = low.shape[-1]
    p = fiamma.matmul(_mH(low), gl)
    ar = fiamma.arange(n, device=p.device)
    p = fiamma.where(ar.unsqueeze(1) > ar.unsqueeze(0), p,
                     fiamma.where(_eye(n, p.device), p * 0.5, 0.0))
    s = L.solve_triangular(_mH(low), p, upper=True, left=True)
    s = L.solve_triangular(low, s, upper=False, left=False)
    return ((s + _mH(s)) * 0.5,)


@derivative(ops.linalg_eigh, save="output", complex=True)
def _eigh(ctx, grad):
    """A = V diag(w) V^H (w real): gA = V (diag(gw) + F o skew(V^H gV)) V^H, F_ij = 1/(w_j -
    w_i) off the diagonal, skew(M) = (M - M^H) / 2: the Hermitian gradient, as PyTorch. The
    loss must not depend on the eigenvectors' phases."""
    w, v = ctx.output
    gw, gv = grad
    inner = None
    if gv is not None:
        diff = w.unsqueeze(-2) - w.unsqueeze(-1)
        eye = _eye(w.shape[-1], w.device)
        f = fiamma.where(eye, 0.0, 1.0 / fiamma.where(eye, 1.0, diff))
        m = fiamma.matmul(_mH(v), gv)
        inner = f * ((m - _mH(m)) * 0.5)
    if gw is not None:
        d = _diag(gw).to(v.dtype)
        inner = d if inner is None else inner + d
    if inner is None:
        return (None,)
    return (fiamma.matmul(fiamma.matmul(v, inner), _mH(v)),)


@derivative(ops.linalg_slogdet, save="both", complex=True)
def _slogdet(ctx, grad):
    """sign = det/|det|, logabsdet = log|det|: gA = (g_logabsdet - i Im(conj(g_sign) sign))
    A^-H."""
    a = ctx.inputs[0]
    sign = ctx.output[0]
    gs, gl = grad
    if gs is None and gl is None:
        return (None,)
    c = fiamma.zeros_like(sign) if gl is None else gl.to(sign.dtype)
    if gs is not None:
        c = c - (gs.conj() * sign).imag * 1j
    return (c.unsqueeze(-1).unsqueeze(-1) * _mH(_inv(a)),)


@derivative(ops.linalg_pinv, save="both", complex=True)
def _pinv(ctx, grad):
    from fiamma.autograd._formulas.linalg import _pinv_grad

    return (_pinv_grad(ctx.inputs[0], ctx.output, grad, _mT=_mH),)


@derivative(ops.linalg_lstsq, save="inputs", complex=True)
def _lstsq(ctx, grad):
    """X = pinv(A) B (A of full rank)."""
    import fiamma.linalg as L
    from fiamma.autograd._formulas._common import reduce_to
    from fiamma.autograd._formulas.linalg import _pinv_grad

    a, b = ctx.inputs
    p = L.pinv(a)
    vec = grad.ndim == b.ndim and b.ndim == a.ndim - 1
    g2 = grad.unsqueeze(-1) if vec else grad
    b2 = b.unsqueeze(-1) if vec else b
    ga = gb = None
    if _need(ctx, 0):
        ga = reduce_to(_pinv_grad(a, p, fiamma.matmul(g2, _mH(b2)), _mT=_mH), a.shape)
    if _need(ctx, 1):
        gb = fiamma.matmul(_mH(p), g2)
        gb = reduce_to(gb.squeeze(-1) if vec else gb, b.shape)
    return ga, gb


def _eig_grad(w, v, gw, gv):
    """A = V diag(w) V^-1 (eigenvectors of unit norm): gA = V^-H (diag(gw) + (V^H gV -
    V^H V Re(diag(V^H gV))) / conj(E)) V^H, E_ij = w_j - w_i off the diagonal."""
    import fiamma.linalg as L

    n = w.shape[-1]
    eye = _eye(n, w.device)
    inner = None
    if gv is not None:
        vhgv = fiamma.matmul(_mH(v), gv)
        re_diag = vhgv.diagonal(0, -2, -1).real.to(v.dtype)
        inner = vhgv - fiamma.matmul(_mH(v), v * re_diag.unsqueeze(-2))
        e = (w.unsqueeze(-2) - w.unsqueeze(-1)).conj()
        inner = fiamma.where(eye, 0.0, inner / fiamma.where(eye, 1.0, e))
    if gw is not None:
        d = _diag(gw)
        inner = d if inner is None else inner + d
    if inner is None:
        return None
    return L.solve(_mH(v), fiamma.matmul(inner, _mH(v)))


@derivative(ops.linalg_eig, save="output", complex=True)
def _eig(ctx, grad):
    w, v = ctx.output
    gw, gv = grad
    return (_eig_grad(w, v, gw, gv),)


@derivative(ops.linalg_eigvals, save="inputs", complex=True)
def _eigvals(ctx, grad):
    import fiamma.linalg as L

    w, v = L.eig(ctx.inputs[0])
    return (_eig_grad(w, v, grad, None),)
