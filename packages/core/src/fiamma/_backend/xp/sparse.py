"""Array-module primitives of the sparse family: products with a CSR matrix (contract.Backend
documents each). The structure is checked before anything is written, as the C kernels do
(on a GPU the check reads the index tensors back: one wait per product)."""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C

__all__ = ["SparseMixin"]


class SparseMixin:
    def _csr_rows(self, m, k, crow, col, bad):
        """(row of each stored entry, plain indices) as arrays, or None after filling ``bad``
        (0: the offsets, 1: the plain indices; and the position) when the structure is not
        an m x k CSR matrix."""
        xp = self.xp
        nnz = col._shape[0]
        cr = self.raw(crow).astype(np.int64, copy=False)
        cl = self.raw(col).astype(np.int64, copy=False)
        cr_h = cr.get() if hasattr(cr, "get") else cr
        wrong = None
        if cr_h.shape[0] != m + 1 or (m + 1 and cr_h[0] != 0):
            wrong = (0, 0)
        else:  # the first offset that decreases or passes nnz, then the last one's value
            step = np.flatnonzero((np.diff(cr_h) < 0) | (cr_h[1:] > nnz))
            if step.size:
                wrong = (0, int(step[0]) + 1)
            elif cr_h[-1] != nnz:
                wrong = (0, m)
        if wrong is None and nnz:
            cl_h = cl.get() if hasattr(cl, "get") else cl
            out = np.flatnonzero((cl_h < 0) | (cl_h >= k))
            if out.size:
                wrong = (1, int(out[0]))
        if wrong is not None:
            if bad is not None:
                bad[:] = list(wrong)
            return None
        rows = xp.repeat(xp.arange(m, dtype=np.int64), xp.diff(cr))
        return rows, cl

    def _scatter_add(self, res, idx, vals):
        """res[idx[i]] += vals[i], repeated indices accumulating (NumPy's add.at; CuPy's
        cupyx.scatter_add)."""
        if self.is_numpy:
            np.add.at(res, idx, vals)
        else:
            import cupyx

            cupyx.scatter_add(res, idx, vals)

    def csr_mm(self, m, k, n, crow, col, vals, d, out, trans, bad):
        if vals._dtype not in (D.float32, D.float64):
            return C.ERR_DTYPE
        found = self._csr_rows(m, k, crow, col, bad)
        if found is None:
            return C.ERR_INDEX
        rows, cl = found
        xp = self.xp
        v = self.raw(vals)
        if trans:  # out (k x n) = S^T @ d, d m x n
            dv = self.raw(d, (m, n), (n, 1))
            res = xp.zeros((k, n), dtype=v.dtype)
            self._scatter_add(res, cl, v[:, None] * dv[rows])
            self.put(out, res, (k, n), (n, 1))
        else:  # out (m x n) = S @ d, d k x n
            dv = self.raw(d, (k, n), (n, 1))
            res = xp.zeros((m, n), dtype=v.dtype)
            self._scatter_add(res, rows, v[:, None] * dv[cl])
            self.put(out, res, (m, n), (n, 1))
        return 0

    def csr_sddmm(self, m, k, n, crow, col, a, b, out, bad):
        if a._dtype not in (D.float32, D.float64):
            return C.ERR_DTYPE
        found = self._csr_rows(m, k, crow, col, bad)
        if found is None:
            return C.ERR_INDEX
        rows, cl = found
        av = self.raw(a, (m, n), (n, 1))
        bv = self.raw(b, (k, n), (n, 1))
        self.put(out, (av[rows] * bv[cl]).sum(axis=1), (col._shape[0],), (1,))
        return 0
