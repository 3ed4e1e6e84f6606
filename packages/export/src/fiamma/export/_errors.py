"""fiamma.export's errors."""

__all__ = ["UserError", "ConstraintViolationError", "DataDependentError"]


# one class for fiamma.cond's and fiamma.export's errors (PyTorch's torch._dynamo.exc.UserError)
from fiamma.compiler import UserError


class ConstraintViolationError(UserError):
    """The model specialises a size that ``dynamic_shapes`` declared dynamic, or the example
    contradicts a Dim (PyTorch's ``ConstraintViolationError``, raised as a UserError)."""


class DataDependentError(UserError):
    """The model's Python code reads a tensor's values (``if x.sum() > 0``, ``.item()``):
    an exported graph can't hold that branch (PyTorch raises
    ``GuardOnDataDependentSymNode``)."""
