"""``fiamma.cpu.amp``: PyTorch's ``torch.cpu.amp.autocast`` spelling, which is
``fiamma.amp.autocast("cpu", ...)`` (bfloat16 by default); ``GradScaler`` is
``fiamma.amp.GradScaler("cpu", ...)``.

>>> import fiamma
>>> with fiamma.cpu.amp.autocast():
...     y = fiamma.mm(fiamma.ones(2, 3), fiamma.ones(3, 2))
>>> y.dtype
fiamma.bfloat16
"""

from fiamma.amp import GradScaler as _GradScaler, autocast as _autocast

__all__ = ["autocast", "GradScaler"]


class autocast(_autocast):
    """``fiamma.amp.autocast("cpu", ...)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        import fiamma

        super().__init__("cpu", dtype=fiamma.bfloat16 if dtype is None else dtype,
                         enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``fiamma.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
