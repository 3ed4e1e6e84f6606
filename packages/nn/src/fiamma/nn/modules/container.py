"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""

import operator
from collections import OrderedDict
from collections.abc import Mapping
from itertools import islice

from fiamma.nn.modules.module import Module, _addindent
from fiamma.nn.parameter import Parameter

__all__ = ["Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict"]


def _index(i, n, what):
    i = operator.index(i)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range for {what} of length {n}")
    return i + n if i < 0 else i


class Container(Module):
    """Deprecated: a Module whose keyword arguments become its submodules
    (``Container(fc=nn.Linear(2, 2))``); subclass :class:`Module` instead. Warns as PyTorch."""

    def __init__(self, **kwargs):
        import warnings

        super().__init__()
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now "
                      "implemented in `nn.Module`. Subclass that instead.", FutureWarning,
                      stacklevel=2)
        for key, value in kwargs.items():
            self.add_module(key, value)


class Sequential(Module):
    """Modules applied one after another (``Sequential(a, b)`` or
    ``Sequential(OrderedDict(name=module))``).

    >>> import fiamma
    >>> from fiamma import nn
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    >>> net(fiamma.ones(2, 3)).shape
    fiamma.Size([2, 1])
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        i = _index(idx, len(self), "Sequential")
        return next(islice(self._modules.values(), i, None))

    def __setitem__(self, idx, module):
        i = _index(idx, len(self), "Sequential")
        setattr(self, list(self._modules)[i], module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in list(self._modules)[idx]:
                del self._modules[k]
        else:
            del self._modules[list(self._modules)[_index(idx, len(self), "Sequential")]]
        # keep the names 0..n-1, as PyTorch does
        mods = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m
        return self

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        out = Sequential()
        for m in self:
            out.append(m)
        for m in other:
            out.append(m)
        return out


class ModuleList(Module):
    """A list of modules whose parameters are registered (index like a list)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(idx, len(self), "ModuleList")]
        self._modules.clear()
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __iadd__(self, modules):
        return self.extend(modules)

    def __repr__(self):
        # PyTorch's form: a run of consecutive children that print alike is one line,
        # "(i-j): n x <repr>"
        runs = []  # [first index, last index, repr]
        for i, m in enumerate(self._modules.values()):
            r = repr(m)
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        if not runs:
            return self._get_name() + "()"
        lines = []
        for a, b, r in runs:
            head = f"({a})" if a == b else f"({a}-{b}): {b - a + 1} x"
            lines.append(_addindent(f"{head}{':' if a == b else ''} {r}", 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is a container and has no forward(); iterate "
                                  "over it in the parent's forward()")


class ModuleDict(Module):
    """A dict of modules whose parameters are registered (insertion order kept)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for item in items:
            k, m = item
            self[k] = m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is a container and has no forward()")


def _param_line(key, p, typename):
    import fiamma

    if not isinstance(p, fiamma.Tensor):
        return f"  ({key}): Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    dev = f" ({p.device})" if p.device.type != "cpu" else ""
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    name = p.type() if typename else p.dtype
    return f"  ({key}): {kind} containing: [{name} of size {size}{dev}]"


class ParameterList(Module):
    """A list of parameters (plain tensors are wrapped as Parameters)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _wrap(self, v):
        import fiamma

        if isinstance(v, fiamma.Tensor) and not isinstance(v, Parameter):
            v = Parameter(v)
        return v

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self), "ParameterList")))

    def __setitem__(self, idx, value):
        setattr(self, str(_index(idx, len(self), "ParameterList")), self._wrap(value))

    def append(self, value):
        self._size += 1
        setattr(self, str(self._size - 1), self._wrap(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self):
        # PyTorch's lines: indented two more, the dtype (ParameterDict: the tensor type)
        return "\n".join(_param_line(i, self[i], False) for i in range(len(self)))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterList is a container and has no forward()")


class ParameterDict(Module):
    """A dict of parameters (plain tensors are wrapped as Parameters)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, value):
        import fiamma

        self._keys[key] = None
        if isinstance(value, fiamma.Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def update(self, parameters):
        """From a mapping (a plain one in sorted key order, as PyTorch; an OrderedDict or
        ParameterDict in its order) or an iterable of (key, value) pairs."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = parameters.items()
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())
        else:
            items = parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self):
        return "\n".join(_param_line(k, v, True) for k, v in self.items())

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ParameterDict is a container and has no forward()")
