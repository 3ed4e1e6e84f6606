"""``fiamma.backends.cpu``."""


def get_cpu_capability():
    """The SIMD level of fiamma's kernels in PyTorch's words: "DEFAULT" (core is compiled for
    the architecture's baseline, vectorised by the compiler; OpenBLAS picks its own kernels
    at run time)."""
    return "DEFAULT"
