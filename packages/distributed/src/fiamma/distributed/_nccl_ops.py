"""The collectives and point-to-point operations of the NCCL backend (CUDA tensors). The
public functions in _collectives.py / _p2p.py send a call here when its tensor is on CUDA;
argument checks and messages match the MPI path's."""

from __future__ import annotations

import zlib

import fiamma
from fiamma.distributed._group import Header, describe_tensor
from fiamma.distributed._mpi import DTYPE_CODE, ReduceOp


def is_cuda(t):
    return isinstance(t, fiamma.Tensor) and t.device.type == "cuda"


def _ng(g, op):
    ng = getattr(g, "_nccl", None)
    if ng is None:
        raise ValueError(f"{op}: CUDA tensors need a process group with backend='nccl' (this "
                         f"group's backend is {g.backend!r})")
    return ng


def _code(ng, op, dtype, what):
    """The NCCL op, and whether to divide by the group size afterwards (ReduceOp.AVG where
    NCCL predates ncclAvg, 2.10)."""
    if op is ReduceOp.AVG and getattr(ng.nccl, "NCCL_AVG", None) is None:
        if not dtype.is_floating_point:
            raise TypeError(f"{what}: ReduceOp.AVG needs a floating point tensor, got {dtype} "
                            "(use SUM and divide)")
        return ng.op(ReduceOp.SUM, dtype, what), True
    return ng.op(op, dtype, what), False


def _divided(g, work, tensor, divide, async_op, mine=True):
    if not divide:
        return work if async_op else None

    def after():
        if mine:
            with fiamma.no_grad():
                tensor.div_(g.size())

    return _then(work, after, [tensor], async_op)


def all_reduce(g, tensor, op, async_op):
    ng = _ng(g, "all_reduce")
    p, dt = ng.ptr(tensor, "all_reduce"), ng.dtype(tensor, "all_reduce")
    code, divide = _code(ng, op, tensor.dtype, "all_reduce")
    n = tensor.numel()
    h = Header.make("all_reduce", 0, tensor, reduce_op=op)
    w = ng.run("all_reduce", h, tensor, lambda s: ng.comm.allReduce(p, p, n, dt, code, s),
               [tensor], tensor, async_op or divide)
    return _divided(g, w, tensor, divide, async_op)


def broadcast(g, tensor, root, async_op):
    ng = _ng(g, "broadcast")
    p, dt = ng.ptr(tensor, "broadcast"), ng.dtype(tensor, "broadcast")
    n = tensor.numel()
    h = Header.make("broadcast", 0, tensor, root=root)
    return ng.run("broadcast", h, tensor,
                  lambda s: ng.comm.broadcast(p, p, n, dt, root, s), [tensor], tensor, async_op)


def reduce(g, tensor, root, op, async_op):
    ng = _ng(g, "reduce")
    p, dt = ng.ptr(tensor, "reduce"), ng.dtype(tensor, "reduce")
    code, divide = _code(ng, op, tensor.dtype, "reduce")
    n = tensor.numel()
    h = Header.make("reduce", 0, tensor, root=root, reduce_op=op)
    w = ng.run("reduce", h, tensor, lambda s: ng.comm.reduce(p, p, n, dt, code, root, s),
               [tensor], tensor, async_op or divide)
    return _divided(g, w, tensor, divide, async_op, mine=g.rank() == root)


def all_gather_into_tensor(g, output, input, async_op):
    what = "all_gather_into_tensor"
    ng = _ng(g, what)
    if output.dtype != input.dtype:
        raise TypeError(f"{what}: output dtype {output.dtype} differs from the input's "
                        f"{input.dtype}")
    if output.numel() != input.numel() * g.size():
        raise ValueError(f"{what}: output must hold world_size ({g.size()}) x the input's "
                         f"elements ({describe_tensor(input)}), got {describe_tensor(output)}")
    pi, po, dt = ng.ptr(input, what), ng.ptr(output, what), ng.dtype(input, what)
    n = input.numel()
    h = Header.make(what, 0, input)
    return ng.run(what, h, input, lambda s: ng.comm.allGather(pi, po, n, dt, s), [output],
                  (input, output), async_op)


