"""fiamma.backends: PyTorch's ``torch.backends`` flags and queries.

fiamma runs on its own CPU kernels (C with OpenMP, OpenBLAS for matmul): there is no MPS,
oneDNN (mkldnn) or MKL, so their ``is_available()`` answer False and their flags, which a
program may read and set as in PyTorch, change nothing. ``fiamma.backends.cudnn`` describes
the libcudnn found at run time, which the cuda device's convolutions use, and its flags
(``fiamma.backends.cudnn.benchmark = True``) steer them. ``fiamma.backends.openmp.is_available()``
is True.

>>> import fiamma
>>> fiamma.backends.cudnn.benchmark = True
>>> fiamma.backends.mps.is_available(), fiamma.backends.cuda.is_built()
(False, False)
"""

import contextlib

from fiamma.backends import (  # noqa: F401
    cpu,
    cuda,
    cudnn,
    mha,
    mkl,
    mkldnn,
    mps,
    nnpack,
    openmp,
    opt_einsum,
    quantized,
    xnnpack,
)


def flags_frozen():
    """False: fiamma's backend flags may always be set directly (PyTorch freezes them only
    after its private ``disable_global_flags()``, which fiamma does not have)."""
    return False


@contextlib.contextmanager
def __allow_nonbracketed_mutation():
    """A context in which backend flags may be set directly (PyTorch's private helper, which
    libraries use around ``cudnn.deterministic = ...``): they always may in fiamma."""
    yield


__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "nnpack", "openmp",
           "opt_einsum", "quantized", "xnnpack"]
