"""Grad-mode context managers available from core (fiamma.no_grad, ...).

They only flip core's thread-local grad flag, so they work (as no-ops for graphs) without
fiamma-autograd installed; fiamma.autograd re-exports them.

While fiamma.jit traces (a trace hook is installed), turning grad mode off does nothing: the
trace follows the traced tensors through the grad flag, and PyTorch's tracer records the ops a
model runs under ``no_grad`` (an ``@torch.no_grad()`` forward, an export inside ``with
torch.no_grad():``) like any others, so they must not become constants of the graph.
"""

import functools

from fiamma import _grad_hook as G

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode"]


class _GradModeBase:
    """Usable as ``with no_grad():`` and as a decorator ``@no_grad()``."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args()):
                return fn(*args, **kwargs)

        return wrapper

    def _args(self):
        return ()

    def clone(self):
        return self.__class__(*self._args())


class no_grad(_GradModeBase):
    """Disable graph recording in this thread.

    >>> import fiamma
    >>> with fiamma.no_grad():
    ...     fiamma.is_grad_enabled()
    False
    """

    def __enter__(self):
        st = G.state
        self._prev = G.set_grad_enabled_flag(False if st.tracer is None else st.enabled)

    def __exit__(self, *exc):
        G.set_grad_enabled_flag(self._prev)
        return False


class enable_grad(_GradModeBase):
    """Enable graph recording in this thread (inside a no_grad block)."""

    def __enter__(self):
        self._prev = G.set_grad_enabled_flag(True)

    def __exit__(self, *exc):
        G.set_grad_enabled_flag(self._prev)
        return False


class set_grad_enabled(_GradModeBase):
    """Set grad mode to ``mode``: a function call, a context manager, or a decorator."""

    def __init__(self, mode):
        self.mode = bool(mode)
        st = G.state
        self._prev = G.set_grad_enabled_flag(
            self.mode or (st.tracer is not None and st.enabled))

    def _args(self):
        return (self.mode,)

    def __call__(self, fn):
        # used as a decorator: the constructor already flipped the flag, so put it back
        G.set_grad_enabled_flag(self._prev)
        return super().__call__(fn)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        G.set_grad_enabled_flag(self._prev)
        return False


class inference_mode(_GradModeBase):
    """Like no_grad, and marks tensors made inside as inference tensors (``mode=False`` is a
    no-op)."""

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def _args(self):
        return (self.mode,)

    def __enter__(self):
        self._prev = G.state.enabled, G.state.inference
        if self.mode and G.state.tracer is None:
            G.state.enabled = False
            G.state.inference = True

    def __exit__(self, *exc):
        G.state.enabled, G.state.inference = self._prev
        return False