def all_gather(g, tensor_list, tensor, async_op):
    """Into one staging tensor, then copied into the list's tensors on the current stream."""
    flat = fiamma.empty((g.size(),) + tuple(tensor.shape), dtype=tensor.dtype,
                        device=tensor.device)
    w = all_gather_into_tensor(g, flat, tensor, True)

    def unpack():
        with fiamma.no_grad():
            for r, t in enumerate(tensor_list):
                t.copy_(flat[r])

    return _then(w, unpack, list(tensor_list), async_op)


def reduce_scatter_tensor(g, output, input, op, async_op):
    what = "reduce_scatter_tensor"
    ng = _ng(g, what)
    if output.dtype != input.dtype:
        raise TypeError(f"{what}: output dtype {output.dtype} differs from the input's "
                        f"{input.dtype}")
    if output.numel() * g.size() != input.numel():
        raise ValueError(f"{what}: input must hold world_size ({g.size()}) x the output's "
                         f"elements ({describe_tensor(output)}), got {describe_tensor(input)}")
    pi, po, dt = ng.ptr(input, what), ng.ptr(output, what), ng.dtype(input, what)
    code, divide = _code(ng, op, input.dtype, what)
    n = output.numel()
    h = Header.make(what, 0, input, reduce_op=op)
    w = ng.run(what, h, input, lambda s: ng.comm.reduceScatter(pi, po, n, dt, code, s),
               [output], (input, output), async_op or divide)
    return _divided(g, w, output, divide, async_op)


def all_to_all_single(g, output, input, isz, osz, row, async_op):
    """Split sizes already checked (rows per rank); one NCCL group of sends and receives."""
    what = "all_to_all_single"
    ng = _ng(g, what)
    pi, po, dt = ng.ptr(input, what), ng.ptr(output, what), ng.dtype(input, what)
    size = input.element_size()
    nccl = ng.nccl

    def launch(s):
        nccl.groupStart()
        try:
            soff = roff = 0
            for r in range(g.size()):
                ns, nr = isz[r] * row, osz[r] * row
                if ns:
                    ng.comm.send(pi + soff * size, ns, dt, r, s)
                if nr:
                    ng.comm.recv(po + roff * size, nr, dt, r, s)
                soff += ns
                roff += nr
        finally:
            nccl.groupEnd()

    h = Header.make(what, 0, extra=zlib.crc32(repr(tuple(input.shape[1:])).encode()))
    return ng.run(what, h, input, launch, [output], (input, output), async_op)


def _grouped(ng, pairs):
    """launch(stream): one NCCL group of (send?, pointer, count, datatype, peer) operations."""
    def launch(s):
        ng.nccl.groupStart()
        try:
            for send, p, n, dt, peer in pairs:
                if n:
                    (ng.comm.send if send else ng.comm.recv)(p, n, dt, peer, s)
        finally:
            ng.nccl.groupEnd()
    return launch


def gather(g, tensor, gather_list, root, mine, async_op):
    """Every rank sends to ``root``, which receives into ``gather_list`` (shapes checked)."""
    ng = _ng(g, "gather")
    dt, n = ng.dtype(tensor, "gather"), tensor.numel()
    pairs = [(True, ng.ptr(tensor, "gather"), n, dt, root)]
    if mine:
        pairs += [(False, ng.ptr(t, "gather"), n, dt, r) for r, t in enumerate(gather_list)]
    h = Header.make("gather", 0, tensor, root=root)
    return ng.run("gather", h, tensor, _grouped(ng, pairs), list(gather_list or []),
                  (tensor, gather_list), async_op)


