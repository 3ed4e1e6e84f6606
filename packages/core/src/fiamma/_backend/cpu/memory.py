"""CPU primitives of the memory family: allocation, strided copies with casts, fills, ranges,
reading one element (contract.Backend documents each)."""

from operator import attrgetter

from fiamma._lib import ffi, lib

__all__ = ["alloc", "alloc_zeroed", "free", "alloc_stats", "allocated_bytes_reader", "empty_cache",
           "set_cache_limit",
           "reset_peak", "new_storage", "copy", "copy_region", "fill", "fill_region", "arange",
           "from_host", "to_host", "linspace", "logspace", "read_float", "read_int", "cat_rows",
           "buffer_address", "host_buffer", "pin_buffer", "host_memmove", "c_pointer"]

alloc = lib.fm_alloc
alloc_zeroed = lib.fm_alloc_zeroed
free = lib.fm_free
empty_cache = lib.fm_alloc_empty_cache
reset_peak = lib.fm_alloc_reset_peak
_copy = lib.fm_copy
_copy_contig = lib.fm_copy_contig
_fill = lib.fm_fill
_cat_bytes = lib.fm_cat_bytes


def alloc_stats():
    out = ffi.new("int64_t[6]")
    lib.fm_alloc_stats(out)
    return {"allocated_bytes": out[0], "cached_bytes": out[1], "peak_allocated_bytes": out[2],
            "cache_hits": out[3], "cache_misses": out[4], "cache_limit_bytes": out[5]}


def allocated_bytes_reader():
    """A function returning the allocator's in-use bytes now (one C call into a buffer made
    once: what a profiler reads around every op)."""
    buf = ffi.new("int64_t[6]")
    stats = lib.fm_alloc_stats

    def read():
        stats(buf)
        return buf[0]

    return read


def set_cache_limit(nbytes):
    lib.fm_alloc_set_cache_limit(int(nbytes))


def copy(dst, src):
    """dst[...] = src cast to dst's dtype; same shape, any strides."""
    if dst._contig and src._contig:
        return _copy_contig(dst._dtype.code, src._dtype.code, dst._numel, dst._ptr, src._ptr)
    return _copy(dst._dtype.code, src._dtype.code, len(dst._shape), dst._shape, dst._ptr,
                 dst._stride, src._ptr, src._stride)


def copy_region(shape, dst, doff, dstride, src, soff, sstride):
    """The view (shape, dstride) of dst starting ``doff`` elements after dst's first element
    receives the view (shape, sstride) of src starting ``soff`` elements after src's, cast."""
    return _copy(dst._dtype.code, src._dtype.code, len(shape), shape,
                 dst._ptr + doff * dst._dtype.itemsize, dstride,
                 src._ptr + soff * src._dtype.itemsize, sstride)


def fill(dst, fval, ival, use_int):
    """Every element of dst = ival (use_int) or fval, converted to dst's dtype."""
    return _fill(dst._dtype.code, len(dst._shape), dst._shape, dst._ptr, dst._stride, fval, ival,
                 use_int)


def fill_region(shape, dst, off, stride, fval, ival, use_int):
    """fill() over the view (shape, stride) of dst starting ``off`` elements in."""
    return _fill(dst._dtype.code, len(shape), shape, dst._ptr + off * dst._dtype.itemsize, stride,
                 fval, ival, use_int)


def arange(dst, fstart, fstep, istart, istep):
    """dst (contiguous, 1-d) = fstart + i * fstep (floating dtypes, in double) or
    istart + i * istep (integer dtypes, in int64, wrapping)."""
    return lib.fm_arange(dst._dtype.code, dst._numel, dst._ptr, fstart, fstep, istart, istep)


def from_host(dst, src_dtype, address):
    """dst (contiguous) = the contiguous host (CPU) array of dst's element count and dtype
    ``src_dtype`` at ``address`` (a NumPy buffer), cast to dst's dtype."""
    return _copy_contig(dst._dtype.code, src_dtype.code, dst._numel, dst._ptr, address)


def linspace(dst, start, end):
    return lib.fm_linspace(dst._dtype.code, dst._numel, dst._ptr, start, end)


def logspace(dst, start, end, base):
    return lib.fm_logspace(dst._dtype.code, dst._numel, dst._ptr, start, end, base)


def to_host(src, address):
    """The contiguous src copied to host memory at ``address`` (src's element count and
    dtype; the caller keeps that memory alive)."""
    return _copy_contig(src._dtype.code, src._dtype.code, src._numel, address, src._ptr)


def new_storage(dev, nbytes, zero=False):
    """A fresh CPU storage of nbytes (zeroed if ``zero``)."""
    from fiamma._storage import Storage

    return Storage(nbytes, zero)


_get_f64 = lib.fm_get_f64
_get_i64 = lib.fm_get_i64


def read_float(t, index=0):
    """Element ``index`` (counted in elements from t's first, not through strides) as a float."""
    if index:
        return _get_f64(t._dtype.code, t._ptr + index * t._dtype.itemsize)
    return _get_f64(t._dtype.code, t._ptr)


def read_int(t, index=0):
    if index:
        return _get_i64(t._dtype.code, t._ptr + index * t._dtype.itemsize)
    return _get_i64(t._dtype.code, t._ptr)


_PTR = attrgetter("_ptr")


def cat_rows(dst, parts, rows, dst_row_bytes, part_row_bytes):
    """Contiguous concatenation: for each of ``rows`` rows, dst's row (dst_row_bytes wide) is
    the parts' rows (part_row_bytes[k] wide each, parts contiguous) side by side."""
    return _cat_bytes(len(parts), rows, dst._ptr, dst_row_bytes, list(map(_PTR, parts)),
                      part_row_bytes)


_from_buffer = ffi.from_buffer
_cast = ffi.cast


def buffer_address(obj):
    """The address of a C-contiguous Python buffer (a NumPy array): the cheapest way to it
    (``__array_interface__`` costs ~3 us). Raises TypeError/ValueError/BufferError for objects
    that do not export such a buffer."""
    return int(_cast("intptr_t", _from_buffer(obj)))


# ---- host memory for the CPU-only glue (files, shared memory, user C extensions) -------------

def host_buffer(address, nbytes):
    """A writable Python buffer over ``nbytes`` of host memory at ``address`` (alive while the
    memory's owner is)."""
    return ffi.buffer(_cast("char *", address), nbytes)


def pin_buffer(obj):
    """(keepalive, address) of a Python buffer (bytes, mmap, memoryview): the address is valid
    while ``keepalive`` lives, and an mmap cannot be closed under it."""
    buf = _from_buffer(obj)
    return buf, int(_cast("intptr_t", buf))


def host_memmove(address, src, nbytes):
    """Copy nbytes to host memory at ``address`` from a Python buffer or an integer address."""
    if isinstance(src, int):
        src = _cast("char *", src)
    ffi.memmove(_cast("char *", address), src, nbytes)


def c_pointer(ctype, address):
    """``address`` as a cffi pointer of C type ``ctype`` (``"float *"``), for cffi modules
    compiled by fiamma.utils.cext."""
    return _cast(ctype, address)
