"""Array-module primitives of the matmul family (contract.Backend documents each)."""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C

__all__ = ["ProductsMixin"]


class ProductsMixin:
    def _gemm(self, a, b, dt):
        """a @ b (broadcast batches) in fiamma dtype dt: floats in their compute dtype (16-bit
        ones accumulate in float32), integers wrapping, bool as OR of ANDs."""
        xp = self.xp
        if dt is D.bool:
            return xp.matmul(a.astype(np.int64), b.astype(np.int64)) != 0
        return xp.matmul(a, b)

    def _store_mm(self, c, r, shape, strides, alpha, beta, ialpha, ibeta):
        dt = c._dtype
        if dt is D.bool:
            if ibeta:
                r = r | self.get(c, shape, strides)
            self.put(c, r, shape, strides)
            return
        if dt._kind == 2:
            if alpha != 1.0:
                r = r * r.dtype.type(alpha)
            if beta:  # beta == 0 ignores c (NaN in it too)
                r = r + r.dtype.type(beta) * self.get(c, shape, strides)
        else:  # integers: in int64, wrapping to c's dtype when stored
            r = r.astype(np.int64)
            if ialpha != 1:
                r = r * np.int64(ialpha)
            if ibeta:
                r = r + np.int64(ibeta) * self.get(c, shape, strides).astype(np.int64)
        self.put(c, r, shape, strides)

    def mm(self, m, n, k, c, scm, scn, a, sam, sak, b, sbk, sbn, alpha, beta, ialpha, ibeta):
        av = self.get(a, (m, k), (sam, sak))
        bv = self.get(b, (k, n), (sbk, sbn))
        if (alpha == 1.0 and beta in (0.0, 1.0) and c._dtype._kind == 2 and c._contig and
                (scm, scn) == (n, 1) and c._dtype is a._dtype):
            o = self.direct(c)
            if o is not None:
                o = o.reshape(m, n)
                if beta:  # c += a @ b (linear's bias, already in c)
                    o += self.xp.matmul(av, bv)
                else:
                    self.xp.matmul(av, bv, out=o)  # straight into c
                return 0
        self._store_mm(c, self._gemm(av, bv, c._dtype), (m, n), (scm, scn), alpha, beta,
                       ialpha, ibeta)
        return 0

    def matmul(self, batch, m, n, k, c, sc, a, sa, b, sb, alpha, beta, ialpha, ibeta):
        batch = tuple(batch)
        av = self.get(a, batch + (m, k), tuple(sa))
        bv = self.get(b, batch + (k, n), tuple(sb))
        self._store_mm(c, self._gemm(av, bv, c._dtype), batch + (m, n), tuple(sc), alpha, beta,
                       ialpha, ibeta)
        return 0

    def mm_bias(self, m, n, k, c, scm, a, sam, sak, b, sbk, sbn, bias):
        return C.ERR_OP  # no fusion here: the op layer adds the bias through mm's beta
