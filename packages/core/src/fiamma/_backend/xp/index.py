"""Array-module primitives of the index family: advanced-index gather/scatter, the dim-wise index
ops, boolean masks, nonzero, bincount and histc (contract.Backend documents each; the semantics
are csrc/index.c's and csrc/indexops.c's).

Every index is checked before anything is written (one host sync, for the error); the first bad
one in row-major order is reported through ``bad``. An index tensor whose range is known
(``note_range``: uploaded from the host, or checked whole before and not written since) is not
checked again, so no host read. Addresses are computed as element offsets
into a flat view of the indexed tensor's storage, so any strides work. Scatters with duplicate
destinations: the last write in row-major order wins (only the last occurrence of each
destination is written); accumulations apply every value (NumPy: ``ufunc.at``, in index order,
as the C loops do; CuPy: atomics, or a sort-based segmented reduction where CuPy has none)."""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as C
from fiamma._backend.xp.base import BF16, STORE_NP
from fiamma._backend.xp.elementwise import _maxp, _minp

__all__ = ["IndexMixin"]

_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
_MODE_OP = {C.IXOP_ADD: "add", C.IXOP_MUL: "mul", C.IXOP_MAX: "max", C.IXOP_MIN: "min"}
# CuPy's atomic scatter-add takes these dtypes (int64 travels as uint64: the same bits wrap)
_CUPY_ADD = {np.dtype(t) for t in (np.int32, np.uint32, np.uint64, np.float16, np.float32,
                                   np.float64)}


