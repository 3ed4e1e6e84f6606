"""``fiamma.backends.mkl``: Intel MKL (fiamma uses OpenBLAS instead)."""


def is_available():
    """Whether MKL is used (no: fiamma's BLAS is OpenBLAS)."""
    return False
