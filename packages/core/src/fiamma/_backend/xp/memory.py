"""Array-module primitives of the memory family (contract.Backend documents each)."""

import importlib
import math

import numpy as np

from fiamma import _dtype as D
from fiamma._backend.xp.base import BF16, STORE_NP, _store_scalar

__all__ = ["MemoryMixin"]

_RANGE_NOTED = 1 << 16  # integer uploads up to this many elements get their range noted
_FILLS = {}  # (dtype code, use_int, value) -> the storage-dtype scalar ``fill`` writes


class _HostArray:
    """A contiguous NumPy array in the form the CPU backend's primitives take a tensor."""

    __slots__ = ("_dtype", "_numel", "_ptr", "_keep")

    def __init__(self, arr, dtype):
        self._dtype, self._numel, self._ptr, self._keep = dtype, arr.size, arr.ctypes.data, arr


class MemoryMixin:
    def copy(self, dst, src):
        if dst._dtype is src._dtype:
            self.raw(dst)[...] = self.raw(src)
        else:
            self.put(dst, self.get(src))
        return 0

    def copy_region(self, shape, dst, doff, dstride, src, soff, sstride):
        if dst._dtype is src._dtype:
            self.raw(dst, shape, dstride, doff)[...] = self.raw(src, shape, sstride, soff)
        else:
            self.put(dst, self.get(src, shape, sstride, soff), shape, dstride, doff)
        return 0

    def _scalar(self, dt, fval, ival, use_int):
        if dt is D.bool:
            return bool(ival if use_int else fval)
        if dt._kind == 2:
            return float(ival) if use_int else fval
        if not use_int:
            if fval != fval or fval in (float("inf"), float("-inf")):
                return 0
            ival = int(fval)
        # integers wrap to the dtype's width, as the C cast does
        bits = dt.itemsize * 8
        ival &= (1 << bits) - 1
        if dt.is_signed and ival >= 1 << (bits - 1):
            ival -= 1 << bits
        return ival

    def fill(self, dst, fval, ival, use_int):
        # the stored scalar of (dtype, value) is computed once: zero_grad fills every
        # parameter's gradient with the same 0.0 each step. NaN and -0.0 are not kept (NaN is
        # no dict key; -0.0 would find 0.0's entry).
        plain = use_int or (fval == fval and (fval != 0 or math.copysign(1.0, fval) > 0))
        key = (dst._dtype.code, use_int, ival if use_int else fval)
        v = _FILLS.get(key) if plain else None
        if v is None:
            v = _store_scalar(dst._dtype, self._fillval(dst._dtype, fval, ival, use_int))
            if plain:
                if len(_FILLS) >= 256:
                    _FILLS.clear()
                _FILLS[key] = v
        self.raw(dst)[...] = v
        return 0

    def _fillval(self, dt, fval, ival, use_int):
        v = self._scalar(dt, fval, ival, use_int)
        return np.asarray(v, dtype=np.float32 if dt.code == BF16 else STORE_NP[dt.code])

    def fill_region(self, shape, dst, off, stride, fval, ival, use_int):
        self.put(dst, self._fillval(dst._dtype, fval, ival, use_int), shape, stride, off)
        return 0

    def arange(self, dst, fstart, fstep, istart, istep):
        xp = self.xp
        n = dst._numel
        if dst._dtype._kind == 2:
            v = fstart + xp.arange(n, dtype=np.float64) * fstep
        else:
            # int64 arithmetic wraps like C's
            v = (xp.arange(n, dtype=np.int64) * np.int64(istep)) + np.int64(istart)
        self.put(dst, v)
        if n and dst._dtype._kind == 1:
            # positions made on the device (arange(T) for a position embedding) have a range
            # known on the host: the index checks of the ops that use them read nothing back
            ends = (int(istart), int(istart) + (n - 1) * int(istep))
            info = np.iinfo(STORE_NP[dst._dtype.code])
            if info.min <= min(ends) and max(ends) <= info.max:  # no wrap
                self.note_range(dst, min(ends), max(ends))
        return 0

    def linspace(self, dst, start, end):
        xp = self.xp
        n = dst._numel
        if n == 0:
            return 0
        if dst._dtype._kind != 2:  # integer linspace starts from the ends converted (PyTorch)
            start = float(self._scalar(dst._dtype, start, 0, False))
            end = float(self._scalar(dst._dtype, end, 0, False))
        if n == 1:
            self.put(dst, xp.asarray([start], dtype=np.float64))
            return 0
        if dst._dtype in (D.float32, D.float64):
            # PyTorch's rounding bit for bit (the step in the output type, one fused
            # multiply-add per value): the CPU backend's fill of a host array, copied to the
            # device (NumPy and CuPy have no fma)
            host = np.empty(n, np.float32 if dst._dtype is D.float32 else np.float64)
            rc = importlib.import_module("fiamma._backend.cpu.memory").linspace(
                _HostArray(host, dst._dtype), float(start), float(end))
            if rc:
                return rc
            self.put(dst, xp.asarray(host))
            return 0
        step = (end - start) / (n - 1)
        i = xp.arange(n, dtype=np.float64)
        half = n // 2
        v = xp.where(i < half, start + i * step, end - (n - 1 - i) * step)
        if dst._dtype._kind != 2:
            v = xp.trunc(v)
        self.put(dst, v)
        return 0

    def logspace(self, dst, start, end, base):
        xp = self.xp
        n = dst._numel
        if n == 0:
            return 0
        if n == 1:
            v = xp.asarray([base ** start], dtype=np.float64)
        else:
            step = (end - start) / (n - 1)
            i = xp.arange(n, dtype=np.float64)
            v = xp.power(np.float64(base), xp.where(i < n // 2, start + i * step,
                                                    end - (n - 1 - i) * step))
        self.put(dst, v)
        return 0

    def from_host(self, dst, src_dtype, address):
        n = dst._numel
        if n == 0:
            return 0
        host = self.host_array(address, STORE_NP[src_dtype.code], n)
        if src_dtype is dst._dtype:
            self._upload(dst, host)
            if src_dtype._kind == 1 and n <= _RANGE_NOTED:
                # uploaded indices (targets, token ids): their range, read on the host now,
                # spares the index checks of the ops that use them a device read
                self.note_range(dst, int(host.min()), int(host.max()))
            return 0
        a = self.asarray(host)
        if src_dtype.code == BF16:
            a = self.bf16_to_f32(a)
        self.put(dst, a.reshape(dst._shape))
        return 0

    def _upload(self, dst, host):
        self.raw(dst)[...] = host.reshape(dst._shape)

    def to_host(self, src, address):
        n = src._numel
        if n:
            self._download(src, self.host_array(address, STORE_NP[src._dtype.code], n))
        return 0

    def _download(self, src, host):
        host[...] = self.raw(src).reshape(-1)

    def _element(self, t, index):
        return self.raw(t, (1,), (1,), index)

    def read_float(self, t, index=0):
        a = self.to_numpy(self._element(t, index))
        if t._dtype.code == BF16:
            a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return float(a[0])

    def read_int(self, t, index=0):
        a = self.to_numpy(self._element(t, index))
        return int(a[0])

    def cat_rows(self, dst, parts, rows, dst_row_bytes, part_row_bytes):
        d = self._bytes(dst, rows, dst_row_bytes)
        col = 0
        for p, w in zip(parts, part_row_bytes):
            if w:
                d[:, col:col + w] = self._bytes(p, rows, w)
            col += w
        return 0

    def _bytes(self, t, rows, width):
        st = t._storage
        return self._array(st, np.uint8, (rows, width), (width, 1), t._ptr - st.ptr)

