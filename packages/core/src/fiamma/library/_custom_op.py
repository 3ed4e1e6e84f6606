"""``custom_op``: a Python function made an operator (``CustomOpDef``)."""

from . import _op
from ._schema import infer_schema, parse_schema

__all__ = ["CustomOpDef", "custom_op"]

_DEVICE_TYPES = ("cpu", "cuda", "meta", "xp")


def _device_list(device_types, what):
    if device_types is None:
        return [None]
    if isinstance(device_types, str):
        device_types = [device_types]
    out = []
    for d in device_types:
        d = str(getattr(d, "type", d)).split(":")[0]
        if d not in _DEVICE_TYPES:
            raise ValueError(f"{what}: unknown device type {d!r} (expected one of "
                             f"{', '.join(_DEVICE_TYPES[:3])})")
        out.append(d)
    return out


def _check_name(name, what="custom_op"):
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise ValueError(f"{what}: expected a qualified name 'namespace::op_name' "
                         f"(for example 'mylib::foo'), got {name!r}")
    ns, op = name.split("::")
    if not ns.isidentifier() or not op.replace(".", "_").isidentifier():
        raise ValueError(f"{what}: {name!r}: the namespace and the op name must be Python "
                         "identifiers")
    return ns, op


class CustomOpDef:
    """An operator made from a Python function by :func:`custom_op`. Calling it calls the
    operator; ``register_kernel``, ``register_fake`` and ``register_autograd`` add to it."""

    def __init__(self, namespace, name, schema, fn):
        self._namespace = namespace
        self._name = name
        self._schema = schema
        self._init_fn = fn
        qual = f"{namespace}::{name}"
        if qual in _op._REGISTRY and "default" in _op._REGISTRY[qual]._overloads:
            old = _op._REGISTRY[qual]._overloads["default"]
            if old._entry.custom is None:
                raise RuntimeError(f"custom_op: {qual} is already defined by a Library "
                                   f"({old._schema})")
            _op._drop(old)  # redefinition (a re-run cell or script): the new one wins
        self._opoverload = _op.register_schema(qual + schema)
        self._opoverload._entry.custom = self
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    @property
    def _qualname(self):
        return f"{self._namespace}::{self._name}"

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"

    def __call__(self, *args, **kwargs):
        return self._opoverload(*args, **kwargs)

    def register_kernel(self, device_types, fn=None, /):
        """Use ``fn`` as the implementation for ``device_types`` ("cpu", "cuda" or a list;
        None: all devices). Usable as a decorator."""
        def inner(fn):
            entry = self._opoverload._entry
            for d in _device_list(device_types, f"{self._qualname}.register_kernel"):
                key = "CompositeExplicitAutograd" if d is None else _op._DEVICE_KEYS[d]
                entry.kernels[key] = fn
            return fn
        return inner if fn is None else inner(fn)

    def register_fake(self, fn, /):
        """The fake (meta) implementation: given inputs, it makes outputs of the right shape,
        dtype and device without computing them (``x.new_empty(...)``); used on the meta
        device and by :func:`opcheck`. Usable as a decorator."""
        self._opoverload._entry.fake = fn
        return fn

    def register_autograd(self, backward, /, *, setup_context=None):
        """Make the operator differentiable: ``setup_context(ctx, inputs, output)`` saves what
        ``backward(ctx, *grad_outputs)`` needs; ``backward`` returns one gradient per input
        (None for non-Tensor inputs), written in differentiable operations."""
        _check_backward_args(self._qualname, backward, setup_context)
        self._opoverload._entry.autograd = (backward, setup_context)
        self._opoverload._entry._fn_cls = None

    def set_kernel_enabled(self, device_type, enabled=True):
        """Switch the kernel registered for ``device_type`` off (the default runs) and on."""
        entry = self._opoverload._entry
        if enabled:
            entry.disabled.discard(device_type)
        else:
            entry.disabled.add(device_type)

    def register_autocast(self, device_type, cast_inputs):
        raise NotImplementedError("CustomOpDef.register_autocast: fiamma has no autocast "
                                  "dispatch for custom operators")

    def register_vmap(self, func=None):
        raise NotImplementedError("CustomOpDef.register_vmap: fiamma.func.vmap does not "
                                  "dispatch to custom operators")

    def register_torch_dispatch(self, *args, **kwargs):
        raise NotImplementedError("CustomOpDef.register_torch_dispatch: fiamma has no "
                                  "__torch_dispatch__")


def _check_backward_args(name, backward, setup_context):
    if not callable(backward):
        raise TypeError(f"{name}.register_autograd: expected backward to be a function, got "
                        f"{type(backward).__name__}")
    if setup_context is not None and not callable(setup_context):
        raise TypeError(f"{name}.register_autograd: expected setup_context to be a function "
                        f"or None, got {type(setup_context).__name__}")


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None, tags=None):
    """Wrap ``fn`` as the operator ``name`` ("namespace::op_name"), as a decorator or a call.

    ``mutates_args`` names the Tensor arguments ``fn`` writes in place ("unknown": any);
    ``device_types`` limits ``fn`` to those devices; ``schema`` overrides the one inferred
    from the annotations.

    >>> import fiamma
    >>> @custom_op("docs::twice", mutates_args=())
    ... def twice(x: fiamma.Tensor) -> fiamma.Tensor:
    ...     return x * 2
    >>> twice(fiamma.ones(2)).tolist(), fiamma.ops.docs.twice(fiamma.ones(1)).tolist()
    ([2.0, 2.0], [2.0])
    """
    ns, opname = _check_name(name)
    if mutates_args is None or (isinstance(mutates_args, str) and mutates_args != "unknown"):
        raise ValueError(f"custom_op({name!r}): mutates_args must be 'unknown' or an "
                         f"iterable of argument names, got {mutates_args!r}")

    def inner(fn):
        if not callable(fn):
            raise TypeError(f"custom_op({name!r}): expected a function, got "
                            f"{type(fn).__name__}")
        if schema is None:
            sch = infer_schema(fn, mutates_args=mutates_args)
        else:
            sch = schema
            parsed = parse_schema(sch, require_name=False)
            if parsed.name:
                raise ValueError(f"custom_op({name!r}): schema= must leave the name out "
                                 f"(as '(Tensor x) -> Tensor'), got {schema!r}")
            if mutates_args != "unknown":
                writes = {a.name for a in parsed.arguments if a.is_write}
                if writes != set(mutates_args):
                    raise ValueError(f"custom_op({name!r}): mutates_args {set(mutates_args)} "
                                     f"differ from the schema's mutated arguments {writes}")
        op = CustomOpDef(ns, opname, sch, fn)
        for a in op._opoverload._schema.returns:
            if a.alias_info is not None:
                raise ValueError(f"custom_op({name!r}): outputs may not alias inputs "
                                 f"(schema {sch})")
        op.register_kernel(device_types, fn)
        return op

    if fn is None:
        return inner
    return inner(fn)

