"""Array-module primitives of the fused family (contract.Backend documents each)."""

__all__ = ["FusedMixin"]


class FusedMixin:
    pass
