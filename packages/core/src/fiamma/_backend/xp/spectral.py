"""Array-module primitives of the spectral family (contract.Backend documents each)."""

__all__ = ["SpectralMixin"]


class SpectralMixin:
    pass
