"""fiamma.utils._mode_utils: PyTorch's ``torch.utils._mode_utils`` (``no_dispatch``).

>>> import fiamma
>>> from fiamma.utils._mode_utils import no_dispatch
>>> with no_dispatch():
...     y = fiamma.ones(2) + 1
>>> y.tolist()
[2.0, 2.0]
"""

import contextlib

from fiamma import _torch_function as _TF

__all__ = ["no_dispatch", "all_same_mode"]


@contextlib.contextmanager
def no_dispatch():
    """Ops inside reach neither ``__torch_dispatch__`` subclasses nor dispatch modes (what a
    non-wrapper subclass's handler uses to compute on its own data)."""
    _TF.td_state.off += 1
    try:
        yield
    finally:
        _TF.td_state.off -= 1


def all_same_mode(modes):
    return all(m is modes[0] for m in modes)
