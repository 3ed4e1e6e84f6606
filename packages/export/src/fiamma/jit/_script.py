"""``fiamma.jit.script``: scripted modules and functions that run eagerly and save as traces.

TorchScript's language is not built. :func:`script` returns an object that runs the model's
own Python (a module keeps sharing its parameters and submodules with the original) and
remembers the inputs of its most recent call; ``.save(f)`` traces it on those inputs (or on
the ``example_inputs`` given to :func:`script`) into the file :func:`fiamma.jit.load` reads
without the model's code. A trace records the ops of that one call with sizes kept symbolic,
so a saved module gives the scripted one's results on any input taking the same Python
branches; a branch on tensor values (a :class:`TracerWarning` while tracing) makes ``save``
refuse instead of baking it in.
"""
import copy
import functools
import inspect
import textwrap
import warnings

import fiamma

__all__ = ["ScriptModule", "ScriptFunction", "script_object"]


def _example(example_inputs):
    """``script``'s ``example_inputs`` as (args, kwargs): a tensor, a tuple of inputs, or
    PyTorch's list of such tuples (the first is used)."""
    if example_inputs is None:
        return None
    if isinstance(example_inputs, fiamma.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, dict):  # PyTorch's {module or method: [inputs, ...]}
        example_inputs = next(iter(example_inputs.values()), None)
    if isinstance(example_inputs, list) and example_inputs and \
            isinstance(example_inputs[0], (tuple, list)):
        example_inputs = example_inputs[0]
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    raise TypeError(f"fiamma.jit.script: example_inputs should be a tensor, a tuple of inputs "
                    f"or a list of such tuples, got {type(example_inputs).__name__}")


def _remember(obj, args, kwargs):
    from fiamma.jit import is_tracing

    if not is_tracing():  # a trace's own call of the model is not an example
        obj.__dict__["_script_example"] = (args, kwargs)


def _trace_for_save(obj, target, what):
    from fiamma.jit import TracerWarning, trace

    example = obj.__dict__.get("_script_example")
    if example is None:
        raise RuntimeError(
            f"fiamma.jit.save: the scripted {what} has not been called yet: fiamma saves a "
            "scripted model as a trace of a call (TorchScript's compiler is not built), so call "
            "it once on typical inputs, or pass example_inputs= to fiamma.jit.script, before "
            "saving")
    args, kwargs = example
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        try:
            return trace(target, args, example_kwarg_inputs=kwargs or None)
        except TracerWarning as w:
            raise RuntimeError(
                f"fiamma.jit.save: the scripted {what} can't be saved as a trace: {w} (its "
                "Python control flow depends on tensor values, which a trace would bake in)"
            ) from None
        except TypeError as e:
            raise TypeError(f"fiamma.jit.save: the scripted {what} is saved as a trace of its "
                            f"last call: {e}") from None


def _forward_source(cls):
    """The source of ``cls.forward`` (dedented), or say why there is none."""
    fwd = getattr(cls, "forward", None)
    try:
        return textwrap.dedent(inspect.getsource(fwd))
    except (OSError, TypeError):
        raise RuntimeError(f"fiamma.jit: no code to show for {cls.__name__}: it has not been "
                           "called, and the source of its forward is not available") from None


class ScriptModule:
    """Mixed into the class of a scripted module (``fiamma.jit.script(module)``): the module's
    own ``forward`` runs, its state is the original's, and :meth:`save` writes a trace of its
    last call. ``original_name`` is the scripted class's name, as in PyTorch."""

    def __call__(self, *args, **kwargs):
        _remember(self, args, kwargs)
        return super().__call__(*args, **kwargs)

    def _traced(self):
        return _trace_for_save(self, self, f"module {self.original_name}")

    def save(self, f, _extra_files=None):
        """Write the module to ``f`` (a path or a binary file object) as
        :func:`fiamma.jit.save` does: the trace of its most recent call (or of ``script``'s
        ``example_inputs``), loadable with :func:`fiamma.jit.load` without this code."""
        from fiamma.jit import save

        if _extra_files:
            raise NotImplementedError("fiamma.jit.save: _extra_files is not supported")
        save(self, f)

    @property
    def code(self):
        """The Python-like listing of the trace :meth:`save` would write; where there is
        none to write (the module was not called yet, or its Python branches on tensor
        values, which a trace would bake in), the Python source of ``forward``: what runs,
        as TorchScript's ``code`` shows the compiled ``forward``."""
        return self._attr_or("code", self._code)

    def _code(self):
        try:
            return self._traced().code
        except (RuntimeError, TypeError):  # no trace to show: the Python that runs
            return _forward_source(type(self))

    @property
    def graph(self):
        """The :class:`fiamma.jit.Graph` of the trace :meth:`save` would write."""
        return self._attr_or("graph", lambda: self._traced().graph)

    def _attr_or(self, name, make):
        d = self.__dict__
        if name in d:
            return d[name]
        for table in ("_parameters", "_buffers", "_modules"):
            if name in d.get(table, ()):
                return d[table][name]
        return make()


