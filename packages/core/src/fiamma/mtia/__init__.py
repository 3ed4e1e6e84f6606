"""fiamma.mtia: PyTorch's ``torch.mtia`` (Meta's training and inference accelerator). fiamma
has no MTIA backend, so, as in a PyTorch build without one, ``is_available()`` is False and
``device_count()`` 0; seeding and ``empty_cache()`` do nothing, and what needs a device raises
``RuntimeError`` saying why.

>>> import fiamma
>>> fiamma.mtia.is_available(), fiamma.mtia.device_count()
(False, 0)
"""

from fiamma._absent_device import install as _install

__all__ = _install(globals(), "mtia", "MTIA (Meta training and inference accelerator)")
