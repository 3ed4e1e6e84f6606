"""Helpers shared by the tests of the cuda backend's own kernels (test_cuda_kernels.py,
test_cuda_lowp.py, test_cuda_cudnn.py): the backend a test runs on, skipped where it lacks the
kernels under test, and the checks on its fast-path counters (``fast_path_calls``: launches per
kernel; ``fast_path_errors``: kernels that failed to build or launch).

Imported by name like conftest (pytest puts this folder on sys.path, also when the tests run
from the installed wheel)::

    from _cuda_helpers import backend_with, calls, served, total
"""

import pytest

import fiamma
from fiamma import _backend


def backend_with(device, attr, what):
    """The backend of ``device``; the test is skipped when the backend has no ``attr`` (its own
    ``what``: a CPU device has no cuda kernels)."""
    b = _backend.backend_for(fiamma.device(device))
    if not hasattr(b, attr):
        pytest.skip(f"the {device} backend has no {what}")
    return b


def calls(b, name):
    """How many times ``name``'s kernel served an op on backend ``b``."""
    return b.fast_path_calls.get(name, 0)


def total(b, names):
    """``calls`` summed over the kernels ``names``."""
    return sum(calls(b, n) for n in names)


def served(b, name, before):
    """No kernel failed, and ``name``'s kernel (or, given a tuple, any of them: their total)
    served an op since its count was ``before``."""
    assert not b.fast_path_errors, b.fast_path_errors
    names = name if isinstance(name, tuple) else (name,)
    assert total(b, names) > before, (name, b.fast_path_calls)
