"""Derivatives of ``fiamma.linalg`` (recorded as ``linalg_<name>``): inv, det, slogdet,
matrix_power, solve, solve_triangular, cholesky, eigh, eigvalsh, svdvals, cross,
matrix_norm (fro, nuc, +-1, +-2, +-inf), svd, qr, pinv, lstsq, cond and the LU functions (lu,
lu_factor, lu_factor_ex, lu_solve, lu_unpack; real and complex).

Written with fiamma.linalg's own ops (solve, eigh, svd, ...), so they differentiate again.
det's gradient goes through the inverse (det * inv(A)^T), or for exactly singular real
matrices (det 0) through the SVD's cofactors (finite; PyTorch gives 0 there); eigh's is
NaN/inf for repeated eigenvalues (as in PyTorch).
"""

import math

import fiamma
from fiamma.autograd._formulas import derivative
from fiamma.autograd._formulas._common import reduce_to
from fiamma.autograd_hook import ops


def _L():
    import fiamma.linalg as L

    return L


def _mT(t):
    return t.transpose(-2, -1)


def _eye_mask(n, device):
    ar = fiamma.arange(n, device=device)
    return ar.unsqueeze(1) == ar.unsqueeze(0)


def _tri_mask(n, upper, strict, device):
    ar = fiamma.arange(n, device=device)
    r, c = ar.unsqueeze(1), ar.unsqueeze(0)
    if upper:
        return c > r if strict else c >= r
    return c < r if strict else c <= r


def _diag_embed_last(v):
    """A batch of diagonal matrices from the last dim of ``v``."""
    n = v.shape[-1]
    return fiamma.where(_eye_mask(n, v.device), v.unsqueeze(-1), 0.0)


def _inv(a):
    inv_ex = getattr(_L(), "inv_ex", None)
    return inv_ex(a)[0] if inv_ex is not None else _L().inv(a)


@derivative(ops.linalg_inv, ops.linalg_inv_ex, save="output")
def _d_inv(ctx, grad):
    y = ctx.output
    if isinstance(y, tuple):
        y, grad = y[0], grad[0]
    yt = _mT(y)
    return (-fiamma.matmul(fiamma.matmul(yt, grad), yt),)


def _cofactor(a):
    """d det(a) / da for real square matrices, singular ones included: with a = U S Vh,
    det(U) det(Vh) U diag(prod_{j != i} s_j) Vh (det(a) a^-T where a is invertible)."""
    L = _L()
    u, s, vh = L.svd(a)
    ones = fiamma.ones_like(s[..., :1])
    left = fiamma.cat([ones, s[..., :-1]], -1).cumprod(-1)  # prod of s_j, j < i
    rs = s.flip(-1)
    right = fiamma.cat([ones, rs[..., :-1]], -1).cumprod(-1).flip(-1)  # prod of s_j, j > i
    sign = (L.det(u.detach()) * L.det(vh.detach())).unsqueeze(-1).unsqueeze(-1)
    return sign * fiamma.matmul(u * (left * right).unsqueeze(-2), vh)


@derivative(ops.linalg_det, save="both")
def _d_det(ctx, grad):
    a = ctx.inputs[0]
    d = ctx.output
    if not a.dtype.is_complex and a.shape[-1] and bool((d == 0).any()):
        # a singular matrix: no inverse, but the cofactors (the derivative) are finite;
        # PyTorch 2.13 gives 0 here for n > 1 (its 1x1 gradient is the cofactor, 1)
        return (grad.unsqueeze(-1).unsqueeze(-1) * _cofactor(a),)
    return ((grad * d).unsqueeze(-1).unsqueeze(-1) * _mT(_inv(a)),)


@derivative(ops.linalg_slogdet, save="inputs")
def _d_slogdet(ctx, grad):
    a = ctx.inputs[0]
    gl = grad[1]
    if gl is None:
        return (None,)
    return (gl.unsqueeze(-1).unsqueeze(-1) * _mT(_inv(a)),)


