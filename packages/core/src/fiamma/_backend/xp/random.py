"""Array-module primitives of the random family (contract.Backend documents each)."""

__all__ = ["RandomMixin"]


class RandomMixin:
    pass
