"""DistributedDataParallel: one model replica per rank, gradients averaged across ranks as
backward produces them.

At construction the ranks check that they hold the same parameters and buffers, and rank 0's
values are broadcast to every rank. The parameters are grouped into buckets (about
``bucket_cap_mb`` each, in reverse registration order, the order backward tends to produce
gradients in). A post-accumulate-grad hook on every parameter copies its gradient into its
bucket; a full bucket's sum is started as an MPI non-blocking all-reduce on DDP's own
communicator (a duplicate of the group's) while backward goes on, and every later hook calls
into MPI so that it progresses. Buckets are launched in index order on every rank (so that the
ranks' collectives match), and when the last gradient has arrived the hook drives the
reductions to completion (with the group's timeout), divides by the world size and writes the
averages back into ``.grad``. Nothing crosses threads on this path: on a busy machine each
thread hand-off cost milliseconds.
"""

from __future__ import annotations

import contextlib
import time

import fiamma
from fiamma import nn
from fiamma.distributed import _mpi
from fiamma.distributed._collectives import all_reduce, broadcast
from fiamma.distributed._group import Header
from fiamma.distributed._mpi import ReduceOp, buffer, datatype, mpi_op
from fiamma.distributed._objects import all_gather_object
from fiamma.distributed._state import resolve


class _Bucket:
    __slots__ = ("index", "params", "offsets", "flat", "pending", "work", "dtype", "buf",
                 "mpi_type", "mpi_op", "views")

    def __init__(self, index, params):
        self.index = index
        self.params = params
        self.dtype = params[0].dtype
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append(n)
            n += p.numel()
        self.flat = fiamma.zeros(n, dtype=self.dtype, device=params[0].device)
        # each parameter's slice of the flat buffer, shaped like it (made once: a view per
        # parameter per step cost more than the copy into it for small models)
        self.views = [self.flat[o:o + p.numel()].view(p.shape)
                      for o, p in zip(self.offsets, params)]
        if params[0].device.type == "cuda":  # reduced by NCCL (the flat tensor's pointer)
            self.buf = self.mpi_type = self.mpi_op = None
        else:
            self.buf = buffer(self.flat, "DistributedDataParallel")
            self.mpi_type = datatype(self.dtype)
            self.mpi_op = mpi_op(ReduceOp.SUM, self.dtype, "DistributedDataParallel")
        self.pending = len(params)
        self.work = None  # the MPI request of its all-reduce


def _buckets(params, cap_bytes, first_cap_bytes):
    """Parameters in reverse order, cut into buckets of at most ``cap_bytes`` (one dtype each;
    the first bucket smaller, so that communication starts early in backward)."""
    buckets, current, size, cap = [], [], 0, first_cap_bytes
    for p in reversed(params):
        nbytes = p.numel() * p.element_size()
        if current and (size + nbytes > cap or p.dtype != current[0].dtype
                        or p.device != current[0].device):
            buckets.append(_Bucket(len(buckets), current))
            current, size, cap = [], 0, cap_bytes
        current.append(p)
        size += nbytes
    if current:
        buckets.append(_Bucket(len(buckets), current))
    return buckets


