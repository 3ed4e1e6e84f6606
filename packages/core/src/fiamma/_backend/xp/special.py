"""Array-module primitives of the special family (contract.Backend documents each)."""

__all__ = ["SpecialMixin"]


class SpecialMixin:
    pass
