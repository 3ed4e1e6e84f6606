"""DistributedDataParallel's gradient reduction (PyTorch's Reducer): buckets, the per-parameter
gradient hooks, the all-reduces and the copies back into ``.grad``.

Everything here runs once per parameter or once per bucket on every training step, so the
per-step state lives on a plain slotted object (an nn.Module's ``__setattr__``/``__getattr__``
cost microseconds each), each hook is a closure that already knows its bucket and slot, the
bucket views are made once, and descriptions for error messages are formatted only when an
error is raised.
"""

from __future__ import annotations

import time

import fiamma
from fiamma.distributed import _mpi
from fiamma.distributed._collectives import all_reduce
from fiamma.distributed._mpi import ReduceOp, buffer, datatype, mpi_op
from fiamma.futures import Future


class GradBucket:
    """One bucket of DistributedDataParallel's gradients, as a communication hook sees it
    (``torch.distributed.GradBucket``): ``buffer()`` is the flat tensor of its gradients,
    ``gradients()`` their views shaped like ``parameters()``, ``index()`` its place in the
    reduction order (``is_last()`` for the last one); ``set_buffer`` replaces the flat tensor
    (a compression wrapper hands the inner hook a float16 copy)."""

    def __init__(self, index, count, buffer, params, offsets):
        self._index, self._count, self._buffer = index, count, buffer
        self._params, self._offsets = params, offsets

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer):
        if not isinstance(buffer, fiamma.Tensor) or buffer.numel() != self._buffer.numel():
            raise ValueError(f"GradBucket.set_buffer: expected a tensor of "
                             f"{self._buffer.numel()} elements, got "
                             f"{getattr(buffer, 'shape', type(buffer).__name__)}")
        self._buffer = buffer

    def gradients(self):
        flat = self._buffer.reshape(-1)
        return [flat[o:o + p.numel()].view(p.shape) for o, p in zip(self._offsets, self._params)]

    def parameters(self):
        return list(self._params)

    def is_last(self):
        return self._index == self._count - 1

    def __repr__(self):
        return (f"GradBucket(index={self._index}, {len(self._params)} parameters, "
                f"{self._buffer.numel()} elements, {self._buffer.dtype})")


class _Bucket:
    __slots__ = ("index", "params", "keys", "offsets", "flat", "pending", "work", "dtype", "buf",
                 "mpi_type", "mpi_op", "views", "fast_scale")

    def __init__(self, index, params, keys):
        self.index = index
        self.params = params
        self.keys = keys  # each parameter's index in the reducer's parameter list
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
        self.fast_scale = self.dtype in (fiamma.float32, fiamma.float64)
        self.pending = len(params)
        self.work = None  # the MPI request (or NCCL work) of its all-reduce


# the last bucket's tail: its trailing parameters up to this many bytes (and a quarter of the
# bucket) become a bucket of their own
TAIL_BYTES = 64 * 1024


