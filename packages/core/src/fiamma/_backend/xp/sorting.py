"""Array-module primitives of the sort family: sort, topk, selection (k-th value, median, mode),
cumulative extremes, searchsorted and the row grouping behind unique (contract.Backend documents
each; the semantics are csrc/sort.c's).

Every element is mapped to an order-preserving unsigned key, as the C code does: integers with
their sign bit flipped, floats by their bits with -0.0 folded onto 0.0 and every NaN onto the
largest key. Sorting keys with a stable argsort gives the stable order with NaN last; a
descending sort sorts the complemented keys (so equal values keep their order). Values are then
gathered from the input, bit for bit."""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C

__all__ = ["SortingMixin"]

# (key dtype, NaN bound of the magnitude bits or None) per dtype code
_F16, _BF16 = D.float16.code, D.bfloat16.code
_KEYINFO = {
    D.bool.code: (np.uint8, None), D.uint8.code: (np.uint8, None),
    D.int8.code: (np.uint8, None), D.int16.code: (np.uint16, None),
    D.int32.code: (np.uint32, None), D.int64.code: (np.uint64, None),
    _F16: (np.uint16, 0x7C00), _BF16: (np.uint16, 0x7F80),
    D.float32.code: (np.uint32, 0x7F800000), D.float64.code: (np.uint64, 0x7FF0000000000000),
    D.uint16.code: (np.uint16, None), D.uint32.code: (np.uint32, None),
    D.uint64.code: (np.uint64, None),
}
_UNSIGNED = {d.code for d in D.UNSIGNED} | {D.bool.code}


