"""``torch.utils.hooks``: :class:`RemovableHandle`, the handle a ``register_*_hook`` method
returns, for programs that keep their own hook tables (as Hugging Face ``accelerate`` does).

>>> hooks = {}
>>> h = RemovableHandle(hooks)
>>> hooks[h.id] = print
>>> h.remove(); hooks
{}
"""

import itertools
import weakref

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


class RemovableHandle:
    """A handle that removes its entry (key ``self.id``) from ``hooks_dict`` and from each
    dict of ``extra_dict`` (one dict or a list) on ``remove()``; a context manager that removes
    on exit. The dicts are held weakly when they can be (a dict that has gone needs no
    removal)."""

    _next_id = itertools.count()

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.id = next(RemovableHandle._next_id)
        self.hooks_dict_ref = _ref(hooks_dict)
        extras = [] if extra_dict is None else (
            extra_dict if isinstance(extra_dict, (list, tuple)) else [extra_dict])
        self.extra_dict_ref = tuple(_ref(d) for d in extras)

    def remove(self):
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __getstate__(self):
        refs = (self.hooks_dict_ref, *self.extra_dict_ref)
        return (self.id, *[r() for r in refs])

    def __setstate__(self, state):
        self.id = state[0]
        self.hooks_dict_ref = _ref({} if state[1] is None else state[1])
        self.extra_dict_ref = tuple(_ref(d) for d in state[2:] if d is not None)
        RemovableHandle._next_id = itertools.count(
            max(self.id + 1, next(RemovableHandle._next_id)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _ref(d):
    try:
        return weakref.ref(d)
    except TypeError:  # a plain dict cannot be weakly referenced: hold it
        return lambda: d


def unserializable_hook(f):
    """Mark a tensor hook as not to be saved with the tensor (returns ``f``, marked)."""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor):
    """Warn when ``tensor`` has backward hooks that are not marked unserializable."""
    import warnings

    for hook in (getattr(tensor, "_backward_hooks", None) or {}).values():
        if not getattr(hook, "__torch_unserializable__", False):
            warnings.warn(f"backward hook {hook!r} on tensor will not be serialized. If this "
                          "is expected, you can decorate the function with "
                          "@torch.utils.hooks.unserializable_hook to suppress this warning")
