"""Shared-memory storages: moving a storage into shared memory, mapping a segment received from
another process, and giving the memory back when the last process lets go.

A segment is a file in shared memory (tmpfs) mapped ``MAP_SHARED``:

* ``file_descriptor`` (default): an anonymous file (``memfd_create``) that has no name at all;
  processes pass its descriptor over Unix sockets. The kernel frees the memory when the last
  descriptor and mapping are gone, so nothing can leak into /dev/shm, whatever kills a process.
* ``file_system``: a named file ``/dev/shm/fiamma_mp_*``; receivers open it by name. Every
  process holding it keeps a shared ``flock`` on it (the kernel drops it when the process dies);
  whoever lets go and finds no lock left unlinks the name. Names whose creator died before anyone
  else mapped them are swept at exit by any process that used this strategy.
"""

import ctypes
import fcntl
import gc
import mmap
import os
import re
import secrets
import sys
import threading
import weakref
from multiprocessing.util import Finalize, register_after_fork

from fiamma import _dtype as D, _tensor_factory as TF
from fiamma._backend import cpu as _cpu
from fiamma._storage import CPU, BorrowedStorage, Storage

__all__ = ["get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies",
           "share_storage_", "segment_of", "rebuild_from_fd", "rebuild_from_name"]

_STRATEGIES = ("file_descriptor", "file_system")
_strategy = "file_descriptor"

SHM_DIR = "/dev/shm"
PREFIX = "fiamma_mp_"
_NAME_RE = re.compile(PREFIX + r"[0-9]+_[0-9a-f]{16}")  # what _create_named makes
_PAGE = mmap.PAGESIZE
# Blocks of at least this size come from the allocator's own page-aligned mmap (csrc/alloc.c,
# HUGE_THRESHOLD): such a block can be replaced in place by a shared mapping, so every pointer
# into it (views, NumPy arrays, DLPack capsules) stays valid.
_INPLACE_MIN = 2 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_c_mmap = _libc.mmap
_c_mmap.restype = ctypes.c_void_p
_c_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                    ctypes.c_long]
_c_munmap = _libc.munmap
_c_munmap.restype = ctypes.c_int
_c_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAP_FIXED = 0x10
_MAP_ANONYMOUS = getattr(mmap, "MAP_ANONYMOUS", 0x20)
_RW = mmap.PROT_READ | mmap.PROT_WRITE

_lock = threading.RLock()
_by_key = {}          # (st_dev, st_ino) -> weakref to the storage mapping it in this process
_segments = weakref.WeakKeyDictionary()  # storage -> _Segment
_named = {}           # name -> _Segment, for the exit hook (file_system)
_used_names = False


def get_sharing_strategy():
    """The strategy used for storages moved to shared memory from now on."""
    return _strategy


def set_sharing_strategy(new_strategy):
    """Choose ``"file_descriptor"`` (default) or ``"file_system"`` for storages shared from now
    on in this process (a storage keeps the strategy it was shared with).

    >>> import fiamma.multiprocessing as mp
    >>> mp.set_sharing_strategy("file_system"); mp.get_sharing_strategy()
    'file_system'
    >>> mp.set_sharing_strategy("file_descriptor")
    """
    global _strategy, _used_names
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"set_sharing_strategy: expected one of {', '.join(_STRATEGIES)}, got "
                         f"{new_strategy!r}")
    _strategy = new_strategy
    if new_strategy == "file_system":
        _used_names = True  # sweep names left by killed processes at exit


def get_all_sharing_strategies():
    """The strategies this system supports."""
    return set(_STRATEGIES)


def _fstat_key(fd):
    s = os.fstat(fd)
    return (s.st_dev, s.st_ino)


def _map(fd, length, addr=None):
    flags = mmap.MAP_SHARED | (_MAP_FIXED if addr is not None else 0)
    p = _c_mmap(addr, length, _RW, flags, fd, 0)
    if p is None or p == _MAP_FAILED:
        e = ctypes.get_errno()
        raise OSError(e, f"share_memory_: mmap of {length} bytes failed: {os.strerror(e)}")
    return p


