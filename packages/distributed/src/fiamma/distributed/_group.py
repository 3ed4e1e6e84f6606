"""Process groups: an MPI communicator, a worker thread that runs the group's collectives in
call order, work handles with deadlines, and the metadata check that runs before each
collective.

Why a worker thread: MPI's blocking collectives cannot be interrupted, and MPI makes progress
only while some thread is inside the library. Each collective is queued to the group's thread,
which runs the blocking MPI call (mpi4py releases the GIL), while the caller waits on an event
with the group's timeout. A collective that misses its deadline marks the group broken (its
thread is stuck inside MPI), raises in the caller, and at exit the process aborts the MPI job
instead of hanging in MPI_Finalize.
"""

from __future__ import annotations

import datetime
import queue
import threading
import time
import zlib

import numpy as np

from fiamma.distributed import _mpi

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
INLINE_BYTES = 64 * 1024  # synchronous collectives up to this size run in the calling thread
_HEADER = 16
_HEADER_BYTES = _HEADER * 8
_SLOT_BYTES = 1024  # a checked collective's operand up to this size travels with its header
_MAXDIMS = 8


class DistError(RuntimeError):
    """Base class of fiamma.distributed's errors."""


class DistBackendError(DistError):
    """A collective failed (ranks disagreed, or MPI reported an error)."""


class DistTimeoutError(DistBackendError):
    """A collective or point-to-point operation missed its deadline."""


for _cls in (DistError, DistBackendError, DistTimeoutError):
    _cls.__module__ = "fiamma.distributed"

# operation names, numbered for the metadata check
OPS = ["barrier", "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
       "reduce_scatter_tensor", "all_to_all_single", "new_group", "gather", "scatter",
       "all_to_all", "dup"]
OP_CODE = {name: i for i, name in enumerate(OPS)}
REDUCE_CODE = {op: i for i, op in enumerate(_mpi.ReduceOp)}


def _seconds(timeout, what):
    if timeout is None:
        return None
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"{what}: timeout must be a datetime.timedelta, got "
                        f"{type(timeout).__name__}")
    if timeout.total_seconds() <= 0:
        raise ValueError(f"{what}: timeout must be positive, got {timeout}")
    return timeout.total_seconds()


def describe_tensor(t):
    return f"{t.dtype.name}{list(t.shape)}"


class _What:
    """An operation's description for messages, formatted only when one is needed."""

    __slots__ = ("op", "seq", "detail", "group")

    def __init__(self, op, seq, detail, group):
        self.op, self.seq, self.detail, self.group = op, seq, detail, group

    def __str__(self):
        d = self.detail
        d = describe_tensor(d) if hasattr(d, "dtype") else d
        g = self.group
        return f"{self.op} #{self.seq} ({d}) in group {g._name}, rank {g._rank}"


class _Completed:
    """The handle of an operation that had completed when it was returned."""

    __slots__ = ("_result",)

    def __init__(self, result):
        self._result = result if result is not None else []

    def wait(self, timeout=None):
        return True

    def get_future(self):
        """A ``fiamma.futures.Future`` completed with ``result()`` when the operation
        completes (PyTorch's ``Work.get_future()``)."""
        from fiamma.futures import Future
        return Future._of_work(self)

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._result


_HEADERS = {}


