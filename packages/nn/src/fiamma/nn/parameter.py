"""Parameter and Buffer: tensors that a Module registers when they are assigned to it."""

import fiamma
from fiamma.overrides import disabled_torch_function_impl as _disabled

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer",
           "UninitializedTensorMixin", "is_lazy"]


class _ParameterMeta(type(fiamma.Tensor)):
    """``isinstance(t, Parameter)`` also holds for a ``__torch_dispatch__`` subclass instance
    made a parameter (PyTorch's custom-tensor parameters carry ``_is_param``)."""

    def __instancecheck__(cls, instance):
        if super().__instancecheck__(instance):
            return True
        return cls is Parameter and isinstance(instance, fiamma.Tensor) and \
            getattr(instance, "_is_param", False)


class Parameter(fiamma.Tensor, metaclass=_ParameterMeta):
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
        if type(data).__torch_dispatch__ is not fiamma.Tensor.__torch_dispatch__ and \
                not issubclass(type(data), Parameter):
            # a __torch_dispatch__ subclass stays itself, marked as a parameter (PyTorch's
            # custom-tensor path: its own detach, then requires_grad)
            t = data.detach().requires_grad_(requires_grad)
            if type(t) is not type(data):
                raise RuntimeError(
                    f"Creating a Parameter from an instance of type {type(data).__name__} "
                    "requires that detach() returns an instance of the same type, but return "
                    f"type {type(t).__name__} was found instead. To use the type as a "
                    "Parameter, please correct the detach() semantics defined by its "
                    "__torch_dispatch__() implementation.")
            t._is_param = True
            return t
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


_UNINIT_MSG = ("Can't access the shape of an uninitialized parameter or buffer. This error "
               "usually happens in `load_state_dict` when trying to load an uninitialized "
               "parameter into an initialized one. Call `forward` to initialize the parameters "
               "before accessing their attributes.")


class UninitializedTensorMixin:
    """The placeholders of the lazy modules' (``nn.LazyLinear``, ...) parameters and buffers
    before the first forward: a tensor with no elements that knows its dtype and device, whose
    shape cannot be asked. ``materialize(shape)`` gives it memory of that shape in place and
    turns it into ``cls_to_become`` (a Parameter or a plain Tensor), so optimizers and modules
    that already hold the object keep holding the real tensor."""

    cls_to_become = None
    _lazy_placeholder = True  # fiamma.save writes it as PyTorch does: its class by name

    def materialize(self, shape, device=None, dtype=None):
        """Give the placeholder uninitialised memory of ``shape`` (on ``device`` with ``dtype``,
        by default its own) and make it a ``cls_to_become``."""
        if isinstance(shape, int):
            shape = (shape,)
        data = self.data
        new = fiamma.empty(tuple(shape), device=data.device if device is None else device,
                           dtype=data.dtype if dtype is None else dtype)
        with fiamma.no_grad():
            self.data = new
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(_UNINIT_MSG)

    def size(self, dim=None):
        raise RuntimeError(_UNINIT_MSG)

    def numel(self):
        raise ValueError(_use_msg("numel"))

    def dim(self):
        raise ValueError(_use_msg("dim"))

    def share_memory_(self):
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
            "initialize the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (_rebuild_uninitialized, (type(self), self.requires_grad, self.dtype))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = type(self)(self.requires_grad, self.device, self.dtype)
        memo[id(self)] = out
        return out


def _use_msg(name):
    return (f"Attempted to use an uninitialized parameter in {name}. This error happens when "
            "you are using a `LazyModule` or explicitly manipulating "
            "`nn.parameter.UninitializedParameter` objects. When using LazyModules call "
            "`forward` with a dummy batch to initialize the parameters before calling torch "
            "functions")


def _rebuild_uninitialized(cls, requires_grad, dtype):
    return cls(requires_grad, None, dtype)


def is_lazy(param):
    """Whether ``param`` is an uninitialized parameter or buffer of a lazy module."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter of a lazy module before its first forward (becomes a ``Parameter``).

    >>> from fiamma.nn.parameter import UninitializedParameter
    >>> p = UninitializedParameter()
    >>> p.materialize((2, 3)); type(p).__name__, tuple(p.shape)
    ('Parameter', (2, 3))
    """

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        p = fiamma.empty(0, device=device, dtype=dtype).as_subclass(cls)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, fiamma.Tensor):
    """A buffer of a lazy module before its first forward (becomes a plain ``Tensor``)."""

    cls_to_become = fiamma.Tensor
    __torch_function__ = _disabled  # an internal subclass: leaves the protocol off

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        b = fiamma.empty(0, device=device, dtype=dtype).as_subclass(cls)
        if requires_grad:
            b.requires_grad_(True)
        b.persistent = persistent
        return b

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass
