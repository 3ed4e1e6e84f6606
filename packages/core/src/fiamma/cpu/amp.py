"""``fiamma.cpu.amp``: PyTorch's ``torch.cpu.amp.autocast`` spelling, which is
``fiamma.amp.autocast("cpu", ...)`` (bfloat16 by default); ``GradScaler`` is
``fiamma.amp.GradScaler("cpu", ...)``; both warn PyTorch's ``FutureWarning`` for the old
spelling.

>>> import fiamma
>>> with fiamma.amp.autocast("cpu"):  # fiamma.cpu.amp.autocast() also, with a FutureWarning
...     y = fiamma.mm(fiamma.ones(2, 3), fiamma.ones(3, 2))
>>> y.dtype
fiamma.bfloat16
"""

import warnings

from fiamma.amp import GradScaler as _GradScaler, autocast as _autocast

__all__ = ["autocast", "GradScaler"]


class autocast(_autocast):
    """``fiamma.amp.autocast("cpu", ...)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        import fiamma

        warnings.warn("`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", dtype=fiamma.bfloat16 if dtype is None else dtype,
                         enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``fiamma.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
