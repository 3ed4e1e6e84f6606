"""Point-to-point: send/recv/isend/irecv. Posted at once from the calling thread as MPI
non-blocking requests on the group's point-to-point communicator (a blocking receive on the
worker thread would stall the sends queued behind it); ``wait()`` drives them to completion
by polling, with the group's deadline. Each message is preceded by a small header (dtype,
shape, sequence number) so that a receive of the wrong size or dtype names both sides."""

from __future__ import annotations

import datetime
import time

import numpy as np

from fiamma.distributed import _mpi, _nccl_ops as _N
from fiamma.distributed._group import (
    DistBackendError,
    Header,
    _seconds,
    describe_tensor,
)
from fiamma.distributed._mpi import buffer, datatype
from fiamma.distributed._state import resolve


def _tags(tag):
    tag = int(tag)
    if tag < 0:
        raise ValueError(f"tag must be non-negative, got {tag}")
    return 2 * tag, 2 * tag + 1


class P2PWork:
    """The handle of ``isend``/``irecv``: ``wait()``, ``is_completed()``; for a receive,
    ``source_rank()`` is the global rank the message came from."""

    def __init__(self, group, what, deadline):
        self._group = group
        self._what = what
        self._deadline = deadline
        self._requests = []
        self._done = False
        self._exc = None
        self._after = None      # a receive from any source posts its data request later
        self._check = None
        self._source = None
        self._nbytes = 0

    def _poll(self):
        MPI = _mpi.mpi()
        if self._done:
            return True
        try:
            statuses = [MPI.Status() for _ in self._requests]
            if not MPI.Request.Testall(self._requests, statuses):
                return False
            self._statuses = statuses
            if self._after is not None:
                step, self._after = self._after, None
                step()
                return self._poll()
        except MPI.Exception as e:
            self._exc = DistBackendError(f"fiamma.distributed: {self._what} failed: "
                                         f"{self._explain() or e}")
        else:
            if self._check is not None:
                msg = self._check()
                if msg:
                    self._exc = DistBackendError(f"fiamma.distributed: {self._what}: {msg}")
        self._done = True
        return True

    def _explain(self):
        return self._check() if self._check is not None else None

    def get_future(self):
        """A ``fiamma.futures.Future`` completed with ``result()`` when the operation
        completes (PyTorch's ``Work.get_future()``)."""
        from fiamma.futures import Future
        return Future._of_work(self)

    def is_completed(self):
        return self._poll()

    def is_success(self):
        return self._poll() and self._exc is None

    def exception(self):
        return self._exc

    def source_rank(self):
        self.wait()
        return self._source

    def wait(self, timeout=None):
        limit = self._deadline
        if timeout is not None:
            limit = min(limit, time.monotonic() + _seconds(timeout, "Work.wait"))
        # MPI progresses only inside a call: poll busily for about as long as the message
        # should take (1 ms + 1 ms per MB), then with short sleeps that leave the CPU to others
        patient = time.monotonic() + 1e-3 + self._nbytes * 1e-9
        while not self._poll():
            now = time.monotonic()
            if now > limit:
                raise self._group._timed_out(self._what, timeout)
            if now > patient:
                time.sleep(2e-5)
        if self._exc is not None:
            raise self._exc
        return True


