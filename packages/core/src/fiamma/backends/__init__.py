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

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkl", "mkldnn", "mps", "nnpack", "openmp",
           "opt_einsum", "quantized", "xnnpack"]
