"""The CPU allocator as the ops use it."""

import numpy as np

import fiamma


def test_small_results_reuse_blocks_without_the_c_allocator():
    # a loop of small ops recycles its result blocks through the Python-side free list: after
    # the first results, the C allocator is not called (each call costs ~0.1 us). The free list
    # of a size is started by whichever op first makes a result of that size (here the
    # operator fast path, for a size nothing else has used).
    x = fiamma.from_numpy(np.ones(23, np.float32))  # 92 bytes: a size used nowhere else
    y = fiamma.from_numpy(np.ones(23, np.float32))
    z = x + y
    z = z + y
    before = fiamma.cpu_memory_stats()
    for _ in range(200):
        z = z + y
    after = fiamma.cpu_memory_stats()
    calls = lambda s: s["cache_hits"] + s["cache_misses"]  # noqa: E731
    assert calls(after) - calls(before) <= 2
    assert z[0].item() == 203.0