def _header(tensor, seq):
    return Header.make("broadcast", seq, tensor)  # the op field is unused for messages


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` without waiting; returns a handle to ``wait()`` on. The
    tensor must not be modified before the send completes."""
    g = resolve(group, "isend")
    if g is None:
        return None
    from fiamma.distributed._collectives import _root

    peer = _root(g, "isend", dst, group_dst, "dst")
    dtag, htag = _tags(tag)
    if _N.is_cuda(tensor):
        return _N.p2p(g, tensor, peer, True, f"send of {describe_tensor(tensor)} to rank "
                      f"{g._ranks[peer]}")
    buf, dt = buffer(tensor, "isend"), datatype(tensor.dtype)
    seq = g._send_seq[peer] = g._send_seq.get(peer, 0) + 1
    h = _header(tensor, seq)
    w = P2PWork(g, f"send #{seq} of {describe_tensor(tensor)} to rank {g._ranks[peer]} "
                   f"(tag {tag}) in group {g.name()}", time.monotonic() + g._timeout)
    w._nbytes = buf.nbytes
    w._requests = [g._p2p.Isend(h, dest=peer, tag=htag),
                   g._p2p.Isend([buf, dt], dest=peer, tag=dtag)]
    w._keep = h
    return w


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` (any rank when None) without waiting."""
    g = resolve(group, "irecv")
    if g is None:
        return None
    MPI = _mpi.mpi()
    from fiamma.distributed._collectives import _root

    peer = None if src is None and group_src is None else _root(g, "irecv", src, group_src,
                                                                 "src")
    dtag, htag = _tags(tag)
    if _N.is_cuda(tensor):
        if peer is None:
            raise ValueError("irecv: NCCL cannot receive from any rank: give src")
        w = _N.p2p(g, tensor, peer, False, f"recv into {describe_tensor(tensor)} from rank "
                   f"{g._ranks[peer]}")
        w._source = g._ranks[peer]
        return w
    buf, dt = buffer(tensor, "irecv"), datatype(tensor.dtype)
    mine = _header(tensor, 0)
    theirs = np.zeros_like(mine)
    frm = "any rank" if peer is None else f"rank {g._ranks[peer]}"
    w = P2PWork(g, f"recv into {describe_tensor(tensor)} from {frm} (tag {tag}) in group "
                   f"{g.name()}", time.monotonic() + g._timeout)

    def check():
        if theirs[1] == 0:
            return None
        if (theirs[2:13] != mine[2:13]).any():
            return (f"the receiving tensor is {describe_tensor(tensor)} but rank "
                    f"{w._source} sent {Header.text(theirs).split(' ', 2)[-1]} "
                    f"(its send #{theirs[1]})")
        return None

    w._check = check
    w._nbytes = buf.nbytes
    if peer is not None:
        w._source = g._ranks[peer]
        w._requests = [g._p2p.Irecv(theirs, source=peer, tag=htag),
                       g._p2p.Irecv([buf, dt], source=peer, tag=dtag)]
    else:
        w._requests = [g._p2p.Irecv(theirs, source=MPI.ANY_SOURCE, tag=htag)]

        def data():
            who = w._statuses[0].Get_source()
            w._source = g._ranks[who]
            if (theirs[2:13] != mine[2:13]).any():
                raise MPI.Exception(MPI.ERR_TRUNCATE)
            w._requests = [g._p2p.Irecv([buf, dt], source=who, tag=dtag)]

        w._after = data
    return w


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` and wait until it has been sent."""
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` (any rank when None); returns the sender's
    global rank."""
    w = irecv(tensor, src, group, tag, group_src)
    if w is None:
        return -1
    w.wait()
    return w._source


class P2POp:
    """One point-to-point operation for :func:`batch_isend_irecv`: ``op`` is ``isend`` or
    ``irecv``, with the tensor, the peer's rank (``peer``, or ``group_peer`` within ``group``)
    and the tag."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                             "``torch.distributed.isend`` or ``torch.distributed.irecv``.")
        import fiamma

        if not isinstance(tensor, fiamma.Tensor):
            raise TypeError(f"P2POp: tensor must be a tensor, got {type(tensor).__name__}")
        if (peer is None) == (group_peer is None):
            raise ValueError("P2POp: give exactly one of peer and group_peer")
        self.op, self.tensor, self.peer, self.group = op, tensor, peer, group
        self.tag, self.group_peer = tag, group_peer

    def __repr__(self):
        return (f"P2POp(op={self.op.__name__}, peer={self.peer}, group_peer="
                f"{self.group_peer}, tag={self.tag}, tensor=({tuple(self.tensor.shape)}, "
                f"{self.tensor.dtype}))")


def batch_isend_irecv(p2p_op_list):
    """Post every operation of ``p2p_op_list`` (:class:`P2POp` objects, one process group)
    without waiting; returns their handles in order. Every operation is non-blocking, so the
    ranks may list their sends and receives in any order."""
    ops = list(p2p_op_list) if isinstance(p2p_op_list, (list, tuple)) else None
    if not ops or not all(isinstance(o, P2POp) for o in ops):
        raise ValueError("batch_isend_irecv: expected a non-empty list of P2POp, got "
                         f"{type(p2p_op_list).__name__}"
                         + ("" if ops is None else f" of {[type(o).__name__ for o in ops]}"))
    groups = {id(resolve(o.group, "batch_isend_irecv")) for o in ops}
    if len(groups) > 1:
        raise ValueError("batch_isend_irecv: all ops need to use the same group")
    works = []
    for o in ops:
        if o.op is isend:
            works.append(isend(o.tensor, o.peer, o.group, o.tag, group_dst=o.group_peer))
        else:
            works.append(irecv(o.tensor, o.peer, o.group, o.tag, group_src=o.group_peer))
    return works


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that names the ranks that did not reach it: every rank reports to rank 0 of
    the group, which releases them all once everyone has arrived. On rank 0 a timeout raises
    ``DistTimeoutError`` naming the first missing rank (every missing rank with
    ``wait_all_ranks=True``); the others time out waiting for the release. ``timeout``
    (a timedelta) defaults to the group's.

    >>> import fiamma.distributed as dist
    >>> dist.init_process_group()
    >>> dist.monitored_barrier()
    >>> dist.destroy_process_group()
    """
    from fiamma.distributed._group import DistTimeoutError, _seconds
    from fiamma.distributed._state import mark_broken

    g = resolve(group, "monitored_barrier")
    if g is None:
        return
    seconds = _seconds(timeout, "monitored_barrier") or g._timeout
    if g.size() == 1:
        return
    comm = g._barrier_comm
    test = _mpi.mpi().Request.Test
    deadline = time.monotonic() + seconds
    token = np.zeros(1, dtype=np.int64)
    if g.rank() != 0:
        requests = [comm.Isend(token, dest=0, tag=1), comm.Irecv(np.zeros(1, np.int64),
                                                                 source=0, tag=2)]
        while not all(test(r) for r in requests):
            if time.monotonic() > deadline:
                mark_broken()
                raise DistTimeoutError(
                    f"fiamma.distributed: monitored_barrier: rank {g._ranks[g.rank()]} was not "
                    f"released by rank {g._ranks[0]} within {datetime.timedelta(seconds=seconds)}"
                    " (another rank did not arrive, or rank 0 failed)")
            time.sleep(2e-5)
        return
    arrivals = {r: comm.Irecv(np.zeros(1, np.int64), source=r, tag=1)
                for r in range(1, g.size())}
    waiting = set(arrivals)
    while waiting:
        waiting = {r for r in waiting if not test(arrivals[r])}
        if waiting and time.monotonic() > deadline:
            mark_broken()
            late = sorted(g._ranks[r] for r in waiting)
            who = (f"ranks {late} did" if wait_all_ranks and len(late) > 1
                   else f"rank {late[0]} did")
            raise DistTimeoutError(
                f"fiamma.distributed: monitored_barrier: {who} not reach the barrier within "
                f"{datetime.timedelta(seconds=seconds)} (group {g.name()})")
        if waiting:
            time.sleep(2e-5)
    releases = [comm.Isend(token, dest=r, tag=2) for r in range(1, g.size())]
    _mpi.mpi().Request.Waitall(releases)
