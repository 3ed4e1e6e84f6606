"""The number of threads core's kernels use (PyTorch's ``torch.set_num_threads``)."""

import numbers

from fiamma._backend import cpu as _cpu

__all__ = ["get_num_threads", "set_num_threads"]


def get_num_threads():
    """The number of threads parallel kernels (matmul, convolutions, reductions, sort, ...)
    use; by default the number of CPU cores OpenBLAS and OpenMP see (``OMP_NUM_THREADS`` and
    ``OPENBLAS_NUM_THREADS`` are honoured at import).

    >>> import fiamma
    >>> fiamma.get_num_threads() >= 1
    True
    """
    return _cpu.get_num_threads()


def set_num_threads(num_threads):
    """Use ``num_threads`` threads in parallel kernels from now on: OpenBLAS's thread count and
    the OpenMP team size of fiamma's own kernels. As in PyTorch, the setting is made from the
    calling thread (OpenMP keeps it per thread: set it in each Python thread that runs ops).

    >>> import fiamma
    >>> n = fiamma.get_num_threads()
    >>> fiamma.set_num_threads(1); fiamma.get_num_threads()
    1
    >>> fiamma.set_num_threads(n)
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, numbers.Integral):
        raise TypeError("set_num_threads: expected an int number of threads, got "
                        f"{type(num_threads).__name__}")
    n = int(num_threads)
    if n < 1:
        raise ValueError(f"set_num_threads: expected a positive number of threads, got {n}")
    _cpu.set_num_threads(min(n, 256))  # more would only oversubscribe the machine
