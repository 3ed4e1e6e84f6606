"""Array-module primitives of the sorting family (contract.Backend documents each)."""

__all__ = ["SortingMixin"]


class SortingMixin:
    pass