class Header:
    """What one rank passes to a collective, as a fixed row of int64 that all ranks exchange."""

    @staticmethod
    def make(op, seq, tensor=None, root=-1, reduce_op=None, extra=0):
        key = (op, root, reduce_op, extra) if tensor is None else (
            op, root, reduce_op, extra, tensor.dtype, tuple(tensor.shape))
        h = _HEADERS.get(key)
        if h is None:
            h = Header._build(op, tensor, root, reduce_op, extra)
            if len(_HEADERS) < 4096:
                _HEADERS[key] = h
        h = h.copy()
        h[1] = seq
        return h

    @staticmethod
    def _build(op, tensor, root, reduce_op, extra):
        h = np.full(_HEADER, -1, dtype=np.int64)
        h[0], h[1] = OP_CODE[op], 0
        if tensor is not None:
            shape = tuple(tensor.shape)
            h[2] = _mpi.DTYPE_CODE[tensor.dtype]
            h[3] = tensor.numel()
            h[4] = len(shape)
            h[5:5 + min(len(shape), _MAXDIMS)] = shape[:_MAXDIMS]
            if len(shape) > _MAXDIMS:
                extra ^= zlib.crc32(repr(shape).encode())
        h[13] = root
        h[14] = REDUCE_CODE[reduce_op] if reduce_op is not None else -1
        h[15] = extra
        return h

    @staticmethod
    def text(h):
        op = OPS[h[0]] if 0 <= h[0] < len(OPS) else f"<op {h[0]}>"
        s = f"{op} #{h[1]}"
        if h[2] >= 0:
            dims = [int(d) for d in h[5:5 + max(min(int(h[4]), _MAXDIMS), 0)]]
            dt = _mpi.DTYPE_OF_CODE[int(h[2])].name
            if h[4] < 0:  # the dtype only (all_to_all_single: dim 0 may differ)
                s += f" {dt}"
            else:
                s += f" {dt}{dims if h[4] <= _MAXDIMS else str(dims)[:-1] + ', ...]'}"
        if h[13] >= 0:
            s += f" root={h[13]}"
        if h[14] >= 0:
            s += f" op={list(_mpi.ReduceOp)[int(h[14])].name}"
        return s


class Work:
    """The handle of an operation run with ``async_op=True``: ``wait()`` blocks until it has
    completed (raising its error, or a timeout error at the group's deadline);
    ``is_completed()`` polls."""

    def __init__(self, group, what, fn, deadline, result=None):
        self._group = group
        self._what = what
        self._fn = fn
        self._deadline = deadline
        self._result = result if result is not None else []
        self._done = threading.Event()
        self._exc = None

    def _execute(self):
        try:
            self._fn()
        except BaseException as e:  # noqa: BLE001  (handed to the waiting thread)
            self._exc = e
        finally:
            self._fn = None
            self._done.set()

    def get_future(self):
        """A ``fiamma.futures.Future`` completed with ``result()`` when the operation
        completes (PyTorch's ``Work.get_future()``)."""
        from fiamma.futures import Future
        return Future._of_work(self)

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        """The tensors the operation wrote (PyTorch's ``Work.result()``)."""
        self.wait()
        return self._result

    def wait(self, timeout=None):
        """Block until done; True on success. ``timeout`` (a timedelta) shortens the wait."""
        limit = self._deadline - time.monotonic()
        if timeout is not None:
            limit = min(limit, _seconds(timeout, "Work.wait"))
        if not self._done.wait(max(limit, 0.0)):
            raise self._group._timed_out(self._what, timeout)
        if self._exc is not None:
            raise self._exc
        return True

    def __repr__(self):
        state = "completed" if self.is_completed() else "pending"
        return f"<fiamma.distributed.Work {self._what} ({state})>"


