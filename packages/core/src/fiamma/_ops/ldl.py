"""torch.linalg.ldl_factor / ldl_factor_ex / ldl_solve: the Bunch-Kaufman LDL^T (or LDL^H)
factorisation with LAPACK's sytrf / hetrf storage (lower triangle): ``LD`` holds L's entries
below the diagonal and D's 1x1 and 2x2 blocks; ``pivots`` (int32, 1-based) are positive for a
1x1 block with its interchange, and -p (twice) for a 2x2 block interchanged with row p. The
unblocked algorithm (LAPACK's sytf2 / hetf2, pivot threshold (1 + sqrt(17)) / 8) in NumPy per
matrix; LAPACK's blocked code takes the same pivots, so results equal PyTorch's up to rounding.
No gradients (PyTorch has none).

>>> import fiamma
>>> A = fiamma.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=fiamma.float64)
>>> LD, piv = fiamma.linalg.ldl_factor(A)
>>> piv.tolist()
[-2, -2]
>>> fiamma.linalg.ldl_solve(LD, piv, fiamma.tensor([[1.0], [2.0]], dtype=fiamma.float64)).tolist()
[[2.0], [1.0]]
"""

import collections
import importlib
import math

import numpy as np

from fiamma import _dtype as D
from fiamma._tensor import Tensor

__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

_ALPHA = (1 + math.sqrt(17.0)) / 8
_LDL = collections.namedtuple("linalg_ldl_factor", ["LD", "pivots"])
_LDLEX = collections.namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])


def _F():
    return importlib.import_module("fiamma")


def _cabs1(z):
    return np.abs(z.real) + np.abs(z.imag) if np.iscomplexobj(z) else np.abs(z)


def _factor_one(a, herm):
    """sytf2 / hetf2 (lower) on a copy of the n x n array a: (LD, ipiv (1-based), info)."""
    a = a.copy()
    n = a.shape[0]
    cplx = np.iscomplexobj(a)
    herm = herm and cplx
    cj = np.conj if herm else (lambda v: v)
    ipiv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(a[k, k].real) if herm else float(_cabs1(a[k, k]))
        if k < n - 1:
            col = _cabs1(a[k + 1:, k])
            imax = k + 1 + int(np.argmax(col))
            colmax = float(col.max())
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or math.isnan(absakk):
            if info == 0:
                info = k + 1
            kp = k
            if herm:
                a[k, k] = a[k, k].real
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                row = _cabs1(a[imax, k:imax])
                rowmax = float(row.max()) if row.size else 0.0
                if imax < n - 1:
                    rowmax = max(rowmax, float(_cabs1(a[imax + 1:, imax]).max()))
                diag = abs(a[imax, imax].real) if herm else float(_cabs1(a[imax, imax]))
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif diag >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp = imax
                    kstep = 2
            kk = k + kstep - 1
            if kp != kk:
                if kp < n - 1:
                    t = a[kp + 1:, kk].copy()
                    a[kp + 1:, kk] = a[kp + 1:, kp]
                    a[kp + 1:, kp] = t
                t = cj(a[kk + 1:kp, kk].copy())
                a[kk + 1:kp, kk] = cj(a[kp, kk + 1:kp])
                a[kp, kk + 1:kp] = t
                if herm:
                    a[kp, kk] = np.conj(a[kp, kk])
                t = a[kk, kk]
                a[kk, kk] = a[kp, kp]
                a[kp, kp] = t
                if kstep == 2:
                    t = a[k + 1, k]
                    a[k + 1, k] = a[kp, k]
                    a[kp, k] = t
            if herm:
                a[k, k] = a[k, k].real
                if kstep == 2:
                    a[k + 1, k + 1] = a[k + 1, k + 1].real
            if kstep == 1:
                if k < n - 1:
                    d11 = 1 / (a[k, k].real if herm else a[k, k])
                    x = a[k + 1:, k].copy()
                    upd = np.outer(x, -d11 * cj(x))
                    a[k + 1:, k + 1:] += np.tril(upd)
                    a[k + 1:, k] = x * d11
                    if herm:
                        idx = np.arange(k + 1, n)
                        a[idx, idx] = a[idx, idx].real
            else:
                if k < n - 2:
                    if herm:
                        dd = abs(a[k + 1, k])
                        d11 = a[k + 1, k + 1].real / dd
                        d22 = a[k, k].real / dd
                        tt = 1 / (d11 * d22 - 1)
                        d21 = a[k + 1, k] / dd
                        dd = tt / dd
                        wk = dd * (d11 * a[k + 2:, k] - d21 * a[k + 2:, k + 1])
                        wkp1 = dd * (d22 * a[k + 2:, k + 1] - np.conj(d21) * a[k + 2:, k])
                        upd = -(np.outer(a[k + 2:, k], np.conj(wk))
                                + np.outer(a[k + 2:, k + 1], np.conj(wkp1)))
                    else:
                        d21 = a[k + 1, k]
                        d11 = a[k + 1, k + 1] / d21
                        d22 = a[k, k] / d21
                        tt = 1 / (d11 * d22 - 1)
                        d21 = tt / d21
                        wk = d21 * (d11 * a[k + 2:, k] - a[k + 2:, k + 1])
                        wkp1 = d21 * (d22 * a[k + 2:, k + 1] - a[k + 2:, k])
                        upd = -(np.outer(a[k + 2:, k], wk) + np.outer(a[k + 2:, k + 1], wkp1))
                    a[k + 2:, k + 2:] += np.tril(upd)
                    a[k + 2:, k] = wk
                    a[k + 2:, k + 1] = wkp1
                    if herm:
                        idx = np.arange(k + 2, n)
                        a[idx, idx] = a[idx, idx].real
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return np.tril(a), ipiv, info


