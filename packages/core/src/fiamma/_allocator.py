"""Introspection and control of core's CPU allocator cache."""

from fiamma._backend import cpu as _cpu
from fiamma._storage import drain_small_pool

__all__ = ["cpu_memory_stats", "cpu_empty_cache", "cpu_set_cache_limit",
           "cpu_reset_peak_memory_stats"]


def cpu_memory_stats():
    """Bytes in use, cached, peak, and cache hits/misses of the CPU allocator.

    >>> import fiamma
    >>> sorted(fiamma.cpu_memory_stats())[:2]
    ['allocated_bytes', 'cache_hits']
    """
    return _cpu.alloc_stats()


def cpu_empty_cache():
    """Give every cached free block back to the system."""
    drain_small_pool()
    _cpu.empty_cache()


def cpu_set_cache_limit(nbytes):
    """Bound the bytes the allocator keeps cached (default 2 GiB); 0 disables the cache."""
    _cpu.set_cache_limit(nbytes)


def cpu_reset_peak_memory_stats():
    _cpu.reset_peak()