def _power_grad(a, g, n):
    """Gradient of a^n (n >= 1) w.r.t. a: sum_k (a^T)^k g (a^T)^(n-1-k)."""
    at = _mT(a)
    powers = [None] * n
    eye = fiamma.where(_eye_mask(a.shape[-1], a.device), 1.0, 0.0).to(a.dtype)
    powers[0] = eye
    for k in range(1, n):
        powers[k] = fiamma.matmul(powers[k - 1], at)
    total = None
    for k in range(n):
        term = fiamma.matmul(fiamma.matmul(powers[k], g), powers[n - 1 - k])
        total = term if total is None else total + term
    return total


@derivative(ops.linalg_matrix_power, save="inputs")
def _d_matrix_power(ctx, grad):
    a = ctx.inputs[0]
    n = ctx.kwargs["n"]
    if n == 0:
        return (fiamma.zeros_like(grad),)
    if n > 0:
        return (_power_grad(a, grad, n),)
    b = _inv(a)
    gb = _power_grad(b, grad, -n)
    bt = _mT(b)
    return (-fiamma.matmul(fiamma.matmul(bt, gb), bt),)


def _is_vec(a, b):
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))


@derivative(ops.linalg_solve, save="both")
def _d_solve(ctx, grad):
    a, b = ctx.inputs
    x = ctx.output
    left = ctx.kwargs.get("left", True)
    need = ctx.needs_input_grad
    gb = _L().solve(_mT(a), grad, left=left)
    ga = None
    if need[0]:
        if _is_vec(a, b):
            ga = -(gb.unsqueeze(-1) * x.unsqueeze(-2)) if left else \
                -(x.unsqueeze(-1) * gb.unsqueeze(-2))
        else:
            ga = -fiamma.matmul(gb, _mT(x)) if left else -fiamma.matmul(_mT(x), gb)
        ga = reduce_to(ga, a.shape)
    return ga, (reduce_to(gb, b.shape) if need[1] else None)


@derivative(ops.linalg_solve_triangular, save="both")
def _d_solve_triangular(ctx, grad):
    a, b = ctx.inputs
    x = ctx.output
    kw = ctx.kwargs
    upper = kw["upper"]
    left = kw.get("left", True)
    unit = kw.get("unitriangular", False)
    need = ctx.needs_input_grad
    gb = _L().solve_triangular(_mT(a), grad, upper=not upper, left=left, unitriangular=unit)
    ga = None
    if need[0]:
        ga = -fiamma.matmul(gb, _mT(x)) if left else -fiamma.matmul(_mT(x), gb)
        ga = fiamma.where(_tri_mask(a.shape[-1], upper, unit, ga.device), ga, 0.0)
        ga = reduce_to(ga, a.shape)
    return ga, (reduce_to(gb, b.shape) if need[1] else None)


@derivative(ops.linalg_cholesky, ops.linalg_cholesky_ex, save="output")
def _d_cholesky(ctx, grad):
    """A = L L^T: grad_A = sym(L^-T Phi(L^T grad_L) L^-1), Phi = lower triangle with the
    diagonal halved."""
    y = ctx.output
    if isinstance(y, tuple):
        y, grad = y[0], grad[0]
    upper = ctx.kwargs.get("upper", False)
    low = _mT(y) if upper else y
    gl = _mT(grad) if upper else grad
    n = low.shape[-1]
    p = fiamma.matmul(_mT(low), gl)
    p = fiamma.where(_tri_mask(n, False, True, p.device), p,
                     fiamma.where(_eye_mask(n, p.device), p * 0.5, 0.0))
    L = _L()
    s = L.solve_triangular(_mT(low), p, upper=True, left=True)
    s = L.solve_triangular(low, s, upper=False, left=False)
    return ((s + _mT(s)) * 0.5,)