class IndexMixin:
    # ---- helpers -----------------------------------------------------------------------------
    def _flat(self, t):
        """(a 1-d array over all of t's storage in t's storage dtype, the index of t's first
        element in it)."""
        st = t._storage
        isz = t._dtype.itemsize
        b = t._ptr - st.ptr
        r = b % isz
        a = self._array(st, STORE_NP[t._dtype.code], ((st.nbytes - r) // isz,), (isz,), r)
        return a, b // isz

    def _compact(self, a):
        """The broadcast view a with its zero-stride dims cut to size 1 (it broadcasts back):
        work on it is not repeated along them."""
        return a[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None)
                       for st, n in zip(a.strides, a.shape))]

    def _grid(self, shape):
        """One broadcastable int64 arange per dim of shape (the coordinates p)."""
        xp = self.xp
        nd = len(shape)
        return tuple(xp.arange(n, dtype=np.int64).reshape((n,) + (1,) * (nd - d - 1))
                     for d, n in enumerate(shape))

    def _lin(self, shape, strides, base=0):
        """int64 array of ``shape``: base + sum_d p_d * strides[d]."""
        xp = self.xp
        nd = len(shape)
        o = xp.asarray(base, dtype=np.int64)
        for d in range(nd):
            if strides[d] and shape[d] > 1:
                r = xp.arange(shape[d], dtype=np.int64) * np.int64(strides[d])
                o = o + r.reshape((shape[d],) + (1,) * (nd - d - 1))
        return xp.broadcast_to(o, tuple(shape))

    def _first_bad(self, badmask, values):
        """(True, value at the first set position of badmask in row-major order) or
        (False, None); one host sync."""
        if badmask.size == 0 or not bool(badmask.any()):
            return False, None
        p = int(self.xp.argmax(badmask.reshape(-1)))
        return True, int(values.reshape(-1)[p])

    def _argsort_stable(self, a, axis=-1):
        if self.is_numpy:
            return np.argsort(a, axis=axis, kind="stable")
        return self.xp.argsort(a, axis=axis)  # CuPy's sort is always stable

    def _last_writes(self, off):
        """Positions of the last occurrence of each value of the 1-d int64 ``off`` (None when
        off has at most one element: every position)."""
        xp = self.xp
        n = off.shape[0]
        if n < 2:
            return None
        order = self._argsort_stable(off)
        so = off[order]
        keep = xp.ones(n, dtype=np.bool_)
        keep[:-1] = so[1:] != so[:-1]
        return order[keep]

    def _put_last(self, flat, off, v):
        """flat[off] = v for 1-d off, v; with duplicate offsets the last one wins."""
        sel = self._last_writes(off)
        if sel is None:
            flat[off] = v
        else:
            flat[off[sel]] = v[sel]

    def _scatter_at(self, op, a, pos, vals):
        """a[pos[i]] = op(a[pos[i]], vals[i]) for every i (unbuffered: duplicates accumulate),
        op one of "add", "mul", "max", "min" (max/min propagate NaN); a 1-d array modified in
        place, in a numeric (not bool) dtype."""
        if self.is_numpy:
            _UFUNC[op].at(a, pos, vals)
            return
        if op == "add" and a.dtype in _CUPY_ADD | {np.dtype(np.int64)}:
            import cupyx

            if a.dtype == np.int64:
                cupyx.scatter_add(a.view(np.uint64), pos, vals.astype(np.int64).view(np.uint64))
            else:
                cupyx.scatter_add(a, pos, vals.astype(a.dtype, copy=False))
            return
        self._segmented_at(op, a, pos, vals)

    def _segmented_at(self, op, a, pos, vals):
        """_scatter_at without atomics: a stable sort by destination, a segmented scan by
        doubling (log2 of the longest run steps), then one write per destination. The
        operands of op keep their index order (float rounding may group them differently from
        a sequential loop)."""
        xp = self.xp
        n = pos.shape[0]
        if n == 0:
            return
        f = _SEG_OPS[op]
        order = self._argsort_stable(pos)
        sp = pos[order]
        acc = vals[order].astype(a.dtype, copy=False)
        start = xp.ones(n, dtype=np.bool_)
        start[1:] = sp[1:] != sp[:-1]
        seg = xp.cumsum(start) - 1
        longest = int(xp.bincount(seg).max())
        s = 1
        while s < longest:
            same = seg[s:] == seg[:-s]
            acc[s:] = xp.where(same, f(xp, acc[:-s], acc[s:]), acc[s:])
            s *= 2
        end = xp.ones(n, dtype=np.bool_)
        end[:-1] = start[1:]
        dst = sp[end]
        a[dst] = f(xp, a[dst], acc[end])

    def _reduce_into(self, op, dt, flat, off, v):
        """flat[off] = op(flat[off], v) over duplicates in index order, for fiamma dtype dt
        (flat in its storage dtype, v in its compute dtype; bool: add/max are or, mul/min
        and; bfloat16 accumulates in float32, rounded once per destination)."""
        xp = self.xp
        if dt is D.bool:
            vb = v != 0
            if op in ("add", "max"):
                flat[off[vb]] = True
            else:
                flat[off[~vb]] = False
            return
        if dt.code == BF16 and self.is_numpy:
            self._bf16_in_order(op, flat, off, v)
            return
        if dt.code == BF16:
            uniq, inv = xp.unique(off, return_inverse=True)
            acc = self.bf16_to_f32(flat[uniq])
            self._scatter_at(op, acc, inv.reshape(-1), v.astype(np.float32, copy=False))
            flat[uniq] = self.f32_to_bf16(acc)
            return
        self._scatter_at(op, flat, off, v.astype(flat.dtype, copy=False))

    def _bf16_in_order(self, op, flat, off, v):
        """The bfloat16 accumulation of the C loops: in index order, rounded to bfloat16 after
        every step. Round r applies the r-th value of every destination (one vectorised step
        per round: as many rounds as the most repeated destination has values)."""
        xp = self.xp
        n = off.shape[0]
        if n == 0:
            return
        f = _SEG_OPS[op]
        order = self._argsort_stable(off)
        so = off[order]
        sv = v[order].astype(np.float32, copy=False)
        start = xp.ones(n, dtype=np.bool_)
        start[1:] = so[1:] != so[:-1]
        first = xp.nonzero(start)[0]
        length = xp.diff(xp.concatenate([first, xp.asarray([n], dtype=first.dtype)]))
        for r in range(int(length.max())):
            at = first[length > r] + r
            d = so[at]
            flat[d] = self.f32_to_bf16(f(xp, self.bf16_to_f32(flat[d]), sv[at]))

    # ---- advanced indexing -------------------------------------------------------------------
    def _adv_indices(self, shape, idx, sidx, isize, bad):
        """(status, the wrapped index arrays over shape); checks every index first."""
        xp = self.xp
        nd = len(shape)
        strides = [tuple(sidx[j * nd:(j + 1) * nd]) for j in range(len(idx))]
        # the check runs over the dims along which some index varies
        cshape = tuple(s if any(st[d] for st in strides) else 1 for d, s in enumerate(shape))
        if 0 not in cshape:
            anybad = None
            bads = []
            for j, t in enumerate(idx):
                n = isize[j]
                if self.known_in(t, -n, n):
                    continue  # in range by what is known of it: no check, no host read
                v = self.raw(t, cshape, strides[j])
                b = (v < -n) | (v >= n)
                bads.append((j, b, v))
                anybad = b if anybad is None else anybad | b
            if anybad is not None and bool(anybad.any()):
                p = int(xp.argmax(xp.broadcast_to(anybad, cshape).reshape(-1)))
                for j, b, v in bads:
                    if bool(xp.broadcast_to(b, cshape).reshape(-1)[p]):
                        if bad is not None:
                            bad[:] = [j, int(xp.broadcast_to(v, cshape).reshape(-1)[p])]
                        return C.ERR_INDEX, None
            for j, _b, v in bads:
                if self._compact(v).size == idx[j]._numel:  # every element was checked
                    self.note_range(idx[j], -isize[j], isize[j] - 1)
        if 0 in shape:
            return 0, None
        w = []
        for j, t in enumerate(idx):
            v = self._compact(self.raw(t, shape, strides[j]))
            w.append(xp.where(v < 0, v + np.int64(isize[j]), v))
        return 0, w

    def _adv_offsets(self, shape, t, toff, st, w, istride):
        flat, first = self._flat(t)
        off = self._lin(shape, st, first + toff)
        for j, wj in enumerate(w):
            off = off + wj * np.int64(istride[j])
        return flat, off

    def _take_dim(self, w, sx):
        """The one dim along which the compact index array w varies, when x's own stride
        there is 0 (index_select, x[idx]: the result is one ``take`` along that dim), else
        None."""
        d = None
        for i, n in enumerate(w.shape):
            if n > 1:
                if d is not None:
                    return None
                d = i
        return d if d is not None and sx[d] == 0 else None

    def _take(self, out, shape, so, x, sx, d, n, stride, w, xoff=0):
        """out (shape, strides so) = x read along dim d at the positions w (x viewed with
        dim d of size n and element stride ``stride``): one take, no coordinate grids."""
        xshape = tuple(shape[:d]) + (n,) + tuple(shape[d + 1:])
        xst = tuple(sx[:d]) + (stride,) + tuple(sx[d + 1:])
        if w.ndim != 1:
            w = w.reshape(-1)
        xv = self.raw(x, xshape, xst, xoff)
        o = self.raw(out, shape, so)
        if x._dtype is out._dtype and (self.is_numpy or o.flags.c_contiguous):
            self.xp.take(xv, w, axis=d, out=o)  # straight into the result: one call
        else:
            o[...] = self.xp.take(xv, w, axis=d)

    def _scatter_add_dim(self, shape, a, sa, b, sb, d, n, stride, w):
        """b (viewed with dim d of size n, element stride ``stride``) += a at positions w along
        dim d (duplicates accumulate): one unbuffered add (NumPy's add.at, CuPy's
        scatter_add), no linear offsets."""
        bshape = tuple(shape[:d]) + (n,) + tuple(shape[d + 1:])
        bst = tuple(sb[:d]) + (stride,) + tuple(sb[d + 1:])
        bv = self.raw(b, bshape, bst)
        pos = (slice(None),) * d + (w.reshape(-1) if w.ndim != 1 else w,)
        v = self.get(a, shape, sa)
        if v.dtype != bv.dtype:
            v = v.astype(bv.dtype)
        if self.is_numpy:
            np.add.at(bv, pos, v)
        else:
            import cupyx

            cupyx.scatter_add(bv, pos, v)

    def index_gather(self, shape, out, x, xoff, sx, idx, sidx, isize, istride, bad):
        rc, w = self._adv_indices(shape, idx, sidx, isize, bad)
        if rc or w is None:
            return rc
        if len(w) == 1:
            d = self._take_dim(w[0], sx)
            if d is not None:
                self._take(out, shape, None, x, sx, d, isize[0], istride[0], w[0], xoff)
                return 0
        # x viewed with one extra dim per index array, read at (p, w_0[p], ..., w_k[p])
        v = self.raw(x, tuple(shape) + tuple(isize), tuple(sx) + tuple(istride), xoff)
        self.raw(out, shape)[...] = v[self._grid(shape) + tuple(w)]
        return 0

    def index_scatter(self, shape, dst, doff, sdst, val, sval, idx, sidx, isize, istride,
                      accumulate, bad):
        xp = self.xp
        rc, w = self._adv_indices(shape, idx, sidx, isize, bad)
        if rc or w is None:
            return rc
        if accumulate and dst._dtype._kind == 3:
            return C.ERR_DTYPE  # the C kernels accumulate real dtypes only (as moves: any)
        flat, off = self._adv_offsets(shape, dst, doff, sdst, w, istride)
        off = off.reshape(-1)
        if accumulate:
            v = xp.broadcast_to(self.get(val, shape, sval), tuple(shape)).reshape(-1)
            self._reduce_into("add", dst._dtype, flat, off, v)
        else:
            v = xp.broadcast_to(self.raw(val, shape, sval), tuple(shape)).reshape(-1)
            self._put_last(flat, off, v)
        return 0

    # ---- nonzero and masks -------------------------------------------------------------------
    def nonzero_count(self, shape, x, sx):
        v = self.get(x, shape, sx)
        return 0, int(self.xp.count_nonzero(v))

    def nonzero(self, x, out, srow, scol, cap):
        xp = self.xp
        v = self.get(x)
        nd = v.ndim
        if nd == 0:
            cnt = int(v != 0)
            return (C.ERR_VALUE if cnt > cap else 0), cnt
        coords = xp.nonzero(v)
        cnt = int(coords[0].shape[0])
        if cnt > cap:
            return C.ERR_VALUE, cap
        if cnt:
            self.raw(out, (cnt, nd), (srow, scol))[...] = xp.stack(coords, axis=1)
        return 0, cnt

    def _mask(self, mask, shape, smask):
        m = self.raw(mask, shape, smask)
        return m if m.dtype == np.bool_ else m != 0

    def masked_select(self, shape, out, cap, x, sx, mask, smask):
        xp = self.xp
        m = xp.broadcast_to(self._mask(mask, shape, smask), tuple(shape))
        v = xp.broadcast_to(self.raw(x, shape, sx), tuple(shape))[m]
        cnt = int(v.shape[0])
        if cnt > cap:
            return C.ERR_VALUE, cap
        if cnt:
            self.raw(out, (cnt,), (1,))[...] = v
        return 0, cnt

    def masked_put(self, shape, dst, sdst, mask, smask, val, nval, sval):
        xp = self.xp
        if sval != 0 and nval < 0:
            return C.ERR_ARG
        if 0 in shape:
            return 0
        m = xp.broadcast_to(self._mask(mask, shape, smask), tuple(shape))
        d = self.raw(dst, shape, sdst)
        if sval == 0:
            d[m] = self.raw(val, (1,), (1,))[0]
            return 0
        cnt = int(xp.count_nonzero(m))
        if cnt > nval:
            return C.ERR_VALUE
        if cnt:
            d[m] = self.raw(val, (cnt,), (sval,))
        return 0

    # ---- dim-wise index ops ------------------------------------------------------------------
    def ixop(self, mode, shape, a, sa, b, sb, idx, sidx, isize, istride, wrap, precheck, bad,
             init=None):
        xp = self.xp
        if mode < C.IXOP_GATHER or mode > C.IXOP_MIN or isize < 0:
            return C.ERR_ARG
        if mode > C.IXOP_SCATTER and b._dtype._kind == 3:
            return C.ERR_DTYPE  # accumulating modes: real dtypes only, as the C kernels
        if init is not None:
            if mode == C.IXOP_GATHER:
                return C.ERR_ARG
            # a byte copy, as the C kernel makes: init may be another dtype of the same bytes
            # (a complex tensor under its float-pair view)
            nb = init._numel * init._dtype.itemsize
            if nb:
                self._bytes(b, 1, nb)[...] = self._bytes(init, 1, nb)
        if 0 in shape:
            return 0
        # the index with its broadcast (zero-stride) dims at size 1, as a view kept on idx's
        # storage (the same token ids every step: no new array)
        v = self.raw(idx, tuple(1 if st == 0 and n > 1 else n for n, st in zip(shape, sidx)),
                     sidx)
        w = xp.where(v < 0, v + np.int64(isize), v) if wrap else v
        lo = -isize if wrap else 0
        if not self.known_in(idx, lo, isize):  # else in range by what is known: no host read
            found, value = self._first_bad((w < 0) | (w >= isize), v)
            if found:
                if bad is not None:
                    bad[:] = [value]
                return C.ERR_INDEX
            if v.size == idx._numel:  # every element of idx was checked
                self.note_range(idx, lo, isize - 1)
        if mode == C.IXOP_GATHER:
            d = self._take_dim(w, sb)
            if d is not None:
                self._take(a, shape, sa, b, sb, d, isize, istride, w)
                return 0
            # b viewed with the indexed dim last, read at (p, w[p])
            bv = self.raw(b, tuple(shape) + (isize,), tuple(sb) + (istride,))
            self.raw(a, shape, sa)[...] = bv[self._grid(shape) + (w,)]
            return 0
        if mode == C.IXOP_ADD and b._dtype._kind == 2 and b._dtype.code != BF16:
            d = self._take_dim(w, sb)
            if d is not None:  # index_add along one dim (embedding's backward): one scatter-add
                self._scatter_add_dim(shape, a, sa, b, sb, d, isize, istride, w)
                return 0
        flat, first = self._flat(b)
        off = xp.broadcast_to(self._lin(shape, sb, first) + w * np.int64(istride),
                              tuple(shape)).reshape(-1)
        if mode == C.IXOP_SCATTER:
            v = xp.broadcast_to(self.raw(a, shape, sa), tuple(shape)).reshape(-1)
            self._put_last(flat, off, v)
            return 0
        v = xp.broadcast_to(self.get(a, shape, sa), tuple(shape)).reshape(-1)
        self._reduce_into(_MODE_OP[mode], b._dtype, flat, off, v)
        return 0

    # ---- counting ----------------------------------------------------------------------------
    def bincount(self, x, n, sx, w, sw, out, nbins, bad):
        xp = self.xp
        if n < 0 or nbins < 0:
            return C.ERR_ARG
        if w is not None and w._dtype not in (D.float32, D.float64):
            return C.ERR_DTYPE
        if x._dtype not in (D.uint8, D.int8, D.int16, D.int32, D.int64, D.uint16, D.uint32,
                            D.uint64):
            return C.ERR_DTYPE
        if n == 0:
            return 0
        v = self.raw(x, (n,), (sx,)).astype(np.int64)
        found, value = self._first_bad((v < 0) | (v >= nbins), v)
        if found:
            if bad is not None:
                bad[:] = [value]
            return C.ERR_INDEX
        o = self.raw(out, (nbins,), (1,))
        if w is None:
            o[...] = o + xp.bincount(v, minlength=nbins)
        else:
            self._scatter_at("add", o, v, self.raw(w, (n,), (sw,)))
        return 0

    def histc(self, x, bins, lo, hi, edges, out):
        xp = self.xp
        if x._dtype._kind != 2:
            return C.ERR_DTYPE
        if bins <= 0 or not hi > lo or edges is None or out is None:
            return C.ERR_ARG
        v = self.get(x).astype(np.float64).reshape(-1)
        if v.shape[0] == 0:
            return 0
        e = self.asarray(np.ascontiguousarray(edges, dtype=np.float64))
        scale = float(bins) / (hi - lo)
        inside = (v >= lo) & (v <= hi)
        vs = xp.where(inside, v, lo)
        pos = ((vs - lo) * scale).astype(np.int64)
        pos = xp.clip(pos, 0, bins - 1)
        # the linear formula can land one bin off next to an edge: the edges decide
        down = (vs < e[pos]) & (pos > 0)
        up = (pos + 1 < bins) & (vs >= e[xp.minimum(pos + 1, bins)])
        pos = xp.where(down, pos - 1, xp.where(up, pos + 1, pos))
        pos = xp.where(inside, pos, bins)
        o = self.raw(out, (bins,), (1,))
        o[...] = o + xp.bincount(pos, minlength=bins + 1)[:bins]
        return 0


def _add(xp, x, y):
    return x + y


def _mul(xp, x, y):
    return x * y


_SEG_OPS = {"add": _add, "mul": _mul, "max": _maxp, "min": _minp}