class SortingMixin:
    # ---- keys --------------------------------------------------------------------------------
    def _keys(self, r, code):
        """The order-preserving unsigned keys of the storage-dtype array r (see the module
        docstring)."""
        xp = self.xp
        kt, nanb = _KEYINFO[code]
        t = np.dtype(kt).type
        bits = np.dtype(kt).itemsize * 8
        sign = t(1 << (bits - 1))
        u = r.view(kt)
        if nanb is None:
            if code in _UNSIGNED:
                return u
            return u ^ sign
        ones = t((1 << bits) - 1)
        u = xp.where(u == sign, t(0), u)
        k = u ^ xp.where((u >> t(bits - 1)) != 0, ones, sign)
        return xp.where((u & t((1 << (bits - 1)) - 1)) > t(nanb), ones, k)

    @staticmethod
    def _nan_key(code):
        kt, nanb = _KEYINFO[code]
        return None if nanb is None else np.dtype(kt).type(np.iinfo(kt).max)

    def _cummax(self, a, axis):
        """The running maximum of a along axis (NumPy's accumulate; a doubling scan where the
        array module has no ufunc.accumulate)."""
        if self.is_numpy:
            return np.maximum.accumulate(a, axis=axis)
        return self._cummax_doubling(a, axis)

    def _cummax_doubling(self, a, axis):
        xp = self.xp
        a = xp.moveaxis(a, axis, -1).copy()
        n = a.shape[-1]
        s = 1
        while s < n:
            a[..., s:] = xp.maximum(a[..., s:], a[..., :-s])
            s *= 2
        return xp.moveaxis(a, -1, axis)

    def _lexsort_rows(self, k):
        """The stable lexicographic order of the rows of the 2-d key array k."""
        xp = self.xp
        if self.is_numpy:
            return np.lexsort(k.T[::-1])
        perm = xp.arange(k.shape[0], dtype=np.int64)
        for j in range(k.shape[1] - 1, -1, -1):  # least significant column first
            perm = perm[self._argsort_stable(k[perm, j])]
        return perm

    def _lanes(self, shape, dim):
        if len(shape) < 1:
            return C.ERR_NDIM
        if dim < 0 or dim >= len(shape):
            return C.ERR_ARG
        return 0

    # ---- sort / topk -------------------------------------------------------------------------
    def sort(self, shape, x, sx, dim, descending, values, sv, indices, si):
        xp = self.xp
        rc = self._lanes(shape, dim)
        if rc or 0 in shape:
            return rc
        r = self.raw(x, shape, sx)
        k = self._keys(r, x._dtype.code)
        if descending:
            k = ~k
        order = self._argsort_stable(k, axis=dim)
        if indices is not None:
            self.raw(indices, shape, si)[...] = order
        if values is not None:
            self.raw(values, shape, sv)[...] = xp.take_along_axis(r, order, axis=dim)
        return 0

    def topk(self, shape, x, sx, dim, k, largest, values, sv, indices, si):
        xp = self.xp
        rc = self._lanes(shape, dim)
        if rc:
            return rc
        if k < 0 or k > shape[dim]:
            return C.ERR_INDEX
        if k == 0 or 0 in shape:
            return 0
        r = self.raw(x, shape, sx)
        key = self._keys(r, x._dtype.code)
        if largest:
            key = ~key
        order = self._argsort_stable(key, axis=dim)
        sl = (slice(None),) * dim + (slice(0, k),)
        order = order[sl]
        kshape = tuple(shape[:dim]) + (k,) + tuple(shape[dim + 1:])
        self.raw(indices, kshape, si)[...] = order
        self.raw(values, kshape, sv)[...] = xp.take_along_axis(r, order, axis=dim)
        return 0

    # ---- k-th value, median, mode ------------------------------------------------------------
    def select(self, mode, shape, x, sx, dim, k, values, sv, indices, si):
        xp = self.xp
        if mode < 0 or mode > C.SEL_MODE:
            return C.ERR_OP
        rc = self._lanes(shape, dim)
        if rc:
            return rc
        n = shape[dim]
        if any(s == 0 for d, s in enumerate(shape) if d != dim):
            return 0
        if n == 0:
            return C.ERR_VALUE
        if mode == C.SEL_KTH and (k < 0 or k >= n):
            return C.ERR_INDEX
        code = x._dtype.code
        r = xp.moveaxis(self.raw(x, shape, sx), dim, -1)
        key = self._keys(r, code)
        order = self._argsort_stable(key, axis=-1)
        sk = xp.take_along_axis(key, order, axis=-1)
        lead = sk.shape[:-1]
        nk = self._nan_key(code)
        if mode == C.SEL_KTH:
            pos = xp.full(lead + (1,), k, dtype=np.int64)
        elif mode in (C.SEL_MEDIAN, C.SEL_NANMEDIAN):
            fn = (xp.sum(sk != nk, axis=-1, keepdims=True, dtype=np.int64) if nk is not None
                  else xp.full(lead + (1,), n, dtype=np.int64))
            if mode == C.SEL_MEDIAN:  # the first NaN if there is one
                pos = xp.where(fn < n, fn, np.int64((n - 1) // 2))
            else:
                pos = xp.where(fn > 0, (fn - 1) // 2, np.int64(0))
        else:
            pos = self._mode_pos(sk, nk)
        idx = xp.take_along_axis(order, pos, axis=-1)
        oshape = tuple(1 if d == dim else s for d, s in enumerate(shape))
        if indices is not None:
            self.raw(indices, oshape, si)[...] = xp.moveaxis(idx, -1, dim)
        if values is not None:
            self.raw(values, oshape, sv)[...] = xp.moveaxis(
                xp.take_along_axis(r, idx, axis=-1), -1, dim)
        return 0

    def _mode_pos(self, sk, nk):
        """Per lane of the sorted keys sk (lanes along the last axis): the position of the last
        element of the first longest run of equal keys (NaN keys are never equal)."""
        xp = self.xp
        lead = sk.shape[:-1]
        n = sk.shape[-1]
        s2 = sk.reshape(-1, n)
        start = xp.ones(s2.shape, dtype=np.bool_)
        start[:, 1:] = s2[:, 1:] != s2[:, :-1]
        if nk is not None:
            start |= s2 == nk
        run = xp.cumsum(start.reshape(-1)) - 1  # lanes start runs: start[:, 0] is set
        length = xp.bincount(run)[run].reshape(s2.shape)
        end = xp.ones(s2.shape, dtype=np.bool_)
        end[:, :-1] = start[:, 1:]
        score = xp.where(end, length, 0)
        return xp.argmax(score, axis=-1).astype(np.int64).reshape(lead + (1,))

    # ---- cummax / cummin ---------------------------------------------------------------------
    def cumext(self, ismin, shape, x, sx, dim, values, sv, indices, si):
        xp = self.xp
        rc = self._lanes(shape, dim)
        if rc or 0 in shape:
            return rc
        code = x._dtype.code
        r = self.raw(x, shape, sx)
        key = self._keys(r, code)
        if ismin:  # the smallest wins, but a NaN still takes over (and keeps the lead)
            nk = self._nan_key(code)
            key = ~key if nk is None else xp.where(key == nk, nk, ~key)
        # an element takes the lead when its key is >= the running maximum (ties: the last)
        m = self._cummax(key, dim)
        ar = xp.arange(shape[dim], dtype=np.int64).reshape(
            (shape[dim],) + (1,) * (len(shape) - dim - 1))
        idx = self._cummax(xp.where(key == m, ar, np.int64(0)), dim)
        self.raw(indices, shape, si)[...] = idx
        self.raw(values, shape, sv)[...] = xp.take_along_axis(r, idx, axis=dim)
        return 0

    # ---- searchsorted ------------------------------------------------------------------------
    def searchsorted(self, nlanes, nseq, seq, seq_ls, sorter, sorter_ls, nval, vals, val_ls,
                     right, out, bad):
        xp = self.xp
        if nlanes < 0 or nseq < 0 or nval < 0:
            return C.ERR_ARG
        if sorter is not None and nseq:
            nsl = nlanes if sorter_ls else min(nlanes, 1)
            so = self.raw(sorter, (nsl, nseq), (sorter_ls, 1))
            found, value = self._first_bad((so < 0) | (so >= nseq), so)
            if found:
                if bad is not None:
                    bad[:] = [value]
                return C.ERR_INDEX
        if nlanes == 0 or nval == 0:
            return 0
        v = self.get(vals, (nlanes, nval), (val_ls, 1))
        lo = xp.zeros((nlanes, nval), dtype=np.int64)
        if nseq:
            s = self.get(seq, (nlanes, nseq), (seq_ls, 1))
            so = self.raw(sorter, (nlanes, nseq), (sorter_ls, 1)) if sorter is not None else None
            hi = xp.full((nlanes, nval), nseq, dtype=np.int64)
            # the C binary search step for step (its answer with NaNs in the sequence too)
            for _ in range(int(nseq).bit_length()):
                act = lo < hi
                mid = lo + ((hi - lo) >> 1)
                at = xp.minimum(mid, nseq - 1)
                if so is not None:
                    at = xp.take_along_axis(so, at, axis=1)
                m = xp.take_along_axis(s, at, axis=1)
                go = ~(m > v) if right else ~(m >= v)
                lo = xp.where(act & go, mid + 1, lo)
                hi = xp.where(act & ~go, mid, hi)
        self.raw(out, (nlanes, nval), (nval, 1))[...] = lo
        return 0

    # ---- unique ------------------------------------------------------------------------------
    def unique_runs(self, n, m, data, order, origpos, first, inverse, counts):
        xp = self.xp
        if n < 0 or m < 0:
            return C.ERR_ARG, 0
        if n == 0:
            return 0, 0
        if order is not None:
            rows = self.raw(order, (n,), (1,))
            found, value = self._first_bad((rows < 0) | (rows >= n), rows)
            if found:
                return C.ERR_INDEX, value
        else:
            rows = xp.arange(n, dtype=np.int64)
        if inverse is not None and origpos is not None:
            at = self.raw(origpos, (n,), (1,))
            found, value = self._first_bad((at < 0) | (at >= n), at)
            if found:
                return C.ERR_INDEX, value
        else:
            at = None
        code = data._dtype.code
        new = xp.ones(n, dtype=np.bool_)
        if m == 0:
            new[1:] = False
        elif n > 1:
            k = self._keys(self.raw(data, (n, m), (m, 1))[rows], code)
            diff = xp.any(k[1:] != k[:-1], axis=1)
            nk = self._nan_key(code)
            if nk is not None:  # a row holding a NaN equals no row
                diff |= xp.any(k[:-1] == nk, axis=1)
            new[1:] = diff
        g = xp.cumsum(new) - 1
        starts = xp.nonzero(new)[0]
        ng = int(starts.shape[0])
        self.raw(first, (ng,), (1,))[...] = rows[starts]
        if counts is not None:
            ends = xp.concatenate([starts[1:], xp.asarray([n], dtype=starts.dtype)])
            self.raw(counts, (ng,), (1,))[...] = ends - starts
        if inverse is not None:
            inv = self.raw(inverse, (n,), (1,))
            if at is None:
                inv[...] = g
            else:  # origpos is a permutation (the op layer's sort order)
                inv[at] = g
        return 0, ng

    def sort_rows(self, n, m, data, perm):
        xp = self.xp
        if n < 0 or m < 0:
            return C.ERR_ARG
        p = self.raw(perm, (n,), (1,))
        if n < 2 or m == 0:
            p[...] = xp.arange(n, dtype=np.int64)
            return 0
        k = self._keys(self.raw(data, (n, m), (m, 1)), data._dtype.code)
        p[...] = self._lexsort_rows(k)
        return 0
