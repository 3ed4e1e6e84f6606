"""Array-module primitives of the reduction family: reductions over a set of dims, scans,
softmax (contract.Backend documents each; the semantics are csrc/reduce.c's: NaN propagates
through max/min, argmax/argmin take the first extreme (a NaN counts as one), STD/VAR/LSE read
their per-output centre from ``aux``, an empty reduction without an identity is ERR_VALUE)."""

import numpy as np

from fiamma._backend import codes as C

__all__ = ["ReductionsMixin"]

_IDENTITY = {C.RED_SUM, C.RED_NANSUM, C.RED_PROD, C.RED_MEAN, C.RED_ALL, C.RED_ANY,
             C.RED_COUNTNZ, C.RED_NANCOUNT, C.RED_NORM0, C.RED_NORM1, C.RED_NORM2, C.RED_NORMP,
             C.RED_STD, C.RED_VAR, C.RED_LSE}


_LAYOUTS = {}


def _layout(shape, rmask):
    """(reduced axes, keepdim shape, an output-side dim is empty, a reduced dim is empty) of a
    reduction of ``shape`` over the dims in ``rmask``; cached (ops repeat their shapes)."""
    key = (shape, rmask)
    r = _LAYOUTS.get(key)
    if r is None:
        nd = len(shape)
        axes = tuple(d for d in range(nd) if (rmask >> d) & 1)
        kshape = tuple(1 if d in axes else s for d, s in enumerate(shape))
        r = (axes, kshape, any(shape[d] == 0 for d in range(nd) if d not in axes),
             any(shape[d] == 0 for d in axes))
        if len(_LAYOUTS) < 4096:
            _LAYOUTS[key] = r
    return r


_OUT_DTYPES = []


def _out_dtype(op, code):
    """The CPU backend's reduce_out_dtype table (the reductions' dtype semantics), read once."""
    if not _OUT_DTYPES:
        from fiamma import _dtype as D
        from fiamma._backend.cpu import reduce_out_dtype

        n = max(d.code for d in D.ALL) + 1
        for o in range(C.NRED):
            row = [-1] * n
            for d in D.ALL:
                row[d.code] = reduce_out_dtype(o, d.code)
            _OUT_DTYPES.append(row)
    return _OUT_DTYPES[op][code]


