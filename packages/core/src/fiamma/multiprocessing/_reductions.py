"""Pickling of tensors and storages between processes (``multiprocessing``'s ForkingPickler).

A tensor travels as (its storage's shared-memory handle, dtype, shape, stride, offset): the
receiver maps the same memory, so writes are seen on both sides. A storage not yet shared is
moved to shared memory first. Within one process, every tensor received over the same memory
gets the same storage object, so views stay views.
"""

import multiprocessing
import multiprocessing.reduction
import sys
import threading
import time
from multiprocessing.reduction import DupFd, ForkingPickler
from multiprocessing.util import Finalize, register_after_fork

from fiamma import _dtype as D
from fiamma._storage import BorrowedStorage, Storage
from fiamma._storage_api import TypedStorage, UntypedStorage, untyped
from fiamma._tensor import Tensor, _init
from fiamma.multiprocessing import _shm

_new = object.__new__


def _reduce_storage(st):
    if st.device.type != "cpu":
        raise RuntimeError(f"fiamma.multiprocessing: can't send a storage on {st.device} to "
                           "another process (only CPU tensors are shared for now)")
    _shm.share_storage_(st)
    seg = _shm.segment_of(st)
    if seg is None:
        raise RuntimeError("fiamma.multiprocessing: storage is shared but its segment is unknown")
    if seg.name is None:
        with _in_flight_lock:
            _in_flight[0] += 1
        try:
            df = DupFd(seg.fd)
            ident = getattr(df, "_id", None)  # a resource_sharer handle (not a spawn-time fd)
            if ident is not None:
                if len(_pending) > 4096:  # forget the handles already fetched
                    from multiprocessing import resource_sharer

                    _pending.intersection_update(resource_sharer._resource_sharer._cache.keys())
                _pending.add(ident[1])
                _defer_socket_unlink()
        finally:
            with _in_flight_lock:
                _in_flight[0] -= 1
        return (_rebuild_storage_fd, (df, st.nbytes))
    return (_shm.rebuild_from_name, (seg.name, st.nbytes))


# Descriptors sent through resource_sharer are served by a thread of the sending process until
# the receiver fetches them: a worker that puts a tensor on a Queue and returns must not exit
# before then. multiprocessing runs its exit finalizers by priority, highest first: the wait
# runs first (before the sharer's socket is unlinked, at 0) and again after the Queues flushed
# what they still held (at -5; the temporary folder with the socket goes at -100).
_pending = set()
_in_flight = [0]  # reducers between starting a handle and recording it (feeder threads)
_in_flight_lock = threading.Lock()
_EXIT_WAIT_S = 5.0


def _wait_for_receivers():
    parent = multiprocessing.parent_process()
    if parent is None or not (_pending or _in_flight[0]):
        return
    from multiprocessing import resource_sharer

    cache = resource_sharer._resource_sharer._cache
    deadline = time.monotonic() + _EXIT_WAIT_S
    while ((_in_flight[0] or _pending & cache.keys()) and time.monotonic() < deadline
           and parent.is_alive()):
        time.sleep(0.005)


def _defer_socket_unlink():
    """Move the unlinking of the sharer's socket after the exit wait. The sharer starts when a
    Queue's feeder thread pickles the first tensor, which may happen during exit itself (a
    Queue closed at exit flushes what it holds); its socket would then be unlinked (priority
    0) before the wait (-50) and the receiver could not connect any more."""
    from multiprocessing import resource_sharer

    try:
        sock = resource_sharer._resource_sharer._listener._listener
        unlink = sock._unlink
    except AttributeError:  # not a Unix socket (or another Python's internals)
        return
    if unlink is None or unlink._key is None or unlink._key[0] != 0:
        return
    callback, args = unlink._callback, unlink._args
    unlink.cancel()
    sock._unlink = Finalize(sock, callback, args, exitpriority=-60)


def _rebuild_storage_fd(dupfd, nbytes):
    return _shm.rebuild_from_fd(dupfd.detach(), nbytes)


def _reduce_tensor(t):
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries. If you just want to transfer the "
            "data, call detach() on the tensor before serializing (e.g., putting it on the "
            "queue).")
    if t._storage.device.type != "cpu":
        raise RuntimeError(f"fiamma.multiprocessing: can't send a tensor on {t.device} to "
                           "another process (only CPU tensors are shared for now)")
    Tensor.share_memory_(t)
    # the storage's handle is nested rather than left to the pickler's dispatch table, which
    # lacks it when the reducers were registered after this pickler was made
    rv = (_rebuild_tensor, (type(t), _reduce_storage(t._storage), t._dtype.name, t._shape,
                            t._stride, t._offset, t.requires_grad))
    d = getattr(t, "__dict__", None)
    # Python attributes (a subclass's metadata) travel as the state pickle sets on arrival
    return rv + (dict(d),) if d else rv