def buckets(params, cap_bytes, first_cap_bytes):
    """Parameters in reverse order, cut into buckets of at most ``cap_bytes`` (one dtype and
    device each; the first bucket smaller, so that communication starts early in backward).

    The parameters registered first (a network's first layers) get their gradients last, at
    the very end of backward, when the bucket holding them is all-reduced with nothing left to
    overlap it. So the last bucket's trailing parameters, up to ``TAIL_BYTES`` and a quarter of
    its size, form a small bucket of their own: the rest of it is reduced while the first
    layers' backward still runs (LeNet, 247 KB in one bucket before: the fully-connected
    layers' 237 KB now go while the convolutions' backward runs; 1-2% more samples/s on 2
    ranks in alternated runs, about the runs' spread)."""
    groups, current, keys, size, cap = [], [], [], 0, first_cap_bytes
    for k in range(len(params) - 1, -1, -1):
        p = params[k]
        nbytes = p.numel() * p.element_size()
        if current and (size + nbytes > cap or p.dtype != current[0].dtype
                        or p.device != current[0].device):
            groups.append((current, keys, size))
            current, keys, size, cap = [], [], 0, cap_bytes
        current.append(p)
        keys.append(k)
        size += nbytes
    if current:
        groups.append((current, keys, size))
    if groups:
        last, lkeys, lsize = groups[-1]
        limit = min(TAIL_BYTES, lsize // 4)
        cut, tail = len(last), 0
        while cut > 1:
            nbytes = last[cut - 1].numel() * last[cut - 1].element_size()
            if tail + nbytes > limit:
                break
            tail += nbytes
            cut -= 1
        if 0 < cut < len(last):
            groups[-1:] = [(last[:cut], lkeys[:cut], lsize - tail),
                           (last[cut:], lkeys[cut:], tail)]
    return [_Bucket(i, ps, ks) for i, (ps, ks, _) in enumerate(groups)]


def _tensors_in(obj):
    if isinstance(obj, fiamma.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors_in(x)


def reachable_leaves(outputs):
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


class _Describe:
    """The gradient all-reduce's description for timeout messages (formatted only then)."""

    __slots__ = ("reducer",)

    def __init__(self, reducer):
        self.reducer = reducer

    def __str__(self):
        r = self.reducer
        g = r.group
        return (f"DistributedDataParallel gradient all_reduce ({len(r.buckets)} buckets) in "
                f"group {g.name()}, rank {g.rank()}")


class Reducer:
    """The per-step state and work of one DistributedDataParallel's gradient averaging."""

    __slots__ = ("buckets", "params", "names", "group", "comm", "cuda", "as_view",
                 "find_unused", "armed", "started", "next", "inflight", "arrived", "deadline",
                 "seen", "unseen", "locally_unused", "testall", "what", "nbytes", "hooks",
                 "nccl_reduce", "divisor", "comm_hook", "hook_state", "__weakref__")

    def __init__(self, params, names, group, bucket_list, comm, as_view, find_unused,
                 nccl_reduce):
        self.params = params
        self.names = names
        self.group = group
        self.buckets = bucket_list
        self.comm = comm
        self.cuda = comm is None
        self.nccl_reduce = nccl_reduce
        self.as_view = as_view
        self.find_unused = find_unused
        self.armed = False
        self.started = False
        self.next = 0
        self.inflight = []
        self.arrived = None
        self.deadline = 0.0
        self.unseen = [False] * len(params)
        self.seen = list(self.unseen)
        self.locally_unused = []
        self.testall = None if self.cuda else _mpi.mpi().Request.Testall
        self.what = _Describe(self)
        self.nbytes = sum(b.flat.numel() * b.flat.element_size() for b in bucket_list)
        self.hooks = []
        self.divisor = None  # under Join: the number of ranks still training, when asked
        self.comm_hook = None  # register_comm_hook: hook(state, GradBucket) -> Future
        self.hook_state = None
        for b in bucket_list:
            for i, (p, k) in enumerate(zip(b.params, b.keys)):
                self.hooks.append(p.register_post_accumulate_grad_hook(self._hook(b, i, k)))

    def _hook(self, b, i, k):
        def grad_ready(p):
            if self.armed:
                self.ready(p, b, i, k)
        return grad_ready

    # ---- a step ----

    def arm(self, out):
        """A synced forward ran: its backward averages the gradients."""
        self.armed = True
        self.started = False  # a forward without backward (evaluation with grad on) is fine
        self.seen[:] = self.unseen
        self.next = 0
        for b in self.buckets:
            b.pending = len(b.params)
            b.work = None
        self.inflight = []
        self.arrived = None
        self.locally_unused = []
        if self.find_unused:
            used = reachable_leaves(out)
            self.locally_unused = [k for k, p in enumerate(self.params) if id(p) not in used]
            where = {k: (b, i) for b in self.buckets for i, k in enumerate(b.keys)}
            for k in self.locally_unused:
                b, i = where[k]
                self.seen[k] = True
                b.views[i].zero_()
                self._count(b)

    def before_forward(self):
        """Called by a forward when the previous synced forward is still armed."""
        if self.started:
            self.unfinished()
        if self.inflight:  # started for unused parameters by a forward without backward
            self.complete(self.inflight)
            self.inflight = []
        self.armed = False  # (a backward under no_sync must not sync)

    def ready(self, p, b, i, k):
        """``p``'s gradient is accumulated: copy it into its bucket slot."""
        seen = self.seen
        if seen[k]:
            raise RuntimeError(
                f"DistributedDataParallel: parameter {self.names[k]} received a gradient "
                "twice in one iteration (backward through the same forward twice?); run the "
                "extra backward passes inside no_sync()")
        seen[k] = True
        self.started = True
        g = p.grad
        view = b.views[i]
        if g is None:
            view.zero_()
        elif g is not view:  # (a bucket-view gradient is already in place)
            view.copy_(g.detach() if g.requires_grad else g)
        self._count(b)

    def _count(self, b):
        b.pending -= 1
        if b.pending == 0:
            self.launch()
        elif self.inflight and self.testall is not None:
            self.testall(self.inflight)  # MPI progresses only inside calls

    def launch(self):
        """Start the all-reduce of every complete bucket, in index order on every rank."""
        buckets = self.buckets
        if self.next == 0:
            self.deadline = time.monotonic() + self.group._timeout
        while self.next < len(buckets) and buckets[self.next].pending == 0:
            b = buckets[self.next]
            if self.comm_hook is not None:  # the hook's future (its collectives, its division)
                b.work = self.run_hook(b, b.flat)
            elif self.cuda:  # queued on the NCCL stream; no metadata check (see _verify)
                b.work = self.nccl_reduce(b.flat)
            else:
                b.work = self.comm.Iallreduce(_mpi.mpi().IN_PLACE, [b.buf, b.mpi_type],
                                              b.mpi_op)
            if self.comm_hook is None:
                self.inflight.append(b.work)
            self.next += 1
        if self.next == len(buckets):
            # (completes once every rank has posted every bucket)
            if not self.cuda and self.comm_hook is None:
                self.arrived = self.comm.Ibarrier()
                self.inflight.append(self.arrived)
            self.finish()

    def complete(self, works, arrived=None):
        """Wait for the buckets' reductions: NCCL works make the current stream wait (errors
        and timeouts come from the NCCL watchdog); MPI requests are driven to completion,
        sleeping between polls until ``arrived`` says that every rank has posted them."""
        if self.cuda:
            for w in works:
                w.wait()
        else:
            self.group._drive(works, self.deadline, self.what, self.nbytes, arrived)

    def finish(self):
        """Every bucket is reduced: divide by the world size, write the averages to .grad."""
        unused = None
        if self.find_unused:
            # a parameter unused on every rank keeps its gradient (None), as in PyTorch
            local = set(self.locally_unused)
            flags = fiamma.tensor([0 if k in local else 1 for k in range(len(self.params))],
                                  dtype=fiamma.uint8)
            all_reduce(flags, ReduceOp.MAX, self.group)
            unused = {k for k, f in enumerate(flags.tolist()) if not f}
        if self.comm_hook is not None:
            for b in self.buckets:
                self.hook_result(b, b.work)
            n = 1  # the hook averages (or not) itself, as in PyTorch
        else:
            self.complete(self.inflight, self.arrived)
            n = self.divisor or self.group.size()
        self.inflight = []
        self.arrived = None
        self.write_grads(n, unused)

    def write_grads(self, n, unused):
        """Divide the reduced buckets by ``n`` and write them to the parameters' ``.grad``."""
        # x * 2**-k is exactly x / 2**k; other sizes divide (as PyTorch does)
        inverse = 1.0 / n if n & (n - 1) == 0 else None
        as_view = self.as_view
        with fiamma.no_grad():
            for b in self.buckets:
                b.work = None
                if n > 1:
                    if inverse is not None and b.fast_scale:
                        b.flat.mul_(inverse)
                    else:
                        b.flat.div_(n)
                for p, avg, k in zip(b.params, b.views, b.keys):
                    if unused is not None and k in unused:
                        continue
                    g = p.grad
                    if g is avg:
                        continue
                    if g is None:
                        p.grad = avg if as_view else avg.clone()
                    elif as_view and g.grad_fn is None:
                        p.grad = avg
                    else:
                        g.copy_(avg)
        self.armed = False

    def shadow(self):
        """On a rank that joined (Join): the all-reduces of one backward with zero buckets, in
        the order the training ranks post them, and the unused-parameter vote. The result (the
        training ranks' average) becomes this rank's gradients too, so that an optimizer
        sharded across the ranks (ZeroRedundancyOptimizer) steps its share with it."""
        self.deadline = time.monotonic() + self.group._timeout
        with fiamma.no_grad():
            for b in self.buckets:
                b.flat.zero_()
        votes = fiamma.zeros(len(self.params), dtype=fiamma.uint8) if self.find_unused else None
        if self.comm_hook is not None:  # the hook's collectives, bucket by bucket
            futures = [self.run_hook(b, b.flat) for b in self.buckets]
            if votes is not None:
                all_reduce(votes, ReduceOp.MAX, self.group)
            for b, fut in zip(self.buckets, futures):
                self.hook_result(b, fut)
            n = 1
        else:
            MPI = None if self.cuda else _mpi.mpi()
            works = [self.nccl_reduce(b.flat) if self.cuda else
                     self.comm.Iallreduce(MPI.IN_PLACE, [b.buf, b.mpi_type], b.mpi_op)
                     for b in self.buckets]
            arrived = None
            if not self.cuda:
                arrived = self.comm.Ibarrier()
                works.append(arrived)
            if votes is not None:
                all_reduce(votes, ReduceOp.MAX, self.group)
            self.complete(works, arrived)
            n = self.divisor or self.group.size()
        unused = None if votes is None else {k for k, f in enumerate(votes.tolist()) if not f}
        self.write_grads(n, unused)

    # ---- communication hooks ----

    def run_hook(self, b, flat):
        """Call the registered hook on bucket ``b`` (its gradients in ``flat``)."""
        fut = self.comm_hook(self.hook_state, GradBucket(b.index, len(self.buckets), flat,
                                                         b.params, b.offsets))
        if not isinstance(fut, Future):
            raise TypeError("DistributedDataParallel: a communication hook must return a "
                            f"fiamma.futures.Future (torch.futures.Future), got "
                            f"{type(fut).__name__}")
        return fut

    def hook_result(self, b, fut):
        """The hook's reduced bucket into ``b.flat``."""
        v = fut.wait()
        if isinstance(v, (list, tuple)) and len(v) == 1:
            v = v[0]
        n = b.flat.numel()
        if not isinstance(v, fiamma.Tensor) or v.numel() != n:
            got = (f"a tensor of {v.numel()} elements" if isinstance(v, fiamma.Tensor)
                   else type(v).__name__)
            raise RuntimeError("DistributedDataParallel: a communication hook's future must "
                               f"hold the reduced bucket, a tensor of {n} elements; bucket "
                               f"{b.index} got {got}")
        if v is not b.flat:
            with fiamma.no_grad():
                b.flat.copy_(v.reshape(-1))

    def unfinished(self):
        missing = [self.names[k] for k in range(len(self.params)) if not self.seen[k]]
        launched = [b.work for b in self.buckets if b.work is not None]
        if launched and self.comm_hook is not None:
            for w in launched:
                w._wait_quietly()
            for b in self.buckets:
                b.work = None
        elif launched:  # let launched reductions finish: the communicator stays usable
            self.complete(launched)
            for b in self.buckets:
                b.work = None
        self.inflight = []
        self.armed = False
        raise RuntimeError(
            "DistributedDataParallel: the previous iteration's backward did not produce "
            f"gradients for these parameters: {', '.join(missing)}, so their gradients were "
            "never averaged across ranks. Pass find_unused_parameters=True if parts of the "
            "model may go unused, and make sure every output that the loss depends on comes "
            "from the forward of this module.")
