"""The device seam: which backend runs the primitives for a device, and the status codes every
backend returns (see contract.py for the primitives and docs/architecture.md for how to add a
device).

A tensor's device names its backend: ``backend_for(device)`` looks it up once per op. The CPU
backend (fiamma._backend.cpu, C through cffi) is registered by fiamma._storage at import; the
others register themselves with ``register``, or are built on first use by a loader
(``register_loader``: fiamma._device_copy installs those of ``xp`` and ``cuda``). Nothing here
imports a backend or a device library.
"""

from fiamma._backend import codes as C

__all__ = ["register", "backend_for", "registered", "check", "raise_status", "DEVICE_TYPES"]

_MESSAGES = {
    C.ERR_NOMEM: (MemoryError, "out of memory"),
    C.ERR_DTYPE: (TypeError, "unsupported dtype"),
    C.ERR_NDIM: (ValueError, "too many dimensions (at most %d)" % C.MAX_DIMS),
    C.ERR_INDEX: (IndexError, "index out of range"),
    C.ERR_ARG: (ValueError, "invalid argument"),
    C.ERR_OP: (ValueError, "unknown operation"),
    C.ERR_VALUE: (ValueError, "invalid value"),
}


def raise_status(rc, op, detail=""):
    """Raise the exception for a nonzero status ``rc`` (a codes.ERR_*) returned to ``op``."""
    exc, msg = _MESSAGES.get(rc, (RuntimeError, "internal error %d" % rc))
    if detail:
        msg = msg + ": " + detail
    raise exc(f"{op}: {msg}")


def check(rc, op, detail=""):
    """Raise if a primitive returned a nonzero status (what every primitive returns)."""
    if rc:
        raise_status(rc, op, detail)


# device type -> backend module (or object) implementing contract.Backend
_BACKENDS = {}
# the device types fiamma.device accepts (a registered backend adds its own)
DEVICE_TYPES = {"cpu", "cuda", "meta", "xp"}  # xp: the NumPy reference device (testing)


def register(device_type, backend):
    """Make ``backend`` run the primitives of tensors whose device type is ``device_type``
    (a new type becomes a valid ``fiamma.device`` name)."""
    DEVICE_TYPES.add(device_type)
    _BACKENDS[device_type] = backend


def register_loader(device_type, loader):
    """Make ``loader(op, dev)`` build the backend of ``device_type`` the first time a tensor
    needs it (a device library such as CuPy is imported only then): it registers the backend
    and returns it, or raises RuntimeError naming ``op`` and saying why the device is not
    available. The modules above this registry install the loaders (fiamma._device_copy), so
    it imports no backend itself."""
    DEVICE_TYPES.add(device_type)
    _LOADERS[device_type] = loader


_LOADERS = {}


def registered():
    """The device types that have a backend now."""
    return sorted(_BACKENDS)


def backend_for(dev, op="device"):
    """The backend of device ``dev`` (a fiamma.device); RuntimeError naming the device if no
    backend runs it."""
    be = _BACKENDS.get(dev.type)
    if be is not None:
        return be
    loader = _LOADERS.get(dev.type)
    if loader is not None:
        return loader(op, dev)
    raise RuntimeError(f"{op}: device {dev}: no backend runs tensors on '{dev.type}'")
