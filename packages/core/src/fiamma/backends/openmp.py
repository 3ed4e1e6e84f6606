"""``fiamma.backends.openmp``: fiamma's compute-bound C kernels are threaded with OpenMP."""


def is_available():
    """Whether fiamma's kernels use OpenMP (yes: core is always built with it)."""
    return True