@derivative(ops.linalg_eigh, save="output")
def _d_eigh(ctx, grad):
    """grad_A = V (diag(grad_w) + F o skew(V^H grad_V)) V^H, F_ij = 1 / (w_j - w_i): the
    Hermitian gradient (as PyTorch; A is read as Hermitian, only its Hermitian part matters)."""
    w, v = ctx.output
    gw, gv = grad
    inner = None
    vh = _adj(v)
    if gv is not None:
        diff = w.unsqueeze(-2) - w.unsqueeze(-1)  # [i, j] = w_j - w_i
        eye = _eye_mask(w.shape[-1], w.device)
        f = fiamma.where(eye, 0.0, 1.0 / fiamma.where(eye, 1.0, diff))
        m = fiamma.matmul(vh, gv)
        inner = f * ((m - _adj(m)) * 0.5)
    if gw is not None:
        d = _diag_embed_last(gw)
        inner = d if inner is None else inner + d
    if inner is None:
        return (None,)
    return (fiamma.matmul(fiamma.matmul(v, inner), vh),)


@derivative(ops.linalg_eigvalsh, save="inputs")
def _d_eigvalsh(ctx, grad):
    a = ctx.inputs[0]
    _, v = _L().eigh(a, UPLO=ctx.kwargs.get("UPLO", "L"))
    return (fiamma.matmul(v * grad.unsqueeze(-2), _mT(v).conj()),)


@derivative(ops.linalg_svdvals, save="inputs")
def _d_svdvals(ctx, grad):
    a = ctx.inputs[0]
    u, _, vh = _L().svd(a, full_matrices=False)
    return (fiamma.matmul(u * grad.unsqueeze(-2), vh),)


@derivative(ops.linalg_cross, save="inputs")
def _d_cross(ctx, grad):
    a, b = ctx.inputs
    dim = ctx.kwargs.get("dim", -1)
    need = ctx.needs_input_grad
    cross = _L().cross
    ga = reduce_to(cross(b.expand(grad.shape), grad, dim=dim), a.shape) if need[0] else None
    gb = reduce_to(cross(grad, a.expand(grad.shape), dim=dim), b.shape) if need[1] else None
    return ga, gb


def _mnorm_grad(am, gm, nm, ord_, gdt):
    """The gradient of matrix_norm(am, ord_) (over the last two dims; gm, nm keepdim-shaped)."""
    if ord_ == "fro":
        nz = nm == 0
        res = am * fiamma.where(nz, 0.0, gm / fiamma.where(nz, 1.0, nm))
    elif ord_ == "nuc":
        u, _, vh = _L().svd(am, full_matrices=False)
        res = gm * fiamma.matmul(u, vh)
    elif ord_ in (2, -2):
        u, _, vh = _L().svd(am, full_matrices=False)
        sl = slice(0, 1) if ord_ == 2 else slice(-1, None)  # largest / smallest value
        res = gm * fiamma.matmul(u[..., :, sl], vh[..., sl, :])
    elif ord_ in (1, -1, math.inf, -math.inf):
        # 1: max over columns of column abs sums; inf: max over rows of row abs sums
        ax = -2 if ord_ in (1, -1) else -1
        sums = am.abs().sum(ax, keepdim=True)
        # the extreme sum recomputed from the same values (the norm came from NumPy, whose
        # rounding of complex magnitudes may differ in the last bit)
        ext = sums.detach().amax((-2, -1), keepdim=True) if ord_ > 0 else \
            sums.detach().amin((-2, -1), keepdim=True)
        hit = sums == ext
        count = hit.sum((-2, -1), keepdim=True).to(gdt)
        sgn = am.sign() if am._dtype._kind != 3 else am.sgn()
        res = sgn * fiamma.where(hit, gm / count, 0.0)
    else:
        raise NotImplementedError(f"linalg.matrix_norm: no derivative for ord={ord_!r}")
    return res


@derivative(ops.linalg_matrix_norm, save="both")
def _d_matrix_norm(ctx, grad):
    a = ctx.inputs[0]
    kw = ctx.kwargs
    ord_ = kw.get("ord", "fro")
    d0, d1 = (d % a.ndim for d in kw.get("dim", (-2, -1)))
    n = ctx.output
    g = grad
    if not kw.get("keepdim", False):
        for d in sorted((d0, d1)):
            g = g.unsqueeze(d)
            n = n.unsqueeze(d)
    # work with the two dims last
    order = [i for i in range(a.ndim) if i not in (d0, d1)] + [d0, d1]
    inv = [order.index(i) for i in range(a.ndim)]
    am, gm, nm = (t.permute(order) for t in (a, g, n))
    res = _mnorm_grad(am, gm, nm, ord_, grad.dtype)
    return (res.permute(inv),)


