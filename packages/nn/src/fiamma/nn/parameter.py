"""Parameter and Buffer: tensors that a Module registers when they are assigned to it."""

import fiamma
from fiamma._torch_function import disabled_torch_function_impl as _disabled

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"]


class Parameter(fiamma.Tensor):
    """A tensor that is a module parameter: assigning one to a Module attribute registers it
    (it appears in ``parameters()`` and ``state_dict()``). It shares storage with ``data`` and
    requires grad by default.

    >>> import fiamma
    >>> from fiamma.nn import Parameter
    >>> w = Parameter(fiamma.zeros(2))
    >>> w.requires_grad, w.is_leaf
    (True, True)
    """

    __torch_function__ = _disabled  # as PyTorch's: p * 2 is a plain Tensor

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = fiamma.empty(0)
        if not isinstance(data, fiamma.Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        # as PyTorch's: not seen by a subclass's __torch_function__
        return fiamma.Tensor._make_subclass(cls, data.detach(), requires_grad)

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happens in __new__

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__  # print(param) shows the header too, as in PyTorch

    def __reduce_ex__(self, proto):
        rv = (_rebuild_parameter, (self.detach(), self.requires_grad))
        # user attributes (p.foo = 1) are the state pickle sets on the rebuilt Parameter
        return rv + (dict(self.__dict__),) if self.__dict__ else rv

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = out
        return out


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


class Buffer(fiamma.Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute
    (``persistent=False`` keeps it out of ``state_dict``)."""

    __torch_function__ = _disabled

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = fiamma.empty(0)
        b = data.detach().as_subclass(cls)
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent=True):
        pass


class _Uninitialized:
    """PyTorch's placeholders of the lazy modules' (``nn.LazyLinear``, ...) parameters and
    buffers before the first forward. fiamma has no lazy modules, so no tensor is of these
    types (``isinstance`` checks answer False) and constructing one raises."""

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(
            f"nn.parameter.{cls.__name__}: fiamma has no lazy modules (nn.LazyLinear & co.); "
            "give the shapes when constructing the module")


class UninitializedParameter(_Uninitialized, Parameter):
    __doc__ = _Uninitialized.__doc__


class UninitializedBuffer(_Uninitialized, fiamma.Tensor):
    __doc__ = _Uninitialized.__doc__
    __torch_function__ = _disabled
