"""The NCCL backend: collectives on CUDA tensors through CuPy's ``cupy.cuda.nccl``.

``init_process_group("nccl")`` forms the world as the MPI backend does (launcher, or a store
rendezvous); rank 0 of each group then creates an NCCL unique id, which travels over the
group's MPI communicator, and every rank creates its ``NcclCommunicator`` on its current CUDA
device (``fiamma.cuda.set_device(local_rank)`` first, or ``device_id=``). Objects, CPU tensors
and the metadata check still go over MPI.

A collective is queued on the group's own NCCL stream after an event of the caller's current
stream (so it sees the values the caller's kernels produce), and the caller's stream then waits
on the collective's end event: no host synchronisation and no copies (NCCL gets the tensors'
device pointers). ``async_op=True`` returns a work handle whose ``wait()`` makes the current
stream wait (``synchronize()`` blocks the host; with ``TORCH_NCCL_BLOCKING_WAIT=1``, ``wait()``
does too). A watchdog thread polls the pending collectives: when one misses the group's timeout,
or NCCL reports an asynchronous error (``ncclCommGetAsyncError``), the communicator is aborted
(``ncclCommAbort``, which frees the kernels stuck in it), the error is printed naming the
operation, and every later use of the group raises it.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import fiamma
from fiamma.distributed._group import (
    DistBackendError,
    DistTimeoutError,
    _What,
    describe_tensor,
)
from fiamma.distributed._mpi import ReduceOp


def modules(what="init_process_group"):
    """(cupy, cupy.cuda.nccl), or an error saying what to install."""
    try:
        import cupy
        from cupy.cuda import nccl
    except Exception as e:  # ImportError, or CuPy's error when libnccl is missing
        raise RuntimeError(
            f"{what}: backend='nccl' needs CuPy built with NCCL (`pip install cupy-cuda12x "
            "nvidia-nccl-cu12`); importing cupy.cuda.nccl failed: "
            f"{type(e).__name__}: {e}") from e
    if not getattr(nccl, "available", True):
        raise RuntimeError(f"{what}: backend='nccl': this CuPy was built without NCCL")
    return cupy, nccl


def available():
    try:
        modules()
    except RuntimeError:
        return False
    return fiamma.cuda.is_available()


_DTYPES = {fiamma.float32: "NCCL_FLOAT32", fiamma.float64: "NCCL_FLOAT64",
           fiamma.float16: "NCCL_FLOAT16", fiamma.bfloat16: "NCCL_BFLOAT16",
           fiamma.int8: "NCCL_INT8", fiamma.uint8: "NCCL_UINT8", fiamma.int32: "NCCL_INT32",
           fiamma.int64: "NCCL_INT64", fiamma.bool: "NCCL_UINT8"}
_OPS = {ReduceOp.SUM: "NCCL_SUM", ReduceOp.PRODUCT: "NCCL_PROD", ReduceOp.MIN: "NCCL_MIN",
        ReduceOp.MAX: "NCCL_MAX", ReduceOp.AVG: "NCCL_AVG"}


class NcclWork:
    """The handle of a collective queued on a group's NCCL stream."""

    def __init__(self, group, what, event, deadline, result, keep):
        self._group, self._what, self._event = group, what, event
        self._deadline, self._result, self._keep = deadline, result, keep
        self._exc = None

    def get_future(self):
        """A ``fiamma.futures.Future`` completed with ``result()`` when the operation
        completes (PyTorch's ``Work.get_future()``)."""
        from fiamma.futures import Future
        return Future._of_work(self)

    def is_completed(self):
        if self._exc is None and self._group.broken is not None:
            self._exc = self._group.broken
        return self._exc is not None or bool(self._event.done)

    def is_success(self):
        return self.is_completed() and self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        self.wait()
        return self._result

    def wait(self, timeout=None):
        """Make the current stream wait for the collective (the host waits too when
        ``TORCH_NCCL_BLOCKING_WAIT=1`` or a ``timeout`` is given)."""
        self._group.raise_if_broken(self._what)
        if timeout is not None or os.environ.get("TORCH_NCCL_BLOCKING_WAIT") == "1":
            self.synchronize(timeout)
        cp = self._group.cupy
        with cp.cuda.Device(self._group.device):
            cp.cuda.get_current_stream().wait_event(self._event)
        return True

    def synchronize(self, timeout=None):
        """Block the host until the collective has run (or failed / timed out)."""
        limit = self._deadline
        if timeout is not None:
            from fiamma.distributed._group import _seconds

            limit = min(limit, time.monotonic() + _seconds(timeout, "Work.synchronize"))
        pause = 1e-5
        while not self.is_completed():
            if time.monotonic() > limit:
                if timeout is not None and limit < self._deadline:
                    raise DistTimeoutError(f"fiamma.distributed: {self._what} did not complete "
                                           f"within the wait timeout {timeout}")
                self._group.fail(DistTimeoutError(self._group.timeout_text(self._what)))
                break
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        if self._exc is not None:
            raise self._exc
        return True

    def __repr__(self):
        return f"<fiamma.distributed.Work nccl {self._what}>"