@derivative(ops.linalg_svd, save="output")
def _d_svd(ctx, grad):
    """A = U diag(S) Vh (real): the standard formula with F_ij = 1 / (s_j^2 - s_i^2), plus the
    terms for the parts of U / V outside the k = min(m, n) singular directions. With
    full_matrices, the extra columns of U / rows of Vh are not unique and get no gradient (as
    PyTorch)."""
    return svd_backward(ctx, grad, _mT, _diag_embed_last)


def svd_backward(ctx, grad, adj, diag, complex_term=None):
    """linalg.svd's gradient for real (``adj`` the transpose) and complex (``adj`` the
    conjugate transpose) matrices: ``diag(v)`` is the diagonal matrix of v in U's dtype, and
    ``complex_term(U^H gU, 1 / S)`` the term of U's part that only complex SVDs have."""
    u, s, vh = ctx.output
    gu, gs, gvh = grad
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    if u.shape[-1] != k:
        u = u[..., :, :k]
        gu = None if gu is None else gu[..., :, :k]
    if vh.shape[-2] != k:
        vh = vh[..., :k, :]
        gvh = None if gvh is None else gvh[..., :k, :]
    v = adj(vh)
    inner = diag(gs) if gs is not None else None
    eye = _eye_mask(k, s.device)
    sinv = 1.0 / fiamma.where(s == 0, 1.0, s)
    out = None
    if gu is not None or gvh is not None:
        s2 = s * s
        diff = s2.unsqueeze(-2) - s2.unsqueeze(-1)  # [i, j] = s_j^2 - s_i^2
        f = fiamma.where(eye, 0.0, 1.0 / fiamma.where(eye, 1.0, diff))
        if gu is not None:
            uhgu = fiamma.matmul(adj(u), gu)
            part = (f * (uhgu - adj(uhgu))) * s.unsqueeze(-2)
            if complex_term is not None:
                part = part + complex_term(uhgu, sinv)
            inner = part if inner is None else inner + part
        if gvh is not None:
            gv = adj(gvh)
            vhgv = fiamma.matmul(adj(v), gv)
            part = s.unsqueeze(-1) * (f * (vhgv - adj(vhgv)))
            inner = part if inner is None else inner + part
    if inner is not None:
        out = fiamma.matmul(fiamma.matmul(u, inner), vh)
    if gu is not None and m > k:
        proj = gu - fiamma.matmul(u, fiamma.matmul(adj(u), gu))
        part = fiamma.matmul(proj * sinv.unsqueeze(-2), vh)
        out = part if out is None else out + part
    if gvh is not None and n > k:
        gv = adj(gvh)
        proj = gv - fiamma.matmul(v, fiamma.matmul(adj(v), gv))
        part = fiamma.matmul(u, sinv.unsqueeze(-1) * adj(proj))
        out = part if out is None else out + part
    return (out,)


@derivative(ops.linalg_qr, save="output")
def _d_qr(ctx, grad):
    """A = QR, tall/square (gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q and
    copyltu the symmetric matrix built from M's lower triangle) or wide (qr_backward)."""
    return qr_backward(ctx, grad, _mT, _diag_part)


def _diag_part(m):
    """``m``'s diagonal as a matrix (zeros elsewhere)."""
    return fiamma.where(_eye_mask(m.shape[-1], m.device), m, 0.0)