class ProcessGroup:
    """A set of ranks sharing an MPI communicator. ``rank()`` and ``size()`` are this process's
    rank in the group and the group's size."""

    def __init__(self, comm, ranks, name, timeout, check):
        self._comm = comm            # the collectives (used only by the worker thread)
        self._p2p = comm.Dup()       # send/recv, posted from the calling thread
        self._rank = comm.Get_rank()
        self._size = comm.Get_size()
        self._ranks = list(ranks)    # group rank -> global rank
        self._name = name
        self._timeout = timeout       # seconds
        self._check = check
        self._seq = 0
        self._queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0            # operations queued to or running on the worker thread
        self._thread = None
        self._broken = None
        self._send_seq = {}
        self._barrier_comm = comm.Dup()  # monitored_barrier's (made now: a rank may be gone
        #                                  by the time it is first called)
        self._recv_seq = {}
        # header, slot, and one byte saying whether this rank's data rides in the slot
        row = np.zeros(_HEADER_BYTES + _SLOT_BYTES + 1, dtype=np.uint8)
        self._row_buffers = (row, np.empty((self._size, row.size), dtype=np.uint8))
        self._nccl = None            # the NCCL side (backend "nccl"), see _nccl.py
        self.backend = "mpi"

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return self._name

    def __repr__(self):
        return f"<ProcessGroup {self._name} ranks={self._ranks}>"

    # ---- running operations ----

    def _submit(self, op, header, run, what, result=None, timeout=None, post=None, after=None,
               nbytes=0, async_op=True, fused=None):
        """Run collective ``op``: first (when checking) the headers of all ranks are compared,
        then ``run()`` runs on the worker thread. Returns its Work.

        A small synchronous collective (``post`` given, ``nbytes`` <= INLINE_BYTES, nothing
        queued) runs in the calling thread instead, as MPI non-blocking calls (``post()``
        returns the requests, ``after()`` finishes) polled until the deadline: this saves the
        two thread switches (~60 us) that dominate small collectives. Large ones go to the
        thread, where MPI's blocking algorithms are faster than its non-blocking ones.

        ``fused`` (``(operand, combine)``, a 1-D NumPy view of the input and a function of
        every rank's copy of it, ``(size, n)``) lets a small synchronous checked collective
        (operand up to _SLOT_BYTES) carry its data in the check's allgather: ``combine`` (a
        local reduction, say) runs only after the headers agreed, so the check costs no
        extra round trip. A world of one has nothing to compare and skips the check."""
        if self._broken is not None:
            raise DistBackendError(f"{_What(op, self._seq + 1, what, self)}: process group "
                                   f"{self._name} is unusable: {self._broken}")
        self._seq += 1
        seq = self._seq
        if header is not None:
            header[1] = seq
        what = _What(op, seq, what, self)
        check = self._check and header is not None and self._size > 1
        limit = self._timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        if post is not None and not async_op and nbytes <= INLINE_BYTES:
            with self._lock:
                inline = self._pending == 0
                if inline:
                    self._pending += 1
            if inline:
                try:
                    if check and self._exchange(header, fused, deadline, what, op, seq):
                        pass  # the data rode with the header, and is combined
                    else:
                        self._drive(post(), deadline, what, nbytes)
                    if after is not None:
                        after()
                finally:
                    with self._lock:
                        self._pending -= 1
                return _Completed(result)

        # A small collective is a non-blocking MPI call wherever it runs: a rank may run it
        # inline while another queues it on its worker thread (async_op=True there, or an
        # operation still pending), and MPI never matches a blocking collective with a
        # non-blocking one (that mix hung). Only the size, which every rank agrees on,
        # picks the blocking algorithms.
        small = post is not None and nbytes <= INLINE_BYTES

        def fn():
            if check:
                self._compare(header, op, seq)
            if small:
                _mpi.mpi().Request.Waitall(post())
                if after is not None:
                    after()
            else:
                run()

        w = Work(self, what, fn, deadline, result)
        with self._lock:
            self._pending += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name=f"fiamma.distributed {self._name}")
            self._thread.start()
        self._queue.put(w)
        return w

    def _drive(self, requests, deadline, what, nbytes=0, arrived=None):
        """Poll MPI requests to completion (MPI progresses only inside a call).

        While data moves every rank must poll (sleeping between polls made a 246 KB
        all-reduce ten times slower), so a rank spins for about as long as moving ``nbytes``
        should take (50 us + 1 ms per MB); past that, or while a peer has not arrived yet, a
        spinning rank only burns a core that the peer it waits for (or anyone) could use on a
        shared machine, so it sleeps between polls. ``arrived``, a barrier request posted
        right after the operation, tells the phases apart: until it completes the rank spins
        50 us, then sleeps between polls; once it completes (every rank has posted), the
        spinning budget starts."""
        test = _mpi.mpi().Request.Testall
        if test(requests):
            return
        now = time.monotonic()
        budget = 5e-5 + nbytes * 1e-9
        waiting = arrived is not None
        patient = now + (5e-5 if waiting else budget)
        spins = 0
        while not test(requests):
            spins += 1
            if spins % 16 == 0:
                now = time.monotonic()
                if now > deadline:
                    raise self._timed_out(what)
                if waiting and arrived.Test():
                    waiting = False
                    patient = now + budget
                if now > patient:
                    time.sleep(2e-5)

    def _loop(self):
        while True:
            w = self._queue.get()
            if w is None:
                return
            w._execute()
            with self._lock:
                self._pending -= 1

    def _compare(self, header, op, seq):
        """The worker thread's check: the same row as _exchange's, data unused, and the same
        non-blocking MPI call (MPI never matches a blocking collective with a non-blocking
        one: a rank checking here and one checking inline must meet)."""
        row, rows = self._rows(header, None)
        self._comm.Iallgather(row, rows).Wait()
        self._check_rows(rows[:, :_HEADER_BYTES], op, seq)

    def _rows(self, header, data):
        """This rank's row of the check (its header, then ``data``'s bytes or zeros) and the
        array that receives every rank's. Every check sends the same number of bytes whatever
        the operation and its arguments (ranks that disagree must still exchange rows of one
        size), and the arrays are reused (the inline path runs only while the worker thread is
        idle, so the two never overlap)."""
        row, rows = self._row_buffers
        row[:_HEADER_BYTES] = header.view(np.uint8)
        if data is not None:
            row[_HEADER_BYTES:_HEADER_BYTES + data.size] = data
        row[-1] = data is not None
        return row, rows

    def _exchange(self, header, fused, deadline, what, op, seq):
        """The check on the calling thread (MPI non-blocking, polled). When the operand of a
        ``fused`` collective fits the row's slot, the data rides with the header and
        ``combine`` runs once the headers agree: True then (the operation is done)."""
        data = None
        if fused is not None and fused[0].nbytes <= _SLOT_BYTES:
            data = fused[0].view(np.uint8)
        row, rows = self._rows(header, data)
        self._drive([self._comm.Iallgather(row, rows)], deadline, what, rows.nbytes)
        self._check_rows(rows[:, :_HEADER_BYTES], op, seq)
        # the data is complete only if every rank sent it: a rank running the same collective
        # with async_op=True (checked on the worker thread, no data) makes all run the MPI call
        if data is None or not rows[:, -1].all():
            return False
        if data.size:
            operand, combine = fused
            combine(rows[:, _HEADER_BYTES:_HEADER_BYTES + data.size].view(operand.dtype))
        return True

    def _check_rows(self, rows, op, seq):
        """Raise naming what each rank passed unless every row of ``rows`` (one header a rank,
        int64 or its bytes) is the same."""
        if rows.tobytes() == rows[0].tobytes() * self._size:  # one memcmp, no ufuncs
            return
        rows = np.ascontiguousarray(rows).view(np.int64).reshape(self._size, _HEADER)
        lines = [f"  rank {self._ranks[r]}: {Header.text(rows[r])}" for r in range(self._size)]
        if (rows[:, 0] != rows[0, 0]).any():
            head = f"ranks called different collectives as operation #{seq}"
        else:
            head = f"ranks disagree on what they passed to {op} #{seq}"
        raise DistBackendError(f"fiamma.distributed: {head} in process group {self._name}:\n"
                               + "\n".join(lines))

    def _timed_out(self, what, timeout=None):
        limit = datetime.timedelta(seconds=self._timeout)
        if timeout is not None:
            return DistTimeoutError(f"fiamma.distributed: {what} did not complete within the "
                                    f"wait timeout {timeout}")
        self._broken = f"{what} timed out after {limit}"
        from fiamma.distributed import _state

        _state.mark_broken()
        return DistTimeoutError(
            f"fiamma.distributed: {what} did not complete within the timeout {limit}: another "
            "rank did not join it (it died, hangs, or called a different operation). The group "
            "is unusable now; this process aborts the MPI job when it exits.")

    def _shutdown(self):
        if self._thread is not None and self._broken is None:
            self._queue.put(None)
            self._thread.join(timeout=min(self._timeout, 60))
            if self._thread.is_alive():  # stuck in MPI: freeing its communicator would crash
                self._broken = "destroyed while an operation was still running"
        self._thread = None
        if self._broken is None:
            for c in (self._barrier_comm, self._p2p, self._comm):
                if c is None:
                    continue
                try:
                    c.Free()
                except Exception:  # noqa: BLE001  (MPI already finalized: nothing to free)
                    pass

    # ---- ranks ----

    def _group_rank(self, global_rank, what, arg):
        try:
            return self._ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"{what}: {arg}={global_rank} is not a rank of process group "
                             f"{self._name} (its global ranks are {self._ranks})") from None