_CLASSES = {}


def _script_class(cls):
    sc = _CLASSES.get(cls)
    if sc is None:
        sc = _CLASSES[cls] = type(cls.__name__, (ScriptModule, cls),
                                  {"__module__": cls.__module__,
                                   "__qualname__": cls.__qualname__,
                                   "original_name": cls.__name__})
    return sc


def _script_module(m, example):
    out = _script_class(type(m)).__new__(_script_class(type(m)))
    for k, v in m.__dict__.items():  # shared tensors and submodules, own tables
        out.__dict__[k] = copy.copy(v) if type(v) in (dict, set, list) or \
            isinstance(v, dict) else v
    out.__dict__.pop("_script_example", None)
    if example is not None:
        out.__dict__["_script_example"] = example
    return out


class ScriptFunction:
    """A scripted function (``@fiamma.jit.script``): calls the function and :meth:`save`
    writes a trace of its most recent call (its inputs must be tensors)."""

    def __init__(self, fn, example):
        functools.update_wrapper(self, fn)
        self.__dict__["_script_example"] = example
        self.__dict__["_inferred"] = _inferred_tensor_params(fn)

    def __call__(self, *args, **kwargs):
        if self._inferred:
            _check_inferred(self.__wrapped__, self._inferred, args, kwargs)
        _remember(self, args, kwargs)
        return self.__wrapped__(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # still a function when stored on a class
        return self if obj is None else functools.partial(self, obj)

    def _traced(self):
        return _trace_for_save(self, self.__wrapped__, f"function {self.__name__}")

    def save(self, f):
        """Write the trace of the last call to ``f``, as :meth:`ScriptModule.save`."""
        from fiamma.jit import save

        save(self, f)

    @property
    def code(self):
        """The listing of the trace :meth:`save` would write; before a first call (or for a
        function branching on tensor values), the function's Python source."""
        try:
            return self._traced().code
        except (RuntimeError, TypeError):  # no trace to show: the Python that runs
            try:
                return textwrap.dedent(inspect.getsource(self.__wrapped__))
            except (OSError, TypeError):
                raise RuntimeError(f"fiamma.jit: no code to show for {self.__name__}: it has "
                                   "not been called, and its source is not available") from None

    @property
    def graph(self):
        return self._traced().graph


def _inferred_tensor_params(fn):
    """TorchScript's rule: a parameter without an annotation (and without a default) is a
    Tensor. Returns [(position, name)] of those, besides a leading ``self``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    out = []
    for i, p in enumerate(sig.parameters.values()):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        if i == 0 and p.name == "self":
            continue
        if p.annotation is p.empty and p.default is p.empty:
            out.append((i, p.name))
    return out


def _check_inferred(fn, inferred, args, kwargs):
    """PyTorch's error for a non-tensor given to a parameter inferred as a Tensor."""
    for i, name in inferred:
        if i < len(args):
            v = args[i]
        elif name in kwargs:
            v = kwargs[name]
        else:
            continue
        if not isinstance(v, fiamma.Tensor):
            raise RuntimeError(
                f"{fn.__name__}() Expected a value of type 'Tensor (inferred)' for argument "
                f"'{name}' but instead found type '{type(v).__name__}'.\n"
                f"Inferred '{name}' to be of type 'Tensor' because it was not annotated with an "
                f"explicit type.\nPosition: {i}\nValue: {v!r}")


def script_object(obj, example_inputs):
    example = _example(example_inputs)
    if isinstance(obj, (ScriptModule, ScriptFunction)):
        if example is not None:
            obj.__dict__["_script_example"] = example
        return obj
    try:
        from fiamma import nn
    except ImportError:
        nn = None
    if nn is not None and isinstance(obj, nn.Module):
        return _script_module(obj, example)
    if isinstance(obj, (type(_example), functools.partial)) or \
            type(obj).__name__ == "builtin_function_or_method":
        return ScriptFunction(obj, example)
    return obj  # another callable (a class, a transform object): run as is