def qr_backward(ctx, grad, adj, diag_of):
    """linalg.qr's gradient for real (``adj`` the transpose) and complex (``adj`` the conjugate
    transpose) matrices. m >= n (reduced, or complete when square): gA = (gQ + Q copyltu(M))
    adj(R)^-1 with M = R adj(gR) - adj(gQ) Q and copyltu(M) = tril(M, -1) + adj(tril(M, -1)) +
    ``diag_of(M)`` (M's diagonal as a matrix; its real part for complex). m < n (reduced and
    complete are the same): with A = [X | Y], R = [U | V] (X = QU square, Y = QV), gY = Q gV
    and gX is the square case's for Q, U with gQ + Y adj(gV), as PyTorch's."""
    q, r = ctx.output
    gq, gr = grad
    mode = ctx.kwargs.get("mode", "reduced")
    m, n = ctx.input_shapes[0][-2:]
    if mode == "r":
        raise RuntimeError("linalg.qr: the derivative of linalg.qr depends on Q, which is not "
                           "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if "
                           "you are going to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError(f"linalg.qr: the QR decomposition is not differentiable when "
                           f"mode='complete' and nrows > ncols (got shape {m}x{n})")
    if m >= n:
        return (_qr_square_or_tall(q, r, gq, gr, adj, diag_of),)
    u, v = r[..., :m], r[..., m:]
    gu = gv = None
    if gr is not None:
        gu, gv = gr[..., :m], gr[..., m:]
    if gv is not None:
        y = fiamma.matmul(q, v)
        step = fiamma.matmul(y, adj(gv))
        gq = step if gq is None else gq + step
    gx = _qr_square_or_tall(q, u, gq, gu, adj, diag_of)
    gy = fiamma.matmul(q, gv) if gv is not None else fiamma.zeros_like(v)
    return (fiamma.cat([gx, gy], -1),)


def _qr_square_or_tall(q, r, gq, gr, adj, diag_of):
    k = r.shape[-2]
    mm = fiamma.zeros(tuple(r.shape[:-2]) + (k, k), dtype=r.dtype, device=r.device)
    if gr is not None:
        mm = mm + fiamma.matmul(r, adj(gr))
    if gq is not None:
        mm = mm - fiamma.matmul(adj(gq), q)
    low = fiamma.where(_tri_mask(k, False, True, mm.device), mm, 0.0)
    sym = low + adj(low) + diag_of(mm)
    b = fiamma.matmul(q, sym)
    if gq is not None:
        b = b + gq
    return _L().solve_triangular(adj(r), b, upper=False, left=False)


def _pinv_grad(a, p, gp, _mT=_mT):
    """Gradient w.r.t. A of P = pinv(A) (A of constant rank), for P's gradient gp (complex:
    called with the conjugate transpose as ``_mT``)."""
    m, n = a.shape[-2], a.shape[-1]
    pt, gt = _mT(p), _mT(gp)
    mm = fiamma.matmul
    if m <= n:
        k = mm(gt, p)
        kpt = mm(k, pt)
        return -_mT(mm(p, k)) + kpt - mm(mm(a, p), kpt) + mm(mm(pt, p), gt - mm(k, a))
    k = mm(p, gt)
    ptk = mm(pt, k)
    return -_mT(mm(k, p)) + mm(mm(gt - mm(a, k), p), pt) + ptk - mm(mm(ptk, p), a)


@derivative(ops.linalg_pinv, save="both")
def _d_pinv(ctx, grad):
    return (_pinv_grad(ctx.inputs[0], ctx.output, grad),)


@derivative(ops.linalg_lstsq, save="inputs")
def _d_lstsq(ctx, grad):
    """X = pinv(A) B (the least-squares / minimum-norm solution for A of full rank)."""
    a, b = ctx.inputs
    p = _L().pinv(a)
    vec = grad.ndim == b.ndim and b.ndim == a.ndim - 1
    g2 = grad.unsqueeze(-1) if vec else grad
    b2 = b.unsqueeze(-1) if vec else b
    need = ctx.needs_input_grad
    ga = reduce_to(_pinv_grad(a, p, fiamma.matmul(g2, _mT(b2))), a.shape) if need[0] else None
    gb = None
    if need[1]:
        gb = fiamma.matmul(_mT(p), g2)
        gb = reduce_to(gb.squeeze(-1) if vec else gb, b.shape)
    return ga, gb


