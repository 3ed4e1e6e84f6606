"""fiamma.mps: PyTorch's ``torch.mps`` (Apple's Metal). fiamma has no MPS backend, so
``is_available()`` is False and ``device_count()`` 0 (``fiamma.backends.mps`` says the same);
seeding and ``empty_cache()`` do nothing, and what needs a device raises ``RuntimeError``.

>>> import fiamma
>>> fiamma.mps.is_available(), fiamma.mps.device_count()
(False, 0)
"""

from fiamma._absent_device import install as _install

__all__ = _install(globals(), "mps", "MPS (Apple Metal)")
