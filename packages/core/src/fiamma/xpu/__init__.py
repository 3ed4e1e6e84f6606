"""fiamma.xpu: PyTorch's ``torch.xpu`` (Intel GPUs). fiamma has no XPU backend, so, as in a
PyTorch build without one, ``is_available()`` is False and ``device_count()`` 0; seeding and
``empty_cache()`` do nothing, and what needs a device raises ``RuntimeError`` saying why.

>>> import fiamma
>>> fiamma.xpu.is_available(), fiamma.xpu.device_count()
(False, 0)
"""

from fiamma._absent_device import install as _install

__all__ = _install(globals(), "xpu", "XPU (Intel GPU)")