# Tensor.__reduce_ex__ asks here when multiprocessing is loaded: a tensor pickled by
# multiprocessing's ForkingPickler is shared even in a process that never imported
# fiamma.multiprocessing (a Pool worker returning a tensor). The C pickler adds no frame, so
# the first Python frame above __reduce_ex__ is the one that started the pickling.
_FORKING_CODES = frozenset((ForkingPickler.dumps.__func__.__code__,
                            multiprocessing.reduction.dump.__code__))


def reduce_if_forking(t):
    f = sys._getframe(2)
    for _ in range(3):
        if f is None:
            break
        if f.f_code in _FORKING_CODES:
            return _reduce_tensor(t)
        f = f.f_back
    return None


def _rebuild_tensor(cls, storage, dtype_name, shape, stride, offset, requires_grad):
    if isinstance(storage, tuple):
        storage = storage[0](*storage[1])
    dt = D._by_name(dtype_name)
    shape, stride = tuple(shape), tuple(stride)
    _check_view(storage, dt, shape, stride, offset)
    t = _new(Tensor)
    _init(t, storage, dt, shape, stride, offset, None)
    if cls is not Tensor:
        t = t._as_subclass(cls)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _check_view(storage, dt, shape, stride, offset):
    """The layout received from another process must stay inside the storage received."""
    ints = shape + stride + (offset,)
    if len(shape) != len(stride) or any(type(v) is not int or v < 0 for v in ints):
        raise RuntimeError(f"fiamma.multiprocessing: invalid tensor layout received: shape "
                           f"{shape}, stride {stride}, offset {offset!r}")
    numel = 1
    for n in shape:
        numel *= n
    end = offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1 if numel else offset
    if end * dt.itemsize > storage.nbytes:
        raise RuntimeError(f"fiamma.multiprocessing: a tensor received (shape {shape}, stride "
                           f"{stride}, offset {offset}, {dt}) reaches past its shared storage "
                           f"of {storage.nbytes} bytes")


def _register_tensor_class(cls):
    ForkingPickler.register(cls, _reduce_tensor)


def _walk(cls):
    _register_tensor_class(cls)
    for sub in cls.__subclasses__():
        _walk(sub)


_exit_hook = []


class _ExitWait:
    pass


def _register_exit_wait():
    _pending.clear()
    _exit_hook[:] = [Finalize(None, _wait_for_receivers, exitpriority=100),
                     Finalize(None, _wait_for_receivers, exitpriority=-50)]


def _rebuild_typed(u, dtype):
    return TypedStorage(wrap_storage=u, dtype=dtype)


def init_reductions():
    """Register the reducers with ForkingPickler (Tensor, its subclasses present and future,
    and the storage classes). Called on import of fiamma.multiprocessing."""
    if not _exit_hook:
        _register_exit_wait()
        # a forked child starts with multiprocessing's finalizers cleared: register again
        register_after_fork(_ExitWait, lambda _: _register_exit_wait())
    for cls in (Storage, BorrowedStorage, _shm.SharedStorage, _shm.SharedBorrowedStorage):
        ForkingPickler.register(cls, _reduce_storage)
    # the public faces (x.untyped_storage(), x.storage()) travel as the storage they show
    ForkingPickler.register(UntypedStorage, lambda u: (untyped, (u._st,)))
    ForkingPickler.register(TypedStorage, lambda t: (_rebuild_typed, (t._untyped_storage,
                                                                      t.dtype)))
    _walk(Tensor)
    # ForkingPickler dispatches on the exact type: subclasses defined later (nn.Parameter)
    # register themselves when they are created
    if getattr(Tensor, "_fm_mp_hook", False):
        return
    prev = Tensor.__dict__.get("__init_subclass__")

    def __init_subclass__(cls, **kwargs):
        if prev is not None:
            prev.__func__(cls, **kwargs)
        else:
            super(Tensor, cls).__init_subclass__(**kwargs)
        _register_tensor_class(cls)

    Tensor.__init_subclass__ = classmethod(__init_subclass__)
    Tensor._fm_mp_hook = True