@derivative(ops.linalg_cond, save="inputs")
def _d_cond(ctx, grad):
    """cond = s_max / s_min (p None or 2; -2: the reciprocal) through the SVD; for the other
    p, norm(A) norm(B), B = A^-1, with dB = -B dA B (so g_A = -B^H g_B B^H)."""
    a = ctx.inputs[0]
    p = ctx.kwargs.get("p")
    if p not in (None, 2, -2):
        b = _inv(a)
        g = grad.unsqueeze(-1).unsqueeze(-1)
        na = _L().matrix_norm(a, p, keepdim=True)
        nb = _L().matrix_norm(b, p, keepdim=True)
        ga = _mnorm_grad(a, g * nb, na, p, grad.dtype)
        gb = _mnorm_grad(b, g * na, nb, p, grad.dtype)
        bh = _adj(b)
        return (ga - fiamma.matmul(fiamma.matmul(bh, gb), bh),)
    u, s, vh = _L().svd(a, full_matrices=False)
    hi, lo = s[..., :1], s[..., -1:]
    if p == -2:
        hi, lo = lo, hi
    # d(hi / lo) = d hi / lo - hi d lo / lo^2, d s_i = u_i^T dA v_i
    i_hi, i_lo = (slice(0, 1), slice(-1, None)) if p != -2 else (slice(-1, None), slice(0, 1))
    outer_hi = fiamma.matmul(u[..., :, i_hi], vh[..., i_hi, :])
    outer_lo = fiamma.matmul(u[..., :, i_lo], vh[..., i_lo, :])
    g = grad.unsqueeze(-1).unsqueeze(-1)
    lo2 = lo.unsqueeze(-1)
    hi2 = hi.unsqueeze(-1)
    return (g * (outer_hi / lo2 - outer_lo * hi2 / (lo2 * lo2)),)


# ---- LU -------------------------------------------------------------------------------------
# One formula for real and complex matrices (``_adj``: the transpose, conjugated when complex);
# registered for complex results too, where it gets the saved tensors unconjugated.

def _adj(t):
    return _mT(t).conj() if t.dtype.is_complex else _mT(t)


def _tril_strict(t):
    return fiamma.tril(t, -1)


def _lu_grad(p, low, up, gl, gu, op):
    """Gradient w.r.t. A of A = P L U (L (m, k) unit lower, U (k, n) upper, k = min(m, n)) for
    the gradients ``gl`` / ``gu`` of L and U (None: zero). With A = P [L1; L2] [U1 U2] (L1, U1
    the k x k blocks) and phi = tril(L1^H gL1 - gU2 U2^H, -1) + triu(gU1 U1^H - L2^H gL2):
    square gA = P L^-H phi U^-H; wide (m < n) gA = P L^-H [phi U1^-H | gU2]; tall (m > n)
    gA = P [L1^-H phi; gL2] U^-H. A zero on U's diagonal (rank-deficient A) raises: the
    derivative is not defined there (PyTorch returns NaN)."""
    try:
        return _lu_grad_solves(p, low, up, gl, gu)
    except _L().LinAlgError:
        raise _L().LinAlgError(
            f"{op}: the derivative of the LU factorisation is not defined when U has a zero on "
            "its diagonal (A, or its leading min(m, n) columns, is rank-deficient)") from None


def _lu_grad_solves(p, low, up, gl, gu):
    if gl is None and gu is None:
        return None
    m, k = low.shape[-2], low.shape[-1]
    n = up.shape[-1]
    mm = fiamma.matmul
    L = _L()
    gl = fiamma.zeros_like(low) if gl is None else gl
    gu = fiamma.zeros_like(up) if gu is None else gu
    l1, u1 = low[..., :k, :], up[..., :, :k]
    gl1, gu1 = gl[..., :k, :], gu[..., :, :k]
    lower = mm(_adj(l1), gl1)
    upper = mm(gu1, _adj(u1))
    if n > k:
        lower = lower - mm(gu[..., :, k:], _adj(up[..., :, k:]))
    if m > k:
        upper = upper - mm(_adj(low[..., k:, :]), gl[..., k:, :])
    phi = _tril_strict(lower) + fiamma.triu(upper)
    if m > k:
        top = L.solve_triangular(_adj(l1), phi, upper=True, unitriangular=True)
        z = fiamma.cat([top, gl[..., k:, :]], -2)
        g = L.solve_triangular(_adj(u1), z, upper=False, left=False)
    else:
        z = L.solve_triangular(_adj(u1), phi, upper=False, left=False)
        if n > k:
            z = fiamma.cat([z, gu[..., :, k:]], -1)
        g = L.solve_triangular(_adj(l1), z, upper=True, unitriangular=True)
    return mm(p, g)