def _tensors_in(obj):
    if isinstance(obj, fiamma.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors_in(x)


def _reachable_leaves(outputs):
    """ids of the leaf tensors the autograd graph of ``outputs`` reaches."""
    seen, leaves = set(), set()
    stack = [t.grad_fn for t in _tensors_in(outputs) if t.grad_fn is not None]
    direct = {id(t) for t in _tensors_in(outputs) if t.grad_fn is None and t.requires_grad}
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        var = getattr(fn, "variable", None)
        if var is not None:
            leaves.add(id(var))
        for nxt, _ in getattr(fn, "next_functions", ()):
            if nxt is not None:
                stack.append(nxt)
    return leaves | direct


class DistributedDataParallel(nn.Module):
    """Data parallelism across the ranks of a process group: wrap the model, train as usual;
    gradients are averaged over the ranks during ``backward()``.

    >>> import fiamma, fiamma.distributed as dist
    >>> from fiamma import nn
    >>> dist.init_process_group("mpi")          # under the launcher: one of N ranks
    >>> model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
    >>> model(fiamma.ones(3, 4)).sum().backward()
    >>> model.module.weight.grad.shape
    fiamma.Size([2, 4])
    >>> dist.destroy_process_group()
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None):
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got "
                            f"{type(module).__name__}")
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError("DistributedDataParallel: device_ids must name one device (one "
                             f"model replica per process), got {device_ids}")
        if mixed_precision is not None or device_mesh is not None:
            raise ValueError("DistributedDataParallel: mixed_precision and device_mesh are not "
                             "supported")
        if delay_all_reduce_named_params is not None or param_to_hook_all_reduce is not None:
            raise ValueError("DistributedDataParallel: delay_all_reduce_named_params and "
                             "param_to_hook_all_reduce are not supported")
        # static_graph is an optimisation hint in PyTorch: the results are the same without
        # it, so it is accepted and has no effect here. gradient_as_bucket_view=True makes
        # each .grad a view of its bucket after the first synced backward (as PyTorch does):
        # no copy back after the all-reduce, and none into the bucket either when the
        # optimizer zeroes gradients in place (zero_grad(set_to_none=False))
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        group = resolve(process_group, "DistributedDataParallel")
        if group is None:
            raise ValueError("DistributedDataParallel: this rank is not in process_group")
        self.module = module
        self.process_group = group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.dim = dim
        self.device_ids = device_ids
        self.static_graph = static_graph
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self._names = {id(p): n for n, p in named}
        self._params = [p for _, p in named]
        self._verify(module)
        self._sync(list(module.parameters()) + list(module.buffers()), "parameters and buffers")
        mb = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        if mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {mb}")
        cap = int(mb * 1024 * 1024)
        self._bucket_list = _buckets(self._params, cap, min(cap, 1024 * 1024))
        self._cuda = any(b.buf is None for b in self._bucket_list)
        if self._cuda and group._nccl is None:
            raise ValueError("DistributedDataParallel: the model has CUDA parameters but the "
                             f"process group's backend is {group.backend!r}; use "
                             "init_process_group('nccl')")
        if self._cuda and any(b.buf is not None for b in self._bucket_list):
            raise ValueError("DistributedDataParallel: the model has parameters on CPU and on "
                             "CUDA; put the whole replica on one device")
        self._comm = None if self._cuda else self._own_communicator()
        self._where = {}
        for b in self._bucket_list:
            for i, p in enumerate(b.params):
                self._where[id(p)] = (b, i)
        self._armed = False
        self._started = False
        self._sync_buffers_next = True
        self._inflight = []
        self._deadline = 0.0
        self._ready = set()
        self._next = 0
        self._hooks = [p.register_post_accumulate_grad_hook(self._grad_ready)
                       for p in self._params]

    # ---- construction ----

    def _verify(self, module):
        # requires_grad too: the buckets (and so the all-reduce counts) are built from it
        mine = [(n, tuple(t.shape), str(t.dtype), bool(t.requires_grad)) for n, t in
                list(module.named_parameters()) + list(module.named_buffers())]
        everyone = [None] * self.process_group.size()
        all_gather_object(everyone, mine, self.process_group)
        for r, theirs in enumerate(everyone):
            if theirs != everyone[0]:
                diff = next(((a, b) for a, b in zip(everyone[0], theirs) if a != b),
                            (f"{len(everyone[0])} tensors", f"{len(theirs)} tensors"))
                raise RuntimeError(
                    "DistributedDataParallel: the ranks' models differ: rank "
                    f"{self.process_group._ranks[0]} has {diff[0]} where rank "
                    f"{self.process_group._ranks[r]} has {diff[1]}")

    def _own_communicator(self):
        """A duplicate of the group's communicator for the gradient all-reduces, which are
        posted from backward's thread as non-blocking MPI requests: they can never interleave
        with the group's other collectives, and no thread hand-off is on the backward path."""
        g = self.process_group
        out = {}

        def run():
            out["comm"] = g._comm.Dup()

        g._submit("dup", Header.make("dup", 0), run, "DistributedDataParallel").wait()
        return out["comm"]

    def _sync(self, tensors, what):
        """Broadcast rank 0's ``tensors`` to every rank, one flat buffer per dtype."""
        root = self.process_group._ranks[0]
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        with fiamma.no_grad():
            for dtype, ts in by_dtype.items():
                flat = fiamma.cat([t.detach().reshape(-1) for t in ts]) if ts else None
                broadcast(flat, src=root, group=self.process_group)
                off = 0
                for t in ts:
                    n = t.numel()
                    t.copy_(flat[off:off + n].view(t.shape))
                    off += n

    # ---- forward ----

    def forward(self, *inputs, **kwargs):
        if self._armed:  # the previous forward was synced and its backward did not finish
            if self._started:
                self._unfinished()
            if self._inflight:  # started for unused parameters by a forward without backward
                self._complete(self._inflight, "DistributedDataParallel gradient all_reduce")
                self._inflight = []
            self._armed = False  # (a backward under no_sync must not sync)
        sync = fiamma.is_grad_enabled() and self.require_backward_grad_sync
        # PyTorch's rule: buffers are broadcast before a forward that follows a synced one
        # (so an evaluation under no_grad after training sees rank 0's statistics everywhere)
        if self._sync_buffers_next and self.broadcast_buffers:
            buffers = list(self.module.buffers())
            if buffers and self.process_group.size() > 1:
                self._sync(buffers, "buffers")
        out = self.module(*inputs, **kwargs)
        self._sync_buffers_next = sync
        if sync:
            self._arm(out)
        return out

    def _arm(self, out):
        self._armed = True
        self._started = False  # a forward without backward (evaluation with grad on) is fine
        self._ready = set()
        self._next = 0
        for b in self._bucket_list:
            b.pending = len(b.params)
            b.work = None
        self._inflight = []
        self._locally_unused = []
        if self.find_unused_parameters:
            used = _reachable_leaves(out)
            self._locally_unused = [p for p in self._params if id(p) not in used]
            for p in self._locally_unused:
                self._mark(p, None)

    def _unfinished(self):
        missing = [self._names[id(p)] for p in self._params if id(p) not in self._ready]
        launched = [b.work for b in self._bucket_list if b.work is not None]
        if launched:  # let launched reductions finish: the communicator stays usable
            self._complete(launched, "DistributedDataParallel gradient all_reduce")
            for b in self._bucket_list:
                b.work = None
        self._inflight = []
        self._armed = False
        raise RuntimeError(
            "DistributedDataParallel: the previous iteration's backward did not produce "
            f"gradients for these parameters: {', '.join(missing)}, so their gradients were "
            "never averaged across ranks. Pass find_unused_parameters=True if parts of the "
            "model may go unused, and make sure every output that the loss depends on comes "
            "from the forward of this module.")

    @contextlib.contextmanager
    def no_sync(self):
        """Skip the gradient averaging inside the block: gradients accumulate locally, and the
        first backward after the block averages the accumulated sum."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ---- backward ----

    def _grad_ready(self, p):
        if not self._armed:
            return
        if id(p) in self._ready:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {self._names[id(p)]} received a gradient "
                "twice in one iteration (backward through the same forward twice?); run the "
                "extra backward passes inside no_sync()")
        self._started = True
        self._mark(p, p.grad)

    def _mark(self, p, grad):
        b, i = self._where[id(p)]
        self._ready.add(id(p))
        view = b.views[i]
        with fiamma.no_grad():
            if grad is None:
                view.zero_()
            elif grad is not view:  # (a bucket-view gradient is already in place)
                view.copy_(grad.detach())
        b.pending -= 1
        if b.pending == 0:
            self._launch()
        elif self._inflight and not self._cuda:
            _mpi.mpi().Request.Testall(self._inflight)  # MPI progresses only inside calls

    def _launch(self):
        buckets = self._bucket_list
        MPI = _mpi.mpi()
        if self._next == 0:
            self._deadline = time.monotonic() + self.process_group._timeout
        while self._next < len(buckets) and buckets[self._next].pending == 0:
            b = buckets[self._next]
            if self._cuda:  # queued on the NCCL stream; no metadata check (see _verify)
                b.work = self._nccl_all_reduce(b.flat)
            else:
                b.work = self._comm.Iallreduce(MPI.IN_PLACE, [b.buf, b.mpi_type], b.mpi_op)
            self._inflight.append(b.work)
            self._next += 1
        if self._next == len(buckets):
            self._finish()

    def _nccl_all_reduce(self, flat):
        ng = self.process_group._nccl
        p, dt = ng.ptr(flat, "DistributedDataParallel"), ng.dtype(flat, "DistributedDataParallel")
        code = ng.op(ReduceOp.SUM, flat.dtype, "DistributedDataParallel")
        n = flat.numel()
        return ng.run("all_reduce", None, "DistributedDataParallel gradient bucket",
                      lambda s: ng.comm.allReduce(p, p, n, dt, code, s), [flat], flat, True)

    def _complete(self, works, what, nbytes=0):
        """Wait for the buckets' reductions: NCCL works make the current stream wait (errors
        and timeouts come from the NCCL watchdog); MPI requests are driven to completion."""
        if self._cuda:
            for w in works:
                w.wait()
        else:
            self.process_group._drive(works, self._deadline, what, nbytes)

    def _finish(self):
        unused = None
        if self.find_unused_parameters:
            # a parameter unused on every rank keeps its gradient (None), as in PyTorch
            local = {id(p) for p in self._locally_unused}
            flags = fiamma.tensor([0 if id(p) in local else 1 for p in self._params],
                                  dtype=fiamma.uint8)
            all_reduce(flags, ReduceOp.MAX, self.process_group)
            unused = {id(p) for p, f in zip(self._params, flags.tolist()) if not f}
        g = self.process_group
        self._complete(self._inflight,
                       f"DistributedDataParallel gradient all_reduce ({len(self._inflight)} "
                       f"buckets) in group {g.name()}, rank {g.rank()}",
                       sum(b.flat.numel() * b.flat.element_size() for b in self._bucket_list))
        self._inflight = []
        n = g.size()
        with fiamma.no_grad():
            for b in self._bucket_list:
                b.work = None
                if self._cuda or b.dtype in (fiamma.float16, fiamma.bfloat16):
                    b.flat.div_(n)
                else:
                    b.buf /= n
                as_view = self.gradient_as_bucket_view
                for p, avg in zip(b.params, b.views):
                    if unused is not None and id(p) in unused:
                        continue
                    g = p.grad
                    if g is avg:
                        continue
                    if as_view and (g is None or g.grad_fn is None):
                        p.grad = avg
                    elif g is None:
                        p.grad = avg.clone()
                    else:
                        g.copy_(avg)
        self._armed = False

    def extra_repr(self):
        return ""

    def __getstate__(self):
        raise TypeError("DistributedDataParallel cannot be pickled; save .module (or its "
                        "state_dict) instead")