def scatter(g, tensor, scatter_list, root, mine, async_op):
    """``root`` sends ``scatter_list[r]`` to rank r; every rank receives into ``tensor``."""
    ng = _ng(g, "scatter")
    dt, n = ng.dtype(tensor, "scatter"), tensor.numel()
    pairs = [(False, ng.ptr(tensor, "scatter"), n, dt, root)]
    if mine:
        pairs += [(True, ng.ptr(t, "scatter"), n, dt, r) for r, t in enumerate(scatter_list)]
    h = Header.make("scatter", 0, tensor, root=root)
    return ng.run("scatter", h, tensor, _grouped(ng, pairs), [tensor], (tensor, scatter_list),
                  async_op)


def all_to_all(g, outputs, inputs, async_op):
    """Rank r's ``outputs[q]`` receives rank q's ``inputs[r]`` (any sizes, one dtype); the
    sizes are not exchanged first, so a size that disagrees hangs until the timeout."""
    ng = _ng(g, "all_to_all")
    dt = ng.dtype(inputs[0], "all_to_all")
    pairs = []
    for r in range(g.size()):
        pairs.append((True, ng.ptr(inputs[r], "all_to_all"), inputs[r].numel(), dt, r))
        pairs.append((False, ng.ptr(outputs[r], "all_to_all"), outputs[r].numel(), dt, r))
    h = Header.make("all_to_all", 0)
    h[2] = DTYPE_CODE[inputs[0].dtype]
    return ng.run("all_to_all", h, f"{len(inputs)} tensors", _grouped(ng, pairs), outputs,
                  (inputs, outputs), async_op)


def barrier(g, async_op):
    """An all_reduce of one element on the device; the host waits for it (as PyTorch's)."""
    ng = _ng(g, "barrier")
    one = fiamma.ones(1, device=f"cuda:{ng.device}")
    p, dt = one.data_ptr(), ng.dtype(one, "barrier")
    code = ng.op(ReduceOp.SUM, one.dtype, "barrier")
    w = ng.run("barrier", Header.make("barrier", 0), "barrier",
               lambda s: ng.comm.allReduce(p, p, 1, dt, code, s), [], one, True)
    if async_op:
        return w
    w.synchronize()
    return None


def p2p(g, tensor, peer, send, what):
    """send/isend (``send=True``) or recv/irecv of ``tensor`` with group rank ``peer``."""
    ng = _ng(g, what)
    p, dt = ng.ptr(tensor, what), ng.dtype(tensor, what)
    n = tensor.numel()
    if send:
        def launch(s):
            ng.comm.send(p, n, dt, peer, s)
    else:
        def launch(s):
            ng.comm.recv(p, n, dt, peer, s)
    return ng.run("send" if send else "recv", None, what, launch, [tensor], tensor, True,
                  collective=False)


class _ThenWork:
    """A Work whose ``wait()`` also runs a finishing step (copies out of a staging buffer);
    the MPI collectives (_collectives) use it too."""

    def __init__(self, work, then, result):
        self._work, self._then, self._result, self._finished = work, then, result, False

    def wait(self, timeout=None):
        self._work.wait(timeout)
        if not self._finished:
            self._then()
            self._finished = True
        return True

    def get_future(self):
        """A ``fiamma.futures.Future`` completed with ``result()`` when the operation
        completes (PyTorch's ``Work.get_future()``)."""
        from fiamma.futures import Future
        return Future._of_work(self)

    def is_completed(self):
        return self._work.is_completed()

    def is_success(self):
        return self._work.is_success()

    def exception(self):
        return self._work.exception()

    def result(self):
        self.wait()
        return self._result


class _Then(_ThenWork):
    """A work handle that runs a finishing step (on the current stream) after the wait, and
    whose ``synchronize()`` also waits for the NCCL stream."""

    def synchronize(self, timeout=None):
        self.wait(timeout)
        self._work.synchronize(timeout)
        return True


def _then(work, then, result, async_op):
    w = _Then(work, then, result)
    if async_op:
        return w
    w.wait()
    return None
