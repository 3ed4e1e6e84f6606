"""``__array_namespace_info__``: what this namespace supports, on which devices."""

import fiamma
from fiamma.array_api import _dtypes as T

__all__ = ["__array_namespace_info__"]


class Info:
    """The inspection object returned by ``__array_namespace_info__()``.

    >>> import fiamma.array_api as xp
    >>> info = xp.__array_namespace_info__()
    >>> info.default_dtypes()["indexing"], info.capabilities()["boolean indexing"]
    (fiamma.int64, True)
    """

    __module__ = "fiamma.array_api"

    def capabilities(self):
        """Optional features: boolean indexing and data-dependent output shapes are
        supported; arrays have at most 64 dimensions."""
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self):
        """The device arrays are created on when none is given."""
        return fiamma.get_default_device()

    def devices(self):
        """The devices this process can place arrays on (the CPU, and CUDA devices when
        available)."""
        devs = [fiamma.device("cpu")]
        try:
            if fiamma.cuda.is_available():
                devs += [fiamma.device("cuda", i) for i in range(fiamma.cuda.device_count())]
        except Exception:  # noqa: BLE001 -- a broken CUDA setup means "no CUDA devices"
            pass
        return devs

    def _check_device(self, device):
        if device is not None and fiamma.device(device) not in self.devices():
            raise ValueError(f"unknown device {device!r}; expected one of {self.devices()}")

    def default_dtypes(self, *, device=None):
        """The default real floating, complex floating, integral and indexing dtypes."""
        self._check_device(device)
        f = fiamma.get_default_dtype()
        return {"real floating": f, "complex floating": f.to_complex,
                "integral": T.int64, "indexing": T.int64}

    def dtypes(self, *, device=None, kind=None):
        """The supported dtypes by name, optionally only those of ``kind`` (a kind name, a
        dtype or a tuple of them, as in ``isdtype``)."""
        self._check_device(device)
        out = {d.name: d for d in T.ALL}
        if kind is None:
            return out
        return {n: d for n, d in out.items() if T.isdtype(d, kind)}


_INFO = Info()


def __array_namespace_info__():
    """The namespace's inspection object (capabilities, devices, default and supported
    dtypes)."""
    return _INFO