def _unpack(ld, ipiv, herm):
    """(perm, L, D) with A[perm][:, perm] = L D L^* (L unit lower, D block diagonal)."""
    n = ld.shape[0]
    herm = herm and np.iscomplexobj(ld)
    cj = np.conj if herm else (lambda v: v)
    L = np.eye(n, dtype=ld.dtype)
    Dm = np.zeros_like(ld)
    perm = np.arange(n)
    k = 0
    while k < n:
        if ipiv[k] > 0:
            kp = ipiv[k] - 1
            kk, step = k, 1
        else:
            kp = -ipiv[k] - 1
            kk, step = k + 1, 2
        if kp != kk:
            L[[kk, kp], :k] = L[[kp, kk], :k]
            perm[[kk, kp]] = perm[[kp, kk]]
        if step == 1:
            Dm[k, k] = ld[k, k]
            L[k + 1:, k] = ld[k + 1:, k]
        else:
            Dm[k, k], Dm[k + 1, k + 1] = ld[k, k], ld[k + 1, k + 1]
            Dm[k + 1, k] = ld[k + 1, k]
            Dm[k, k + 1] = cj(ld[k + 1, k])
            L[k + 2:, k] = ld[k + 2:, k]
            L[k + 2:, k + 1] = ld[k + 2:, k + 1]
        k += step
    return perm, L, Dm


def _check_square(A, op):
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    dt = A._dtype
    if dt._kind < 2 or dt in (D.float16, D.bfloat16):
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. "
                           f"Got {dt}")


def _np(t):
    t = t.detach()
    if t.device.type == "meta":  # shape-only: an identity stand-in (results go back to meta)
        return importlib.import_module("fiamma.linalg")._meta_stand_in(t)
    return (t.cpu() if t.device.type != "cpu" else t).numpy()


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """``(LD, pivots, info)``: info (int32 per matrix) is 0, or k when D's k-th diagonal entry
    is exactly zero (the factorisation is complete but D is singular)."""
    op = "linalg.ldl_factor_ex"
    _check_square(A, op)
    a = _np(A)
    batch = a.shape[:-2]
    n = a.shape[-1]
    flat = a.reshape((-1, n, n)) if a.size else np.zeros((math.prod(batch), n, n), a.dtype)
    lds = np.zeros_like(flat)
    pivs = np.zeros(flat.shape[:2], dtype=np.int32)
    infos = np.zeros(flat.shape[0], dtype=np.int32)
    for i in range(flat.shape[0]):
        lds[i], pivs[i], infos[i] = _factor_one(flat[i], hermitian)
    if check_errors and infos.any():
        i = int(np.nonzero(infos)[0][0])
        where = f"(Batch element {i}): " if batch else ""
        raise _F().linalg.LinAlgError(
            f"{op}: {where}The factorization could not be completed because the input is "
            f"not invertible (D[{infos[i]}, {infos[i]}] is zero).")
    F = _F()
    LD = F.tensor(lds.reshape(a.shape), dtype=A._dtype).to(A.device)
    piv = F.tensor(pivs.reshape(batch + (n,)), dtype=D.int32).to(A.device)
    info = F.tensor(infos.reshape(batch), dtype=D.int32).to(A.device)
    if out is not None:
        for o, r in zip(out, (LD, piv, info)):
            o.resize_(r.shape)
            o.copy_(r)
        return _LDLEX(*out)
    return _LDLEX(LD, piv, info)


def ldl_factor(A, *, hermitian=False, out=None):
    """``(LD, pivots)`` of the Bunch-Kaufman factorisation of symmetric (``hermitian``:
    Hermitian) matrices; only the lower triangle of A is read. Raises LinAlgError where D is
    singular."""
    LD, piv, _ = ldl_factor_ex(A, hermitian=hermitian, check_errors=True)
    if out is not None:
        for o, r in zip(out, (LD, piv)):
            o.resize_(r.shape)
            o.copy_(r)
        return _LDL(*out)
    return _LDL(LD, piv)


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """The solution X of A X = B from ``ldl_factor(A)``'s ``(LD, pivots)`` (batched,
    broadcast over batch dimensions)."""
    op = "linalg.ldl_solve"
    _check_square(LD, op)
    if not isinstance(B, Tensor) or B.dim() < 2:
        raise RuntimeError(f"{op}: B should have at least 2 dimensions")
    if not isinstance(pivots, Tensor) or pivots._dtype is not D.int32:
        raise RuntimeError(f"{op}: Expected pivots to be integers (int32). Got "
                           f"{getattr(pivots, 'dtype', type(pivots).__name__)}")
    if LD._dtype is not B._dtype:
        raise RuntimeError(f"{op}: Expected LD and B to have the same dtype, but found LD of "
                           f"type {LD._dtype} and B of type {B._dtype} instead")
    n = LD.shape[-1]
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{op}: Expected LD.shape[:-1] and pivots.shape to be the same, but "
                           f"got pivots with shape {list(pivots.shape)} instead")
    if B.shape[-2] != n:
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation AX = B "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    ld, pv, b = _np(LD), _np(pivots), _np(B)
    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    ld = np.broadcast_to(ld, batch + ld.shape[-2:]).reshape((-1, n, n))
    pv = np.broadcast_to(pv, batch + (n,)).reshape((-1, n))
    bb = np.broadcast_to(b, batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    herm = hermitian and np.iscomplexobj(ld)
    x = np.empty(bb.shape, dtype=np.result_type(ld, bb))
    for i in range(ld.shape[0]):
        if np.any(pv[i] == 0) or np.any(np.abs(pv[i]) > n):
            raise RuntimeError(f"{op}: pivots must be in [-{n}, -1] or [1, {n}]")
        perm, L, Dm = _unpack(ld[i], pv[i], herm)
        y = bb[i][perm]
        y = _solve_tri(L, y, lower=True)
        y = np.linalg.solve(Dm, y)
        y = _solve_tri(np.conj(L.T) if herm else L.T, y, lower=False)
        xi = np.empty_like(y)
        xi[perm] = y
        x[i] = xi
    res = _F().tensor(x.reshape(batch + b.shape[-2:]), dtype=B._dtype).to(B.device)
    if out is not None:
        out.resize_(res.shape)
        out.copy_(res)
        return out
    return res


def _solve_tri(T, y, lower):
    n = T.shape[0]
    y = y.astype(np.result_type(T, y), copy=True)
    rng = range(n) if lower else range(n - 1, -1, -1)
    for j in rng:
        y[j] = y[j] / T[j, j]
        if lower:
            y[j + 1:] -= np.outer(T[j + 1:, j], y[j])
        else:
            y[:j] -= np.outer(T[:j, j], y[j])
    return y