class _Segment:
    """One mapping of a shared-memory file in this process (and the descriptor that keeps it)."""

    __slots__ = ("fd", "addr", "length", "nbytes", "name", "key", "inplace", "keep")

    def __init__(self, fd, nbytes, name=None, addr=None):
        self.fd = fd
        self.nbytes = nbytes
        self.name = name
        self.length = max(-(-nbytes // _PAGE) * _PAGE, _PAGE)
        self.key = _fstat_key(fd)
        self.inplace = addr is not None
        self.keep = None
        self.addr = _map(fd, self.length, addr)

    def release(self):
        """Unmap and close (the storage using it is gone)."""
        if self.addr:
            if self.inplace:
                # give the block back to the allocator as private memory again: replace the
                # shared pages by fresh anonymous ones at the same address, then free it
                p = _c_mmap(self.addr, self.length, _RW,
                            mmap.MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_FIXED, -1, 0)
                if p == self.addr:
                    _cpu.free(self.addr, self.nbytes)
            else:
                _c_munmap(self.addr, self.length)
            self.addr = 0
        self.keep = None
        self.close_fd()

    def close_fd(self):
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)
        if self.name is not None:
            _named.pop(self.name, None)
            _unlink_if_unused(self.name)


def _unlink_if_unused(name):
    """Unlink /dev/shm/<name> when no process holds its lock any more."""
    path = os.path.join(SHM_DIR, name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    try:
        os.unlink(path)
    except OSError:
        pass
    os.close(fd)


def sweep(pid=None):
    """Unlink every ``fiamma_mp_*`` name in /dev/shm that no live process holds (left by a
    process killed before anyone else mapped its segment); with ``pid``, only the names that
    process created. Safe to call at any time: a name is unlinked only while nobody holds it."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    mine = PREFIX if pid is None else f"{PREFIX}{int(pid)}_"
    for n in names:
        if n.startswith(mine) and not n.endswith(".tmp"):
            _unlink_if_unused(n)


def _at_exit():
    # Unlink what this process still holds by name, then sweep names whose creator was killed.
    # The mappings stay (code running later at shutdown may still read the tensors), and a
    # mapping keeps its file's open description, and so its lock, alive: unlock explicitly.
    for seg in list(_named.values()):
        fd, seg.fd = seg.fd, -1
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                pass
            os.close(fd)
        _unlink_if_unused(seg.name)
    _named.clear()
    if _used_names:
        sweep()


# The exit hook is one of multiprocessing's own finalizers, run last: after the daemonic
# children (DataLoader workers) were stopped, so that their locks no longer keep names alive,
# and in child processes too (they end through multiprocessing's exit function, not atexit).
def _register_exit_hook(_=None):
    Finalize(None, _at_exit, exitpriority=-1000)


class _ExitHookOwner:
    pass


_register_exit_hook()
register_after_fork(_ExitHookOwner, _register_exit_hook)  # a forked child starts with none


def _after_fork_in_child():
    """A forked child shares the parent's open file descriptions (through the descriptor and
    the mapping it inherited), so the parent's lock on a named segment would be the child's
    too: the parent could not tell whether it is the last holder while the child lives, and
    nobody would unlink the name after. Give the child a description and lock of its own:
    open the name again, map it over the inherited mapping (same file, same address, same
    bytes) and put it in place of the inherited descriptor. The module lock may have been
    held by another thread at the fork: make a fresh one."""
    global _lock
    _lock = threading.RLock()
    for seg in list(_named.values()):
        if seg.fd < 0 or not seg.addr:
            continue
        try:
            fd = os.open(os.path.join(SHM_DIR, seg.name), os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # unlinked already: nobody can open it by name any more
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            _map(fd, seg.length, seg.addr)
            os.dup2(fd, seg.fd, inheritable=False)
        except OSError:
            pass  # keep the inherited description: the name may outlive us (swept later)
        finally:
            os.close(fd)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _new_fd(nbytes, strategy):
    """A fresh shared-memory file of ``nbytes`` bytes: (fd, name or None)."""
    length = max(nbytes, 1)
    if strategy == "file_descriptor":
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("fiamma_shared", os.MFD_CLOEXEC)
        else:  # a named file unlinked at once is just as anonymous
            fd, name = _create_named()
            os.unlink(os.path.join(SHM_DIR, name))
        os.ftruncate(fd, length)
        return fd, None
    fd, name = _create_named()
    os.ftruncate(fd, length)
    return fd, name


def _create_named():
    global _used_names
    _used_names = True
    name = f"{PREFIX}{os.getpid()}_{secrets.token_hex(8)}"
    tmp = os.path.join(SHM_DIR, name + ".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    # lock before the name becomes visible, so that a sweep never takes a fresh file for dead
    fcntl.flock(fd, fcntl.LOCK_SH)
    os.rename(tmp, os.path.join(SHM_DIR, name))
    return fd, name


class SharedStorage(Storage):
    """A storage whose memory is a shared-memory segment (see ``Tensor.share_memory_``)."""

    __slots__ = ()

    def __del__(self):
        pass  # the segment is released by its finalizer

    def is_shared(self):
        return True

    def share_memory_(self):
        return self

    def __repr__(self):
        return f"<fiamma.Storage {self.nbytes} bytes on {self.device}, shared>"


class SharedBorrowedStorage(BorrowedStorage):
    """A borrowed storage moved to shared memory (its old owner is dropped)."""

    __slots__ = ()

    def is_shared(self):
        return True

    def share_memory_(self):
        return self


def _attach(st, seg):
    _segments[st] = seg
    _by_key[seg.key] = weakref.ref(st)
    if seg.name is not None:
        _named[seg.name] = seg
    f = weakref.finalize(st, _finalize, seg)
    f.atexit = False  # never unmap at shutdown: later teardown code may still read the tensor


def _finalize(seg):
    with _lock:
        ref = _by_key.get(seg.key)
        if ref is not None and ref() is None:
            del _by_key[seg.key]
    seg.release()


def segment_of(st):
    """The segment behind a shared storage (None if it is not shared by this module)."""
    return _segments.get(st)


def _lookup(key):
    ref = _by_key.get(key)
    return ref() if ref is not None else None


def share_storage_(st, tensor=None, strategy=None):
    """Move storage ``st`` into shared memory (in place; no-op if it already is).

    ``tensor``: a tensor over ``st`` (``Tensor.share_memory_`` passes itself); when nothing
    but that tensor refers to the storage, it is the only one to repoint, which spares a scan
    of every object in the process for other views.
    """
    refs = sys.getrefcount(st)  # first: before this frame makes more references to st
    if st.is_shared():
        return st
    dev = st.device
    if dev is not CPU:
        if dev.type == "cuda":
            return st  # as in PyTorch: CUDA memory is shared through CUDA IPC, not moved
        raise RuntimeError(f"share_memory_: can't share a storage on {dev}")
    kind = type(st)
    if kind is not Storage and kind is not BorrowedStorage:
        raise TypeError(f"share_memory_: can't move a {kind.__name__} to shared memory")
    strategy = strategy or _strategy
    with _lock:
        n = st.nbytes
        fd, name = _new_fd(n, strategy)
        old = st.ptr
        try:
            if kind is Storage and n >= _INPLACE_MIN and old % _PAGE == 0:
                # the block is the allocator's own mapping: fill the file, then map it over
                # the block, so that the address of the memory does not change
                _copy_through_map(fd, old, n)
                seg = _Segment(fd, n, name, addr=old)
                st.__class__ = SharedStorage
                _attach(st, seg)
                return st
            seg = _Segment(fd, n, name)
        except BaseException:
            os.close(fd)
            if name is not None:
                _unlink_if_unused(name)
            raise
        if n:
            ctypes.memmove(seg.addr, old, n)
        # every tensor over this storage caches the address of its first element: repoint them
        if tensor is not None and _calibrated_refs is not None and refs <= _calibrated_refs:
            tensors = [tensor]
        else:
            tensors = [r for r in gc.get_referrers(st) if isinstance(r, TF.Tensor)
                       and r._storage is st]
        st.ptr = seg.addr
        for t in tensors:
            t._ptr = seg.addr + t._offset * t._dtype.itemsize
        # A NumPy array or DLPack capsule taken from the tensor before still points at the old
        # memory: it is kept (not freed) until the storage dies, so such a view reads stale
        # data instead of freed memory. (Blocks of 2 MiB and more do not move at all.)
        if kind is Storage:
            st.__class__ = SharedStorage
            seg.keep = _OldBlock(old, n)
        else:
            seg.keep = st.owner
            st.owner = seg
            st.__class__ = SharedBorrowedStorage
        _attach(st, seg)
        return st


_calibrated_refs = None


def _calibrate():
    """Count the references a storage has inside ``share_storage_`` when one tensor (and
    nothing else) refers to it, on the path ``Tensor.share_memory_`` takes."""
    global _calibrated_refs
    t = TF.new_empty((1,), D.uint8)
    real = share_storage_

    def spy(st, tensor=None, strategy=None):
        global _calibrated_refs
        _calibrated_refs = sys.getrefcount(st)  # what share_storage_'s first line sees
        return real(st, None, strategy)

    globals()["share_storage_"] = spy
    try:
        t.share_memory_()
    finally:
        globals()["share_storage_"] = real


def _copy_through_map(fd, src, n):
    tmp = _map(fd, -(-n // _PAGE) * _PAGE)
    try:
        ctypes.memmove(tmp, src, n)
    finally:
        _c_munmap(tmp, -(-n // _PAGE) * _PAGE)


class _OldBlock:
    """An allocator block freed when the shared storage that replaced it dies."""

    __slots__ = ("ptr", "nbytes")

    def __init__(self, ptr, nbytes):
        self.ptr = ptr
        self.nbytes = nbytes

    def __del__(self):
        _cpu.free(self.ptr, self.nbytes)


def _new_shared(seg):
    st = object.__new__(SharedStorage)
    st.ptr = seg.addr
    st.nbytes = seg.nbytes
    st.version = 0
    _attach(st, seg)
    return st


def _check_size(fd, nbytes, found, what):
    """The size another process sent must fit the segment actually there: mapping (or viewing)
    past the end of the file would fault on first touch."""
    if type(nbytes) is not int or nbytes < 0:
        raise RuntimeError(f"fiamma.multiprocessing: invalid storage size {nbytes!r:.40} "
                           f"received for {what}")
    have = found.nbytes if found is not None else os.fstat(fd).st_size
    if nbytes > have:
        raise RuntimeError(f"fiamma.multiprocessing: {what} holds {have} bytes, but the "
                           f"storage received for it claims {nbytes}")


def rebuild_from_fd(fd, nbytes):
    """The storage over the shared file open as ``fd`` (takes ownership of ``fd``)."""
    with _lock:
        try:
            found = _lookup(_fstat_key(fd))
            _check_size(fd, nbytes, found, "the shared-memory segment received")
            if found is not None:
                os.close(fd)
                return found
            seg = _Segment(fd, nbytes)
        except BaseException:
            os.close(fd)
            raise
        return _new_shared(seg)


def rebuild_from_name(name, nbytes):
    """The storage over the shared file /dev/shm/<name> (file_system strategy)."""
    global _used_names
    if type(name) is not str or not _NAME_RE.fullmatch(name):
        raise RuntimeError(f"fiamma.multiprocessing: {name!r:.80} is not a fiamma shared-memory "
                           "name")
    path = os.path.join(SHM_DIR, name)
    with _lock:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise RuntimeError(
                f"fiamma.multiprocessing: shared memory {name!r} is gone: the sending process "
                "let go of the tensor before this process received it (keep it alive in the "
                "sender until it has been received)") from None
        try:
            found = _lookup(_fstat_key(fd))
            _check_size(fd, nbytes, found, f"shared memory {name!r}")
            if found is not None:
                os.close(fd)
                return found
            fcntl.flock(fd, fcntl.LOCK_SH)
            if os.fstat(fd).st_nlink == 0:  # unlinked between our open and our lock
                raise RuntimeError(
                    f"fiamma.multiprocessing: shared memory {name!r} was released by its last "
                    "holder before this process received it (keep the tensor alive in the "
                    "sender until it has been received)")
            seg = _Segment(fd, nbytes, name)
        except BaseException:
            os.close(fd)
            raise
        _used_names = True
        return _new_shared(seg)


_calibrate()
