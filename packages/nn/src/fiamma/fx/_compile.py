"""``fiamma.compile(fn, backend=callable)``: a user compiler backend gets a graph.

PyTorch's ``torch.compile`` hands a custom backend ``backend(gm, example_inputs)`` an FX
``GraphModule`` of the code it captured and runs what the backend returns. fiamma captures
with :func:`fiamma.fx.symbolic_trace` on the first call (and again when the arguments' shapes,
dtypes, non-tensor values or the module's training flag change, as dynamo's guards would),
passes the backend the ``GraphModule`` and the call's arguments, and calls the backend's
result with the arguments from then on.

Where the function cannot be captured as one graph (data-dependent control flow such as
``if x.sum() < 0``, calls out of the tensor world such as ``x.numpy()``), PyTorch splits it
into several graphs around the Python it cannot capture; fiamma runs such a function eagerly,
as written, and warns once that the backend was not called for it. Results are those of eager
execution either way.
"""

import functools
import inspect
import warnings

import fiamma
from fiamma import nn

__all__ = ["compile_with_backend", "OptimizedModule"]


def _guard_key(args, kwargs, module):
    """What a captured graph depends on: tensors' shapes, dtypes, devices and
    ``requires_grad``; other values themselves (by identity when unhashable); the module's
    training flag."""
    def one(v):
        if isinstance(v, fiamma.Tensor):
            return ("T", tuple(v.shape), v.dtype, str(v.device), v.requires_grad)
        if isinstance(v, (list, tuple)):
            return (type(v).__name__,) + tuple(one(x) for x in v)
        try:
            hash(v)
        except TypeError:
            return ("id", id(v))
        return ("V", type(v), v)

    key = tuple(one(a) for a in args) + tuple((k, one(v)) for k, v in sorted(kwargs.items()))
    if module is not None:
        key += (("training",) + tuple(m.training for m in module.modules()),)
    return key


class _Compiled:
    """Calls ``fn`` through the backend's compiled graph (one per guard key)."""

    def __init__(self, fn, backend, module=None):
        self.fn = fn
        self.backend = backend
        self.module = module
        self.cache = {}
        self.warned = False
        target = module.forward if module is not None else fn
        try:
            self.signature = inspect.signature(target)
        except (TypeError, ValueError):
            self.signature = None

    def _capture(self, args):
        from fiamma.fx import symbolic_trace

        root = self.module if self.module is not None else self.fn
        try:
            gm = symbolic_trace(root)
        except Exception as e:  # anything the tracer cannot follow: run eagerly
            if not self.warned:
                self.warned = True
                name = getattr(root, "__qualname__", type(root).__name__)
                warnings.warn(f"fiamma.compile: {name} could not be captured as one graph "
                              f"({type(e).__name__}: {e}); it runs eagerly, without calling "
                              "the backend (PyTorch would split it into several graphs)",
                              stacklevel=4)
            return None
        example = [a for a in args if isinstance(a, fiamma.Tensor)]
        compiled = self.backend(gm, example)
        if not callable(compiled):
            raise RuntimeError(f"fiamma.compile: the backend {self.backend!r} returned "
                               f"{type(compiled).__name__}, expected a callable")
        return compiled

    def __call__(self, *args, **kwargs):
        if kwargs and self.signature is not None:
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError:
                bound = None
            if bound is not None:
                bound.apply_defaults()
                if not bound.kwargs:
                    args, kwargs = tuple(bound.args), {}
        key = _guard_key(args, kwargs, self.module)
        if key not in self.cache:
            self.cache[key] = self._capture(args)
        compiled = self.cache[key]
        if compiled is None:
            return self.fn(*args, **kwargs)
        return compiled(*args, **kwargs)

    def reset(self):
        self.cache.clear()


class OptimizedModule(nn.Module):
    """A module compiled with a custom backend (PyTorch's ``OptimizedModule``): calls go
    through the backend's graph; ``_orig_mod`` is the original module, whose parameters and
    buffers these are (so ``state_dict`` keys start with ``_orig_mod.``, as PyTorch's)."""

    def __init__(self, mod, backend):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_fiamma_compiled", _Compiled(mod, backend, module=mod))

    def forward(self, *args, **kwargs):
        return self._fiamma_compiled(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


def compile_with_backend(model, backend):
    """``model`` (a Module or a function) compiled by the callable ``backend``."""
    if isinstance(model, nn.Module):
        return OptimizedModule(model, backend)
    compiled = _Compiled(model, backend)

    @functools.wraps(model)
    def wrapper(*args, **kwargs):
        return compiled(*args, **kwargs)

    wrapper._torchdynamo_orig_callable = model
    return wrapper
