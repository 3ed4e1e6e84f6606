"""Introspection and control of core's CPU allocator cache."""

from fiamma._lib import ffi, lib
from fiamma._storage import drain_small_pool

__all__ = ["cpu_memory_stats", "cpu_empty_cache", "cpu_set_cache_limit",
           "cpu_reset_peak_memory_stats"]


def cpu_memory_stats():
    """Bytes in use, cached, peak, and cache hits/misses of the CPU allocator.

    >>> import fiamma
    >>> sorted(fiamma.cpu_memory_stats())[:2]
    ['allocated_bytes', 'cache_hits']
    """
    out = ffi.new("int64_t[6]")
    lib.fm_alloc_stats(out)
    return {"allocated_bytes": out[0], "cached_bytes": out[1], "peak_allocated_bytes": out[2],
            "cache_hits": out[3], "cache_misses": out[4], "cache_limit_bytes": out[5]}


def cpu_empty_cache():
    """Give every cached free block back to the system."""
    drain_small_pool()
    lib.fm_alloc_empty_cache()


def cpu_set_cache_limit(nbytes):
    """Bound the bytes the allocator keeps cached (default 2 GiB); 0 disables the cache."""
    lib.fm_alloc_set_cache_limit(int(nbytes))


def cpu_reset_peak_memory_stats():
    lib.fm_alloc_reset_peak()
