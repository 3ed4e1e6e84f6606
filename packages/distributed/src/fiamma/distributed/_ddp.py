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
thread hand-off cost milliseconds. The per-step work is _reducer.py's.
"""

from __future__ import annotations

import contextlib
import inspect

import fiamma
from fiamma import nn
from fiamma.distributed._collectives import all_reduce, broadcast
from fiamma.distributed._group import Header
from fiamma.distributed._mpi import ReduceOp
from fiamma.distributed._objects import all_gather_object
from fiamma.distributed._reducer import Reducer, buckets
from fiamma.distributed._state import resolve
from fiamma.distributed.algorithms.join import Join, Joinable, JoinHook, _JoinConfig


class DistributedDataParallel(nn.Module, Joinable):
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
        self._join_config = _JoinConfig.disabled()
        self._divide_by_initial_world_size = True
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
        lazy = [n for n, p in module.named_parameters()
                if getattr(type(p), "_lazy_placeholder", False)]
        if lazy:
            raise RuntimeError("Modules with uninitialized parameters can't be used with "
                               "`DistributedDataParallel`. Run a dummy forward pass to correctly "
                               f"initialize the modules (uninitialized: {', '.join(lazy)})")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't "
                               "have any parameter that requires a gradient.")
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._verify(module)
        self._sync(list(module.parameters()) + list(module.buffers()), "parameters and buffers")
        # broadcast before forwards (PyTorch's modules_buffers: taken once, here)
        self._module_buffers = list(module.buffers()) if group.size() > 1 else []
        mb = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        if mb <= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {mb}")
        cap = self._bucket_cap_bytes = int(mb * 1024 * 1024)
        self._bucket_list = buckets(self._params, cap, min(cap, 1024 * 1024))
        self._cuda = any(b.buf is None for b in self._bucket_list)
        if self._cuda and group._nccl is None:
            raise ValueError("DistributedDataParallel: the model has CUDA parameters but the "
                             f"process group's backend is {group.backend!r}; use "
                             "init_process_group('nccl')")
        if self._cuda and any(b.buf is not None for b in self._bucket_list):
            raise ValueError("DistributedDataParallel: the model has parameters on CPU and on "
                             "CUDA; put the whole replica on one device")
        self._comm = None if self._cuda else self._own_communicator()
        self._sync_buffers_next = True
        self._reducer = Reducer(self._params, self._names, group, self._bucket_list, self._comm,
                                self.gradient_as_bucket_view, bool(find_unused_parameters),
                                self._nccl_all_reduce)

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

    def _sync(self, tensors, what, root=0):
        """Broadcast ``tensors`` of the group's rank ``root`` to every rank, one flat buffer
        per dtype."""
        root = self.process_group._ranks[root]
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
        r = self._reducer
        if r.armed:  # the previous forward was synced and its backward did not finish
            r.before_forward()
        sync = bool(self.require_backward_grad_sync and fiamma.is_grad_enabled())
        # PyTorch's rule: buffers are broadcast before a forward that follows a synced one
        # (so an evaluation under no_grad after training sees rank 0's statistics everywhere);
        # the list of buffers is taken at construction, as PyTorch's modules_buffers
        bcast = bool(self._sync_buffers_next and self._module_buffers and self.broadcast_buffers)
        if self._join_config.enable:
            bcast = self._joined_step(sync, bcast)
        elif bcast:
            self._sync(self._module_buffers, "buffers")
        out = self.module(*inputs, **kwargs)
        if sync is not self._sync_buffers_next:
            self._sync_buffers_next = sync
        if sync:
            r.arm(out)
        return out

    # ---- uneven inputs (Join) ----

    def join(self, divide_by_initial_world_size=True, enable=True,
             throw_on_early_termination=False):
        """A :class:`~fiamma.distributed.algorithms.Join` context for this model alone: ranks
        may run different numbers of iterations inside it. A rank that runs out of inputs
        answers the others' gradient all-reduces with zeros until all are done; then every
        rank takes the parameters of the last rank to finish. The gradient average divides
        by the world size (``divide_by_initial_world_size=True``, PyTorch's default) or by the
        number of ranks still training."""
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def join_hook(self, **kwargs):
        divide = kwargs.get("divide_by_initial_world_size", True)
        self._divide_by_initial_world_size = bool(divide)
        return _DDPJoinHook(self)

    @property
    def join_device(self):
        return self._params[0].device

    @property
    def join_process_group(self):
        return self.process_group

    def _joined_step(self, sync, bcast):
        """A forward inside an enabled Join: say this rank still trains, agree with the joined
        ranks on whether this step syncs gradients and buffers and from which rank (the
        highest one still training), broadcast the buffers; returns False (done here)."""
        work = Join.notify_join_context(self)
        g = self.process_group
        flags = fiamma.tensor([int(sync), g.rank(), int(bcast)], dtype=fiamma.int64)
        all_reduce(flags, ReduceOp.MAX, g)
        if work is not None:
            work.wait()
            active = int(work.result()[0].item())
            self._reducer.divisor = None if self._divide_by_initial_world_size else active
        if int(flags[2]):
            self._sync(self._module_buffers, "buffers", root=int(flags[1]))
        return False

    def _shadow_step(self):
        """On a joined rank: the collectives of one step of the ranks still training."""
        g = self.process_group
        flags = fiamma.tensor([0, -1, 0], dtype=fiamma.int64)
        all_reduce(flags, ReduceOp.MAX, g)
        if int(flags[2]):
            self._sync(self._module_buffers, "buffers", root=int(flags[1]))
        if int(flags[0]):
            if not self._divide_by_initial_world_size:
                self._reducer.divisor = getattr(self, "_join_active", None)
            self._reducer.shadow()

    def _sync_final_model(self, is_last_joiner):
        g = self.process_group
        who = fiamma.tensor([g.rank() if is_last_joiner else -1], dtype=fiamma.int64)
        all_reduce(who, ReduceOp.MAX, g)
        self._sync(list(self.module.parameters()) + list(self.module.buffers()),
                   "parameters and buffers", root=int(who[0]))
        self._reducer.divisor = None

    def _set_static_graph(self):
        """PyTorch's late form of ``static_graph=True``: a hint, with no effect here (the
        results are the same)."""
        self.static_graph = True

    def _get_ddp_logging_data(self):
        """PyTorch's dict of DDP's construction facts, as far as fiamma keeps them (PyTorch's
        runtime statistics and its ``can_set_static_graph`` analysis are not recorded)."""
        return {
            "world_size": self.process_group.size(),
            "rank": self.process_group.rank(),
            "module_name": type(self.module).__name__,
            "device_ids": "" if self.device_ids is None else str(self.device_ids),
            "dim": self.dim,
            "broadcast_buffers": int(bool(self.broadcast_buffers)),
            "bucket_cap_bytes": self._bucket_cap_bytes,
            "find_unused_parameters": int(bool(self.find_unused_parameters)),
            "gradient_as_bucket_view": int(self.gradient_as_bucket_view),
            "static_graph": int(bool(self.static_graph)),
            "backend_name": self.process_group.backend,
            "num_parameter_tensors": len(self._params),
            "total_parameter_size_bytes": sum(p.numel() * p.element_size()
                                              for p in self._params),
        }

    def will_sync_module_buffers(self):
        """Whether the next forward broadcasts rank 0's buffers first."""
        return (self.require_backward_grad_sync and self.broadcast_buffers
                and bool(self._module_buffers))

    # ---- communication hooks ----

    def register_comm_hook(self, state, hook):
        """Reduce the gradient buckets with ``hook(state, bucket) -> Future`` instead of the
        built-in averaging all-reduce (PyTorch's DDP communication hooks; ready-made ones in
        :mod:`fiamma.distributed.algorithms.ddp_comm_hooks`). The future's value (the bucket's
        tensor, or a list holding it) becomes the bucket's gradients as is: a hook divides by
        the world size itself. Called once, before training.

        >>> from fiamma.distributed.algorithms.ddp_comm_hooks import default_hooks
        >>> ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)  # doctest: +SKIP
        """
        if self._reducer.comm_hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be "
                               "called once.")
        if not callable(hook):
            raise TypeError(f"register_comm_hook: hook must be callable, got "
                            f"{type(hook).__name__}")
        try:
            sig = inspect.signature(hook)
        except (TypeError, ValueError):
            sig = None
        if sig is not None:
            try:
                sig.bind(state, None)
            except TypeError:
                raise TypeError(f"register_comm_hook: a communication hook takes two arguments "
                                f"(state, bucket); {getattr(hook, '__name__', hook)!r} has "
                                f"the signature {sig}") from None
        self._reducer.hook_state = state
        self._reducer.comm_hook = hook

    def _register_builtin_comm_hook(self, comm_hook_type):
        """PyTorch's built-in hooks by name: ``BuiltinCommHookType.ALLREDUCE`` or
        ``FP16_COMPRESS`` (here the Python hooks of ``default_hooks``)."""
        from fiamma.distributed import BuiltinCommHookType
        from fiamma.distributed.algorithms.ddp_comm_hooks import default_hooks
        hooks = {BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
                 BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook}
        if comm_hook_type not in hooks:
            raise ValueError(f"_register_builtin_comm_hook: expected a BuiltinCommHookType "
                             f"(ALLREDUCE or FP16_COMPRESS), got {comm_hook_type!r}")
        self.register_comm_hook(self.process_group, hooks[comm_hook_type])

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

    def _nccl_all_reduce(self, flat):
        ng = self.process_group._nccl
        p, dt = ng.ptr(flat, "DistributedDataParallel"), ng.dtype(flat, "DistributedDataParallel")
        code = ng.op(ReduceOp.SUM, flat.dtype, "DistributedDataParallel")
        n = flat.numel()
        return ng.run("all_reduce", None, "DistributedDataParallel gradient bucket",
                      lambda s: ng.comm.allReduce(p, p, n, dt, code, s), [flat], flat, True)

    def extra_repr(self):
        return ""

    def __getstate__(self):
        raise TypeError("DistributedDataParallel cannot be pickled; save .module (or its "
                        "state_dict) instead")


class _DDPJoinHook(JoinHook):
    """DDP under Join: a joined rank shadows each step's collectives, then all ranks take the
    last joiner's parameters and buffers."""

    def __init__(self, ddp):
        self.ddp = ddp

    def main_hook(self):
        self.ddp._shadow_step()

    def post_hook(self, is_last_joiner):
        self.ddp._sync_final_model(is_last_joiner)