class NcclGroup:
    """The NCCL side of a ProcessGroup: the communicator, its stream, the watchdog."""

    def __init__(self, pg, device):
        self.cupy, self.nccl = modules()
        self.pg = pg
        self.device = device
        self.broken = None
        self.pending = []
        self.lock = threading.Lock()
        self.watchdog = None
        self.p2p_seq = 0
        cp = self.cupy
        uid = {}

        with cp.cuda.Device(device):
            bus = getattr(cp.cuda.Device(device), "pci_bus_id", None) or f"device {device}"
        me = (socket.gethostname(), bus)

        def make_id():  # on rank 0, then broadcast over MPI (in the group's worker thread)
            uid["gpus"] = pg._comm.allgather(me)
            ident = self.nccl.get_unique_id() if pg.rank() == 0 else None
            uid["id"] = pg._comm.bcast(ident, root=0)

        pg._submit("broadcast", None, make_id, "the NCCL unique id").wait()
        gpus = uid["gpus"]
        for r, place in enumerate(gpus):
            first = gpus.index(place)
            if first != r:  # every rank sees the same list, so every rank raises
                raise RuntimeError(
                    f"init_process_group: backend='nccl': ranks {pg._ranks[first]} and "
                    f"{pg._ranks[r]} would share one GPU ({place[1]} on {place[0]}); NCCL "
                    "(>= 2.5) refuses two ranks of a communicator on one device. Give each rank "
                    "its own GPU (fiamma.cuda.set_device(local_rank), or device_id=), or use "
                    "backend='mpi' with CPU tensors")
        with cp.cuda.Device(device):
            # the id goes back as get_unique_id made it: a tuple of ints before CuPy 14, bytes
            # from CuPy 14 on (whose NcclCommunicator refuses a tuple)
            self.comm = self.nccl.NcclCommunicator(pg.size(), uid["id"], pg.rank())
            self.stream = cp.cuda.Stream(non_blocking=True)

    # ---- failure ----

    def timeout_text(self, what):
        import datetime

        return (f"fiamma.distributed: {what} (nccl) did not complete within the timeout "
                f"{datetime.timedelta(seconds=self.pg._timeout)}: another rank did not join it "
                "(it died, hangs, or called a different operation). The NCCL communicator was "
                "aborted; the group is unusable now.")

    def fail(self, exc):
        with self.lock:
            if self.broken is not None:
                return
            self.broken = exc
            pending, self.pending = self.pending, []
        for w in pending:
            w._exc = exc
        try:
            self.comm.abort()
        except Exception:  # noqa: BLE001  (already aborted or destroyed)
            pass
        from fiamma.distributed import _state

        _state.mark_broken()
        sys.stderr.write(f"{exc}\n")
        sys.stderr.flush()

    def raise_if_broken(self, what):
        if self.broken is not None:
            raise DistBackendError(f"fiamma.distributed: {what}: process group "
                                   f"{self.pg._name} is unusable: {self.broken}")

    def _watch(self):
        try:
            self._watch_loop()
        except Exception as e:  # noqa: BLE001  (a CUDA error while polling an event)
            self.fail(DistBackendError(f"fiamma.distributed: the NCCL watchdog of group "
                                       f"{self.pg._name} failed: {type(e).__name__}: {e}"))

    def _watch_loop(self):
        cp = self.cupy
        with cp.cuda.Device(self.device):
            while True:
                with self.lock:
                    if self.broken is not None or self.watchdog is None:
                        return
                    self.pending = [w for w in self.pending if not w._event.done]
                    pending = list(self.pending)
                if pending:
                    try:
                        self.comm.check_async_error()
                    except Exception as e:  # noqa: BLE001  (NcclError)
                        self.fail(DistBackendError(
                            f"fiamma.distributed: NCCL reported an error while {pending[0]._what}"
                            f" was running: {e}"))
                        return
                    late = [w for w in pending if time.monotonic() > w._deadline]
                    if late:
                        self.fail(DistTimeoutError(self.timeout_text(late[0]._what)))
                        return
                time.sleep(0.05)

    def close(self):
        with self.lock:
            self.watchdog = None
        if self.broken is None:
            try:
                with self.cupy.cuda.Device(self.device):
                    self.stream.synchronize()
                self.comm.destroy()
            except Exception:  # noqa: BLE001  (CUDA already torn down at exit)
                pass

    # ---- running ----

    def run(self, op, header, detail, launch, result, keep, async_op, collective=True):
        """Check (over MPI) what the ranks pass, queue ``launch(stream_ptr)`` on the NCCL
        stream after the current stream's work, and return its work handle (or wait for it
        on the current stream)."""
        pg = self.pg
        self.raise_if_broken(f"{op} #{pg._seq + 1}")
        if not collective:  # point-to-point: numbered apart (only two ranks take part)
            self.p2p_seq += 1
            what = _What(op, self.p2p_seq, detail, pg)
        else:
            if header is not None and pg._check:
                pg._submit(op, header, lambda: None, detail, post=lambda: [],
                           async_op=False).wait()
            else:
                pg._seq += 1
            what = _What(op, pg._seq, detail, pg)
        cp = self.cupy
        with cp.cuda.Device(self.device):
            ready = cp.cuda.Event(disable_timing=True)
            ready.record(cp.cuda.get_current_stream())
            self.stream.wait_event(ready)
            try:
                launch(self.stream.ptr)
            except Exception as e:  # noqa: BLE001  (NcclError and friends)
                raise DistBackendError(f"fiamma.distributed: {what} (nccl) failed: {e}") from e
            done = cp.cuda.Event(disable_timing=True)
            done.record(self.stream)
        w = NcclWork(self, what, done, time.monotonic() + pg._timeout, result, keep)
        with self.lock:
            self.pending.append(w)
            if self.watchdog is None:
                self.watchdog = threading.Thread(target=self._watch, daemon=True,
                                                 name=f"fiamma.distributed nccl {pg._name}")
                self.watchdog.start()
        if async_op:
            return w
        w.wait()
        return None

    # ---- argument helpers ----

    def ptr(self, t, op):
        if not isinstance(t, fiamma.Tensor):
            raise TypeError(f"{op}: expected a fiamma.Tensor, got {type(t).__name__}")
        if t.device.type != "cuda":
            raise ValueError(f"{op}: the 'nccl' backend works on CUDA tensors; got a tensor on "
                             f"{t.device} (mixing CPU and CUDA tensors in one call)")
        if (t.device.index or 0) != self.device:
            raise ValueError(f"{op}: the tensor is on {t.device} but this rank's NCCL "
                             f"communicator is on cuda:{self.device}")
        if not t.is_contiguous():
            raise ValueError(f"{op}: tensors must be contiguous (got shape {tuple(t.shape)} with "
                             f"strides {t.stride()}); call .contiguous() first")
        return t.data_ptr()

    def dtype(self, t, op):
        name = _DTYPES.get(t.dtype)
        code = getattr(self.nccl, name, None) if name else None
        if code is None:
            raise TypeError(f"{op}: NCCL has no data type for {t.dtype} (NCCL carries float16/"
                            "bfloat16/float32/float64, int8/uint8/int32/int64 and bool)")
        return code

    def op(self, op, dtype, name):
        if not isinstance(op, ReduceOp):
            raise TypeError(f"{name}: op must be a fiamma.distributed.ReduceOp, got {op!r}")
        if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
            raise TypeError(f"{name}: NCCL has no bitwise reductions ({op.name}); use the 'mpi' "
                            "backend with CPU tensors")
        if op is ReduceOp.AVG and not dtype.is_floating_point:
            raise TypeError(f"{name}: ReduceOp.AVG needs a floating point tensor, got {dtype} "
                            "(use SUM and divide)")
        if dtype is fiamma.bool:  # PyTorch: SUM on bool is a logical or, PRODUCT a logical and
            op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(op, op)
        return getattr(self.nccl, _OPS[op])


def describe(t):
    return describe_tensor(t)
