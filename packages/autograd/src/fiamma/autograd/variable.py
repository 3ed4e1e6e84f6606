"""``torch.autograd.Variable``: the pre-0.4 wrapper kept for old programs.

Since PyTorch 0.4 every tensor records its history itself, so ``Variable(t)`` only returns a
detached alias of ``t`` (same storage, no history) with ``requires_grad`` set, and every tensor
counts as an instance of ``Variable``. Old tutorials still write it.

>>> import fiamma
>>> from fiamma.autograd import Variable
>>> v = Variable(fiamma.tensor([1.0, 2.0]), requires_grad=True)
>>> type(v).__name__, v.requires_grad, v.is_leaf, isinstance(v, Variable)
('Tensor', True, True, True)
"""

import warnings

import fiamma
from fiamma import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``: ``data.detach()`` with
    ``requires_grad`` set (an empty tensor of the default dtype when ``data`` is None).
    ``volatile`` has no effect (PyTorch's warning); use ``fiamma.no_grad()``."""

    def __new__(cls, data=None, requires_grad=False, volatile=False, _grad_fn=None, name=None):
        if _grad_fn is not None:
            raise TypeError("Variable: the internal _grad_fn argument is not supported; build "
                            "the tensor with an operation instead")
        if name is not None:
            raise TypeError("Variable: name= is not supported (fiamma tensors carry no name)")
        if data is None:
            var = fiamma.empty(0)
        elif isinstance(data, Tensor):
            var = data.detach()
        else:
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "torch.no_grad():` instead.", UserWarning, stacklevel=2)
        if requires_grad:
            var.requires_grad_(True)
        return var
