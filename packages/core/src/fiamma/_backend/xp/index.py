"""Array-module primitives of the index family (contract.Backend documents each)."""

__all__ = ["IndexMixin"]


class IndexMixin:
    pass
