"""Kernels registered by users for their own tv_tensor classes (torchvision's
``register_kernel``).

Every public functional of ``transforms.v2.functional`` is a dispatching wrapper: plain
tensors, PIL images and the built-in tv_tensors (and their subclasses) go to fiamma's own
kernels; an instance of a user ``TVTensor`` subclass goes to the kernel registered for the
nearest class in its MRO, and without one the functional raises ``TypeError`` (a v2
transform passes such an input through unchanged instead, as torchvision's do).
"""
import contextlib
import functools
import inspect
import threading

from fiamma.vision import tv_tensors as tv

_BUILTIN = frozenset({tv.TVTensor, tv.Image, tv.Video, tv.Mask, tv.BoundingBoxes,
                      tv.KeyPoints})
_NAMESPACE = "fiamma.vision.transforms.v2.functional"

# {dispatching functional: {user tv_tensor class: kernel}}
_KERNEL_REGISTRY = {}
_state = threading.local()


@contextlib.contextmanager
def passthrough_unregistered():
    """Inside, a user tv_tensor without a registered kernel is returned unchanged by the
    functionals (what the v2 transforms do) instead of raising."""
    depth = getattr(_state, "depth", 0)
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth = depth


def is_user_tv_tensor(x):
    """True for instances of a TVTensor subclass that derives from no built-in tv_tensor."""
    if not isinstance(x, tv.TVTensor):
        return False
    for cls in type(x).__mro__:
        if cls in _BUILTIN:
            return cls is tv.TVTensor
    return False          # pragma: no cover - every TVTensor has TVTensor in its MRO


def _call_registered(wrapper, fn, inpt, args, kwargs):
    registry = _KERNEL_REGISTRY.get(wrapper, {})
    for cls in type(inpt).__mro__:
        kernel = registry.get(cls)
        if kernel is not None:
            # torchvision passes every further parameter by keyword, defaults filled in
            bound = wrapper.__signature__.bind(inpt, *args, **kwargs)
            bound.apply_defaults()
            params = dict(bound.arguments)
            params.pop(next(iter(params)))
            return kernel(inpt, **params)
        if cls in _BUILTIN:
            if cls is not tv.TVTensor:
                return fn(inpt, *args, **kwargs)
            break
    if getattr(_state, "depth", 0):
        return inpt
    raise TypeError(f"Functional F.{fn.__name__} supports inputs of type "
                    f"{[c.__name__ for c in registry] + ['Tensor', 'PIL.Image.Image']} and "
                    f"the built-in tv_tensors, but got {type(inpt)} instead (register a kernel "
                    f"for it with F.register_kernel)")


def dispatching(fn):
    """``fn`` as a functional that consults the kernels registered for user tv_tensors."""
    builtin, tvt = _BUILTIN, tv.TVTensor

    @functools.wraps(fn)
    def wrapper(inpt, *args, **kwargs):
        if type(inpt) in builtin or not isinstance(inpt, tvt):
            return fn(inpt, *args, **kwargs)
        return _call_registered(wrapper, fn, inpt, args, kwargs)

    wrapper.__signature__ = inspect.signature(fn)
    wrapper._fiamma_dispatching = True
    return wrapper


def install(namespace, names):
    """Replace the functions ``names`` of a module's ``namespace`` by dispatching wrappers
    (aliases share one wrapper, so registering under either name covers both)."""
    done = {}
    for name in names:
        obj = namespace.get(name)
        if not inspect.isfunction(obj) or getattr(obj, "_fiamma_dispatching", False):
            continue
        if id(obj) not in done:
            done[id(obj)] = dispatching(obj)
        namespace[name] = done[id(obj)]


def register_kernel(functional, tv_tensor_cls):
    """Decorate a kernel to run for ``tv_tensor_cls`` (a user subclass of
    ``tv_tensors.TVTensor``) when ``functional`` (a ``transforms.v2.functional`` function,
    or its name) is called on one; the v2 transforms using that functional use it too. The
    kernel gets the tv_tensor itself and the functional's other parameters as keywords, so
    it should accept ``*args, **kwargs``; it is returned unchanged.

        >>> import fiamma
        >>> from fiamma.vision import tv_tensors
        >>> from fiamma.vision.transforms.v2 import functional as F
        >>> class Flat(tv_tensors.TVTensor):
        ...     pass
        >>> @F.register_kernel("hflip", Flat)
        ... def hflip_flat(x, *args, **kwargs):
        ...     return tv_tensors.wrap(x.flip(-1), like=x)
        >>> F.hflip(Flat([1, 2, 3])).tolist()
        [3.0, 2.0, 1.0]
    """
    import fiamma.vision.transforms.v2.functional as F
    if isinstance(functional, str):
        obj = getattr(F, functional, None)
        if obj is None or not getattr(obj, "_fiamma_dispatching", False):
            raise ValueError(f"Could not find functional with name '{functional}' in "
                             f"{_NAMESPACE}.")
        functional = obj
    elif not (callable(functional) and getattr(functional, "_fiamma_dispatching", False)):
        raise ValueError(f"Kernels can only be registered on functionals from the {_NAMESPACE} "
                         f"namespace, but got {functional}.")
    if not (isinstance(tv_tensor_cls, type) and issubclass(tv_tensor_cls, tv.TVTensor)):
        raise ValueError(f"Kernels can only be registered for subclasses of "
                         f"fiamma.vision.tv_tensors.TVTensor, but got {tv_tensor_cls}.")
    if tv_tensor_cls in _BUILTIN:
        raise ValueError(f"Kernels cannot be registered for the builtin tv_tensor classes, but "
                         f"got {tv_tensor_cls}")
    registry = _KERNEL_REGISTRY.setdefault(functional, {})
    if tv_tensor_cls in registry:
        raise ValueError(f"Functional {functional.__name__} already has a kernel registered for "
                         f"type {tv_tensor_cls}.")

    def decorator(kernel):
        registry[tv_tensor_cls] = kernel
        return kernel
    return decorator
