"""Collectives on tensors. Each one checks its arguments here, then queues the MPI call to the
group's worker thread (see _group.py); the tensors' memory is handed to MPI as is."""

from __future__ import annotations

import zlib

import numpy as np

import fiamma
from fiamma.distributed import _mpi, _nccl_ops as _N
from fiamma.distributed._group import Header, describe_tensor
from fiamma.distributed._mpi import ReduceOp, buffer, datatype, mpi_op, numpy_op
from fiamma.distributed._state import resolve


def _finish(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


def _root(g, what, global_rank, group_rank, name):
    if group_rank is not None:
        if global_rank is not None and global_rank != g._ranks[group_rank]:
            raise ValueError(f"{what}: {name}={global_rank} and group_{name}={group_rank} "
                             "disagree")
        if not 0 <= group_rank < g.size():
            raise ValueError(f"{what}: group_{name}={group_rank} is not in [0, {g.size()})")
        return group_rank
    if global_rank is None:
        raise ValueError(f"{what}: {name} is required")
    return g._group_rank(global_rank, what, name)


def _half(t):
    """float16/bfloat16 reduce through a user-defined MPI op: kept on the blocking path."""
    return t.dtype in (fiamma.float16, fiamma.bfloat16)


def _avg(tensor, buf, n):
    """Divide by the group size, in NumPy (the worker thread never runs fiamma ops)."""
    if tensor.dtype in (fiamma.float16, fiamma.bfloat16):
        _mpi.from_float32(_mpi.to_float32(buf, tensor.dtype) / n, tensor.dtype, buf)
    else:
        np.divide(buf, n, out=buf)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over all ranks of ``group`` in place (every rank gets the result).

    >>> import fiamma, fiamma.distributed as dist
    >>> dist.init_process_group("mpi")
    >>> t = fiamma.tensor([1.0, 2.0])
    >>> dist.all_reduce(t, op=dist.ReduceOp.SUM); t.tolist()
    [1.0, 2.0]
    >>> dist.destroy_process_group()
    """
    g = resolve(group, "all_reduce")
    if g is None:
        return None
    if _N.is_cuda(tensor):
        return _N.all_reduce(g, tensor, op, async_op)
    buf = buffer(tensor, "all_reduce")
    mop = mpi_op(op, tensor.dtype, "all_reduce")
    dt = datatype(tensor.dtype)
    MPI = _mpi.mpi()

    def after():
        if op is ReduceOp.AVG:
            _avg(tensor, buf, g.size())

    def run():
        g._comm.Allreduce(MPI.IN_PLACE, [buf, dt], mop)
        after()

    def post():
        return [g._comm.Iallreduce(MPI.IN_PLACE, [buf, dt], mop)]

    fused = None
    if g._check and g._size > 1 and not _half(tensor):
        ufunc = numpy_op(op, tensor.dtype)
        floating = tensor.dtype.is_floating_point

        def reduce_rows(rows):  # every rank reduces the same rows in the same order
            if len(rows) == 2:
                ufunc(rows[0], rows[1], out=buf)
            else:
                ufunc.reduce(rows, axis=0, out=buf)

        def combine(rows):
            if floating:  # overflow to inf is a result, as from MPI, not a NumPy warning
                with np.errstate(over="ignore", invalid="ignore"):
                    reduce_rows(rows)
            else:
                reduce_rows(rows)

        fused = (buf, combine)
    h = Header.make("all_reduce", 0, tensor, reduce_op=op)
    return _finish(g._submit("all_reduce", h, run, tensor, [tensor],
                            post=None if _half(tensor) else post, after=after,
                            nbytes=buf.nbytes, async_op=async_op, fused=fused), async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy ``tensor`` of rank ``src`` (a global rank) into ``tensor`` of every rank."""
    g = resolve(group, "broadcast")
    if g is None:
        return None
    root = _root(g, "broadcast", src, group_src, "src")
    if _N.is_cuda(tensor):
        return _N.broadcast(g, tensor, root, async_op)
    buf, dt = buffer(tensor, "broadcast"), datatype(tensor.dtype)

    def run():
        g._comm.Bcast([buf, dt], root=root)

    def post():
        return [g._comm.Ibcast([buf, dt], root=root)]

    def combine(rows):
        buf[...] = rows[root]

    h = Header.make("broadcast", 0, tensor, root=root)
    return _finish(g._submit("broadcast", h, run, tensor, [tensor], post=post,
                            nbytes=buf.nbytes, async_op=async_op, fused=(buf, combine)),
                   async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` over all ranks into ``tensor`` of rank ``dst`` (the others' tensors are
    left as they were)."""
    g = resolve(group, "reduce")
    if g is None:
        return None
    root = _root(g, "reduce", dst, group_dst, "dst")
    if _N.is_cuda(tensor):
        return _N.reduce(g, tensor, root, op, async_op)
    buf = buffer(tensor, "reduce")
    mop, dt = mpi_op(op, tensor.dtype, "reduce"), datatype(tensor.dtype)
    MPI = _mpi.mpi()
    me = g.rank()

    def after():
        if me == root and op is ReduceOp.AVG:
            _avg(tensor, buf, g.size())

    def run():
        if me == root:
            g._comm.Reduce(MPI.IN_PLACE, [buf, dt], mop, root=root)
        else:
            g._comm.Reduce([buf, dt], None, mop, root=root)
        after()

    def post():
        if me == root:
            return [g._comm.Ireduce(MPI.IN_PLACE, [buf, dt], mop, root=root)]
        return [g._comm.Ireduce([buf, dt], None, mop, root=root)]

    h = Header.make("reduce", 0, tensor, root=root, reduce_op=op)
    return _finish(g._submit("reduce", h, run, tensor, [tensor],
                            post=None if _half(tensor) else post, after=after,
                            nbytes=buf.nbytes, async_op=async_op), async_op)


def _same(t, ref, what, name):
    if not isinstance(t, fiamma.Tensor):
        raise TypeError(f"{what}: {name} must hold fiamma.Tensor, got {type(t).__name__}")
    if t.dtype != ref.dtype or tuple(t.shape) != tuple(ref.shape):
        raise ValueError(f"{what}: {name} must hold tensors like the input "
                         f"({describe_tensor(ref)}), got {describe_tensor(t)}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[r]`` receives ``tensor`` of group rank r (one tensor per rank)."""
    g = resolve(group, "all_gather")
    if g is None:
        return None
    if len(tensor_list) != g.size():
        raise ValueError(f"all_gather: tensor_list must hold {g.size()} tensors (the group's "
                         f"size), got {len(tensor_list)}")
    for t in tensor_list:
        _same(t, tensor, "all_gather", "tensor_list")
    if _N.is_cuda(tensor):
        return _N.all_gather(g, tensor_list, tensor, async_op)
    buf, dt = buffer(tensor, "all_gather"), datatype(tensor.dtype)
    flat = fiamma.empty((g.size(),) + tuple(tensor.shape), dtype=tensor.dtype)
    out = buffer(flat, "all_gather")
    outs = list(tensor_list)
    targets = [buffer(t, "all_gather") for t in outs]

    def after():
        whole = out.reshape(len(outs), -1)
        for r, b in enumerate(targets):
            b[...] = whole[r]

    def run():
        g._comm.Allgather([buf, dt], [out, dt])
        after()

    def post():
        return [g._comm.Iallgather([buf, dt], [out, dt])]

    h = Header.make("all_gather", 0, tensor)
    return _finish(g._submit("all_gather", h, run, tensor, outs, post=post,
                            after=after, nbytes=out.nbytes, async_op=async_op), async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Gather every rank's ``input_tensor`` into ``output_tensor``, stacked (``(world,
    *shape)``) or concatenated along dim 0 (``(world * shape[0], ...)``), without copies."""
    g = resolve(group, "all_gather_into_tensor")
    if g is None:
        return None
    what = "all_gather_into_tensor"
    if _N.is_cuda(input_tensor) or _N.is_cuda(output_tensor):
        return _N.all_gather_into_tensor(g, output_tensor, input_tensor, async_op)
    if output_tensor.dtype != input_tensor.dtype:
        raise TypeError(f"{what}: output dtype {output_tensor.dtype} differs from the input's "
                        f"{input_tensor.dtype}")
    if output_tensor.numel() != input_tensor.numel() * g.size():
        raise ValueError(f"{what}: output must hold world_size ({g.size()}) x the input's "
                         f"elements ({describe_tensor(input_tensor)}), got "
                         f"{describe_tensor(output_tensor)}")
    buf, out = buffer(input_tensor, what), buffer(output_tensor, what)
    dt = datatype(input_tensor.dtype)

    def run():
        g._comm.Allgather([buf, dt], [out, dt])

    def post():
        return [g._comm.Iallgather([buf, dt], [out, dt])]

    h = Header.make(what, 0, input_tensor)
    return _finish(g._submit(what, h, run, input_tensor, [output_tensor],
                            post=post, nbytes=out.nbytes, async_op=async_op), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` over all ranks and give rank r the r-th of ``world_size`` equal chunks
    (along dim 0) in ``output``."""
    g = resolve(group, "reduce_scatter_tensor")
    if g is None:
        return None
    what = "reduce_scatter_tensor"
    if _N.is_cuda(input) or _N.is_cuda(output):
        return _N.reduce_scatter_tensor(g, output, input, op, async_op)
    if output.dtype != input.dtype:
        raise TypeError(f"{what}: output dtype {output.dtype} differs from the input's "
                        f"{input.dtype}")
    if output.numel() * g.size() != input.numel():
        raise ValueError(f"{what}: input must hold world_size ({g.size()}) x the output's "
                         f"elements ({describe_tensor(output)}), got {describe_tensor(input)}")
    buf, out = buffer(input, what), buffer(output, what)
    mop, dt = mpi_op(op, input.dtype, what), datatype(input.dtype)

    def after():
        if op is ReduceOp.AVG:
            _avg(output, out, g.size())

    def run():
        g._comm.Reduce_scatter_block([buf, dt], [out, dt], mop)
        after()

    def post():
        return [g._comm.Ireduce_scatter_block([buf, dt], [out, dt], mop)]

    h = Header.make(what, 0, input, reduce_op=op)
    return _finish(g._submit(what, h, run, input, [output],
                            post=None if _half(input) else post, after=after,
                            nbytes=buf.nbytes, async_op=async_op), async_op)


def _splits(sizes, rows, n, what, name):
    if sizes is None or len(sizes) == 0:
        if rows % n:
            raise ValueError(f"{what}: dim 0 of {name} ({rows}) is not divisible by the world "
                             f"size ({n}); pass {name}_split_sizes")
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or any(s < 0 for s in sizes) or sum(sizes) != rows:
        raise ValueError(f"{what}: {name}_split_sizes must be {n} non-negative sizes summing to "
                         f"dim 0 of {name} ({rows}), got {sizes}")
    return sizes


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    """Rank r sends the r'-th slice (along dim 0) of ``input`` to rank r' and receives rank
    r''s r-th slice into the r'-th slice of ``output``; the slices are equal unless split
    sizes are given."""
    g = resolve(group, "all_to_all_single")
    if g is None:
        return None
    what = "all_to_all_single"
    if output.dtype != input.dtype:
        raise TypeError(f"{what}: output dtype {output.dtype} differs from the input's "
                        f"{input.dtype}")
    if tuple(output.shape[1:]) != tuple(input.shape[1:]):
        raise ValueError(f"{what}: output and input must agree beyond dim 0, got "
                         f"{describe_tensor(output)} and {describe_tensor(input)}")
    n = g.size()
    rin = input.shape[0] if input.dim() else 1
    rout = output.shape[0] if output.dim() else 1
    isz = _splits(input_split_sizes, rin, n, what, "input")
    osz = _splits(output_split_sizes, rout, n, what, "output")
    row = int(np.prod(input.shape[1:])) if input.dim() > 1 else 1
    if _N.is_cuda(input) or _N.is_cuda(output):
        return _N.all_to_all_single(g, output, input, isz, osz, row, async_op)
    scount = np.array(isz, dtype=np.int64) * row
    rcount = np.array(osz, dtype=np.int64) * row
    sdisp = np.concatenate([[0], np.cumsum(scount)[:-1]])
    rdisp = np.concatenate([[0], np.cumsum(rcount)[:-1]])
    buf, out = buffer(input, what), buffer(output, what)
    dt = datatype(input.dtype)
    check = g._check
    me = g.rank()

    def run():
        if check:  # every rank's send counts must match what its peers expect to receive
            theirs = np.empty(n, dtype=np.int64)
            g._comm.Alltoall(np.array(isz, dtype=np.int64), theirs)
            bad = [r for r in range(n) if theirs[r] != osz[r]]
            if bad:
                from fiamma.distributed._group import DistBackendError

                lines = [f"  from rank {g._ranks[r]}: it sends {theirs[r]} rows, this rank "
                         f"({g._ranks[me]}) expects {osz[r]}" for r in bad]
                raise DistBackendError(f"fiamma.distributed: {what} #{g._seq}: split sizes "
                                       "disagree between ranks:\n" + "\n".join(lines))
        g._comm.Alltoallv([buf, (scount, sdisp), dt], [out, (rcount, rdisp), dt])

    h = Header.make(what, 0, extra=zlib.crc32(repr(tuple(input.shape[1:])).encode()))
    h[2] = _mpi.DTYPE_CODE[input.dtype]
    return _finish(g._submit(what, h, run, input, [output]), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of ``group`` has reached the barrier."""
    g = resolve(group, "barrier")
    if g is None:
        return None
    if getattr(g, "_nccl", None) is not None:
        return _N.barrier(g, async_op)

    def run():
        g._comm.Barrier()

    def post():
        return [g._comm.Ibarrier()]

    return _finish(g._submit("barrier", Header.make("barrier", 0), run, "barrier", post=post,
                            async_op=async_op), async_op)


def _rooted_list(g, what, tensor, tensors, list_name, global_rank, group_rank, role):
    """The root (rank 0 by default) of a gather/scatter and whether this rank is it; checks
    that the list of per-rank tensors is given on the root only, one like ``tensor`` a rank."""
    if global_rank is None and group_rank is None:
        global_rank = 0
    root = _root(g, what, global_rank, group_rank, role)
    mine = g.rank() == root
    if mine:
        if tensors is None or len(tensors) != g.size():
            raise ValueError(f"{what}: on rank {role}, {list_name} must hold {g.size()} tensors "
                             "(the group's size)")
        for t in tensors:
            _same(t, tensor, what, list_name)
    elif tensors:
        raise ValueError(f"{what}: {list_name} must be None or empty on ranks other than {role}")
    return root, mine


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Rank ``dst``'s ``gather_list[r]`` receives ``tensor`` of group rank r (``gather_list``
    only on ``dst``; every rank's tensor has the same shape and dtype)."""
    g = resolve(group, "gather")
    if g is None:
        return None
    root, mine = _rooted_list(g, "gather", tensor, gather_list, "gather_list", dst, group_dst,
                              "dst")
    if _N.is_cuda(tensor):
        return _N.gather(g, tensor, gather_list, root, mine, async_op)
    buf, dt = buffer(tensor, "gather"), datatype(tensor.dtype)
    flat = buffer(fiamma.empty((g.size(),) + tuple(tensor.shape), dtype=tensor.dtype),
                  "gather") if mine else None
    targets = [buffer(t, "gather") for t in gather_list] if mine else []

    def run():
        g._comm.Gather([buf, dt], [flat, dt] if mine else None, root=root)
        if mine:
            whole = flat.reshape(g.size(), -1)
            for r, b in enumerate(targets):
                b[...] = whole[r]

    h = Header.make("gather", 0, tensor, root=root)
    return _finish(g._submit("gather", h, run, tensor,
                            list(gather_list or [])), async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """``tensor`` of group rank r receives rank ``src``'s ``scatter_list[r]``."""
    g = resolve(group, "scatter")
    if g is None:
        return None
    root, mine = _rooted_list(g, "scatter", tensor, scatter_list, "scatter_list", src,
                              group_src, "src")
    if _N.is_cuda(tensor):
        return _N.scatter(g, tensor, scatter_list, root, mine, async_op)
    out, dt = buffer(tensor, "scatter"), datatype(tensor.dtype)
    flat = fiamma.stack([t.detach() for t in scatter_list]) if mine else None
    send = buffer(flat, "scatter") if mine else None

    def run():
        g._comm.Scatter([send, dt] if mine else None, [out, dt], root=root)

    h = Header.make("scatter", 0, tensor, root=root)
    return _finish(g._submit("scatter", h, run, tensor, [tensor]), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """``output`` of rank r receives the reduction over all ranks of their ``input_list[r]``."""
    g = resolve(group, "reduce_scatter")
    if g is None:
        return None
    if len(input_list) != g.size():
        raise ValueError(f"reduce_scatter: input_list must hold {g.size()} tensors (the "
                         f"group's size), got {len(input_list)}")
    for t in input_list:
        _same(t, output, "reduce_scatter", "input_list")
    return reduce_scatter_tensor(output, fiamma.stack([t.detach() for t in input_list]), op,
                                 group, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank r's ``output_tensor_list[r']`` receives rank r''s ``input_tensor_list[r]`` (the
    tensors may differ in size; one dtype)."""
    g = resolve(group, "all_to_all")
    if g is None:
        return None
    n = g.size()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: both lists must hold {n} tensors (the group's size), got "
                         f"{len(output_tensor_list)} and {len(input_tensor_list)}")
    dtype = input_tensor_list[0].dtype
    if any(t.dtype != dtype for t in list(output_tensor_list) + list(input_tensor_list)):
        raise TypeError("all_to_all: every tensor must have the same dtype")
    if _N.is_cuda(input_tensor_list[0]):
        return _N.all_to_all(g, list(output_tensor_list), list(input_tensor_list), async_op)
    send = fiamma.cat([t.detach().reshape(-1) for t in input_tensor_list])
    recv = fiamma.empty(sum(t.numel() for t in output_tensor_list), dtype=dtype)
    outs = list(output_tensor_list)
    w = all_to_all_single(recv, send, [t.numel() for t in outs],
                          [t.numel() for t in input_tensor_list], group, async_op=True)
    targets = [buffer(t, "all_to_all") for t in outs]
    whole = buffer(recv, "all_to_all")

    def unpack():
        off = 0
        for b in targets:
            b[...] = whole[off:off + b.size]
            off += b.size

    if async_op:
        return _N._ThenWork(w, unpack, outs)  # its wait() then unpacks
    w.wait()
    unpack()
    return None