class ReductionsMixin:
    def _acc(self, v):
        """The dtype sums of v accumulate in: float64 for every floating dtype (the C kernels
        keep float32 sums of ten million values exact to the last bit or so)."""
        if v.dtype.kind == "f":
            return np.float64
        return None

    def reduce(self, op, x, rmask, out, sout, aux, saux, p):
        xp = self.xp
        if op < 0 or op >= C.NRED:
            return C.ERR_OP
        if _out_dtype(op, x._dtype.code) < 0:
            return C.ERR_DTYPE
        axes, kshape, none_kept, empty = _layout(x._shape, rmask)
        if none_kept:
            return 0
        if empty and op not in _IDENTITY:
            return C.ERR_VALUE
        v = self.get(x)
        if op in (C.RED_ARGMAX, C.RED_ARGMIN):
            if len(axes) > 1:
                return C.ERR_ARG
            if axes:
                ax = axes[0]
                idx, val = self._arg(op, v, ax)
            else:
                idx = xp.zeros(kshape, np.int64)
                val = v
            self.put(aux, idx, kshape, saux)
            if out is not None:
                self.put(out, val, kshape, sout)
            return 0
        r = self._reduce_values(op, v, axes, aux, saux, kshape, p, x)
        if r is None:
            return C.ERR_OP
        self.put(out, r, kshape, sout)
        return 0

    def _arg(self, op, v, ax):
        xp = self.xp
        if v.dtype == np.bool_:
            v = v.astype(np.uint8)
        f = xp.argmax if op == C.RED_ARGMAX else xp.argmin
        if v.dtype.kind == "f":
            nan = xp.isnan(v)
            # the first NaN wins (it is the extreme); otherwise the first max/min
            fill = v.dtype.type(-np.inf if op == C.RED_ARGMAX else np.inf)
            idx = f(xp.where(nan, fill, v), axis=ax)
            anynan = nan.any(axis=ax)
            if bool(anynan.any()):
                idx = xp.where(anynan, xp.argmax(nan, axis=ax), idx)
        else:
            idx = f(v, axis=ax)
        idx = xp.expand_dims(idx.astype(np.int64), ax)
        val = xp.take_along_axis(v, idx, axis=ax)
        return idx, val

    def _reduce_values(self, op, v, axes, aux, saux, kshape, p, x):
        xp = self.xp
        if op == C.RED_SUM:  # the array's own method: no module-level wrapper frames
            k = v.dtype.kind
            return v.sum(axis=axes, dtype=np.float64 if k == "f" else np.int64 if k in "biu"
                         else None, keepdims=True)
        kd = dict(axis=axes, keepdims=True)
        acc = self._acc(v)
        n = 1
        for d in axes:
            n *= x._shape[d]
        if op == C.RED_NANSUM:
            return xp.nansum(v, dtype=acc, **kd) if v.dtype.kind == "f" else \
                xp.sum(v, dtype=np.int64, **kd)
        if op == C.RED_PROD:
            if v.dtype == np.bool_ or v.dtype.kind in "iu":
                return xp.prod(v, dtype=np.int64, **kd)
            return xp.prod(v, dtype=acc, **kd)
        if op == C.RED_MEAN:
            s = xp.sum(v, dtype=acc or v.dtype, **kd)
            return s / s.dtype.type(n) if n else s * s.dtype.type(np.nan)
        if op in (C.RED_MAX, C.RED_MIN):
            if v.dtype == np.bool_:
                return (xp.any if op == C.RED_MAX else xp.all)(v, **kd)
            return (xp.max if op == C.RED_MAX else xp.min)(v, **kd)
        if op in (C.RED_STD, C.RED_VAR):
            c = self.get(aux, kshape, saux)
            d = v - c
            s = xp.sum(d * d, dtype=acc, **kd)
            r = s / s.dtype.type(max(n - p, 0))  # n <= correction: inf, or NaN for 0/0
            return xp.sqrt(r) if op == C.RED_STD else r
        if op == C.RED_LSE:
            c = self.get(aux, kshape, saux)
            c = xp.where(xp.isfinite(c), c, c.dtype.type(0))  # all -inf lanes give -inf
            return xp.log(xp.sum(xp.exp(v - c), dtype=acc, **kd)) + c
        if op == C.RED_ALL:
            return xp.all(v != 0, **kd)
        if op == C.RED_ANY:
            return xp.any(v != 0, **kd)
        if op == C.RED_COUNTNZ:
            return xp.sum(v != 0, dtype=np.int64, **kd)
        if op == C.RED_NANCOUNT:
            return xp.sum(~xp.isnan(v), dtype=np.int64, **kd)
        a = xp.abs(v) if v.dtype != np.bool_ else v.astype(np.float32)
        if op == C.RED_NORM1:
            return xp.sum(a, dtype=acc, **kd)
        if op == C.RED_NORM2:
            return xp.sqrt(xp.sum(a * a, dtype=acc, **kd))
        if op == C.RED_NORMINF:
            return xp.max(a, **kd)
        if op == C.RED_NORMNINF:
            return xp.min(a, **kd)
        if op == C.RED_NORM0:
            return xp.sum(v != 0, **kd).astype(acc or v.dtype)
        if op == C.RED_NORMP:
            s = xp.sum(xp.power(a, a.dtype.type(p)), dtype=acc, **kd)
            return xp.power(s, s.dtype.type(1.0 / p))
        return None

    def scan(self, op, x, out, dim):
        xp = self.xp
        v = self.get(x)
        if v.ndim == 0:
            v = v.reshape(1)
            dim = 0
            shape = (1,)
        else:
            shape = None
        if v.dtype == np.bool_ or v.dtype.kind in "iu":
            v = v.astype(np.int64)
        acc = self._acc(v)
        f = xp.cumsum if op == C.SCAN_CUMSUM else xp.cumprod if op == C.SCAN_CUMPROD else None
        if f is None:
            return C.ERR_OP
        r = f(v, axis=dim, dtype=acc)
        if shape is not None:
            self.put(out, r, shape, (1,))
        else:
            self.put(out, r)
        return 0

    def softmax(self, log, x, out, dim):
        xp = self.xp
        v = self.get(x)
        if x._dtype._kind != 2:
            return C.ERR_DTYPE
        if v.ndim == 0:
            self.put(out, xp.zeros((), v.dtype) if log else xp.ones((), v.dtype))
            return 0
        w = v.astype(np.float32) if v.dtype.itemsize < 4 else v
        m = xp.max(w, axis=dim, keepdims=True)
        # an all -inf row shifts by 0; a +inf or NaN max stays (every output NaN, as the C's)
        m = xp.where(m == -np.inf, w.dtype.type(0), m)
        e = w - m
        if log:
            r = e - xp.log(xp.sum(xp.exp(e), axis=dim, keepdims=True))
        else:
            ex = xp.exp(e)
            r = ex / xp.sum(ex, axis=dim, keepdims=True)
        self.put(out, r)
        return 0