def _split_packed(g, m, n):
    """The gradients of L and U from that of the packed LU (m, n): L's strictly lower part of
    the first k columns, U's upper triangle of the first k rows."""
    k = min(m, n)
    return _tril_strict(g[..., :, :k]), fiamma.triu(g[..., :k, :])


def _packed_from(gl, gu, m, n):
    """The gradient of the packed LU (m, n) from those of L (m, k) and U (k, n)."""
    k = min(m, n)
    res = None
    if gl is not None:
        res = _tril_strict(gl)
        if n > k:
            res = fiamma.cat([res, fiamma.zeros(tuple(res.shape[:-1]) + (n - k,),
                                                 dtype=res.dtype, device=res.device)], -1)
    if gu is not None:
        part = fiamma.triu(gu)
        if m > k:
            part = fiamma.cat([part, fiamma.zeros(tuple(part.shape[:-2]) + (m - k, n),
                                                  dtype=part.dtype, device=part.device)], -2)
        res = part if res is None else res + part
    return res


@derivative(ops.linalg_lu, save="output")
def _d_lu(ctx, grad):
    p, low, up = ctx.output
    return (_lu_grad(p, low, up, grad[1], grad[2], "linalg.lu"),)


@derivative(ops.linalg_lu_factor, ops.linalg_lu_factor_ex, save="output")
def _d_lu_factor(ctx, grad):
    lu, piv = ctx.output[0], ctx.output[1]
    g = grad[0]
    if g is None:
        return (None,)
    m, n = lu.shape[-2:]
    p, low, up = fiamma.lu_unpack(lu, piv)
    gl, gu = _split_packed(g, m, n)
    return (_lu_grad(p, low, up, gl, gu, "linalg." + ctx.op[len("linalg_"):]),)


@derivative(ops.lu_unpack, save="none")
def _d_lu_unpack(ctx, grad):
    m, n = ctx.input_shapes[0][-2:]
    return _packed_from(grad[1], grad[2], m, n), None


@derivative(ops.linalg_lu_solve, save="both")
def _d_lu_solve(ctx, grad):
    """X = A^-1 B (``left``; B A^-1 otherwise; A^-H with ``adjoint``), A = P L U from the packed
    LU: gB solves with the other adjoint flag, gA = -gB X^H (left), -X gB^H (left, adjoint),
    -X^H gB (right), -gB^H X (right, adjoint), and the packed gradient is
    tril(P^T gA U^H, -1) + triu(L^H P^T gA)."""
    lu, piv, b = ctx.inputs
    x = ctx.output
    left = ctx.kwargs.get("left", True)
    adjoint = ctx.kwargs.get("adjoint", False)
    need = ctx.needs_input_grad
    gb = _L().lu_solve(lu, piv, grad, left=left, adjoint=not adjoint)
    glu = None
    if need[0]:
        mm = fiamma.matmul
        if left:
            ga = -mm(x, _adj(gb)) if adjoint else -mm(gb, _adj(x))
        else:
            ga = -mm(_adj(gb), x) if adjoint else -mm(_adj(x), gb)
        p, low, up = fiamma.lu_unpack(lu, piv)
        pga = mm(_mT(p), ga)
        glu = _tril_strict(mm(pga, _adj(up))) + fiamma.triu(mm(_adj(low), pga))
        glu = reduce_to(glu, lu.shape)
    return glu, None, (reduce_to(gb, b.shape) if need[2] else None)


derivative(ops.linalg_lu, save="output", complex=True)(_d_lu)
derivative(ops.linalg_lu_factor, ops.linalg_lu_factor_ex, save="output", complex=True)(
    _d_lu_factor)
derivative(ops.lu_unpack, save="none", complex=True)(_d_lu_unpack)
derivative(ops.linalg_lu_solve, save="both", complex=True)(_d_lu_solve)
