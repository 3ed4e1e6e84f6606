"""ZeroRedundancyOptimizer: each rank keeps the optimizer state of its own share of the
parameters (ZeRO stage 1; Rajbhandari et al., 2020), steps that share, and broadcasts the
updated parameters to the other ranks. With DDP (gradients already averaged) the training is
the one a plain optimizer gives, with 1/world of the optimizer's memory per rank.

The parameters are shared out per parameter group, largest first, each to the rank with the
fewest elements so far (PyTorch's greedy partition, so a checkpoint's layout is the same).
"""

from __future__ import annotations

import fiamma
import fiamma.distributed as dist
from fiamma.distributed._state import resolve
from fiamma.distributed.algorithms.join import Join, Joinable, JoinHook

try:
    from fiamma.optim import Optimizer
except ImportError as e:  # pragma: no cover  (fiamma-optim is an optional companion)
    raise ImportError("fiamma.distributed.optim.ZeroRedundancyOptimizer wraps an optimizer of "
                      "fiamma-optim: pip install fiamma-optim") from e

__all__ = ["ZeroRedundancyOptimizer"]


class _ZeROJoinHook(JoinHook):
    def __init__(self, zero):
        self.zero = zero

    def main_hook(self):
        # a joined rank steps its shard (its gradients: None, or the zeros DDP's join left)
        # and takes part in the broadcasts of the ranks still training
        self.zero._step_and_sync()


class ZeroRedundancyOptimizer(Optimizer, Joinable):
    """Shard ``optimizer_class``'s state across the ranks of ``process_group``.

    ``params`` and ``**defaults`` are what ``optimizer_class`` takes; each rank builds it on its
    own share. ``step()`` steps the share and broadcasts the updated parameters, so every rank
    ends with the whole model updated. ``state_dict()`` needs ``consolidate_state_dict(to)`` on
    every rank first and is then available on rank ``to``; ``load_state_dict`` takes such a
    full dict on every rank. ``parameters_as_bucket_view`` is accepted (the parameters stay
    separate tensors; the results are the same); ``overlap_with_ddp=True`` is not supported.

    >>> from fiamma.distributed.optim import ZeroRedundancyOptimizer
    >>> opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=fiamma.optim.Adam,
    ...                               lr=0.01)                               # doctest: +SKIP
    """

    def __init__(self, params, optimizer_class, process_group=None,
                 parameters_as_bucket_view=False, overlap_with_ddp=False, **defaults):
        if overlap_with_ddp:
            raise ValueError("ZeroRedundancyOptimizer: overlap_with_ddp=True is not supported; "
                             "use overlap_with_ddp=False (the default)")
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError("ZeroRedundancyOptimizer: optimizer_class must be an optimizer "
                            f"class (a subclass of fiamma.optim.Optimizer), got "
                            f"{optimizer_class!r}")
        self._ready = False
        Optimizer.__init__(self, params, defaults)
        Joinable.__init__(self)
        group = resolve(process_group, "ZeroRedundancyOptimizer")
        if group is None:
            raise ValueError("ZeroRedundancyOptimizer: this rank is not in process_group")
        self.process_group = group
        self.world_size = group.size()
        self.rank = group.rank()
        self.global_rank = dist.get_rank()
        self.parameters_as_bucket_view = bool(parameters_as_bucket_view)
        self._optim_constructor = optimizer_class
        self._optim_defaults = defaults
        self._all_state_dicts = []
        self._partition = self._partition_parameters()
        self.optim = optimizer_class(self._local_groups(), **defaults)
        self._ready = True
        self._sync_param_groups(self.param_groups, self.optim.param_groups)

    # ---- the partition ----

    def _partition_parameters(self):
        """``[rank][group] -> list of parameters`` (greedy, largest parameter first)."""
        n = self.world_size
        sizes = [0] * n
        out = [[[] for _ in self.param_groups] for _ in range(n)]
        for gi, group in enumerate(self.param_groups):
            for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                r = min(range(n), key=lambda i: sizes[i])
                out[r][gi].append(p)
                sizes[r] += p.numel()
        return out

    def _local_groups(self, rank=None):
        mine = self._partition[self.rank if rank is None else rank]
        return [{**{k: v for k, v in g.items() if k != "params"}, "params": list(ps)}
                for g, ps in zip(self.param_groups, mine)]

    @staticmethod
    def _sync_param_groups(src, dst):
        for s, d in zip(src, dst):
            for k, v in s.items():
                if k != "params":
                    d[k] = v

    def add_param_group(self, param_group):
        """Add a group (its parameters are shared out after the existing ones')."""
        Optimizer.add_param_group(self, param_group)
        if self._ready:
            self._partition = self._partition_parameters()
            self.optim.add_param_group(self._local_groups()[-1])

    # ---- stepping ----

    @property
    def state(self):
        return self.optim.state if self._ready else self._state0

    @state.setter
    def state(self, value):
        if self._ready:
            self.optim.state = value
        else:
            self._state0 = value

    def step(self, closure=None, **kwargs):
        """Step this rank's share, then broadcast every rank's updated parameters."""
        Join.notify_join_context(self)
        return self._step_and_sync(closure, **kwargs)


    def _step_and_sync(self, closure=None, **kwargs):
        self._sync_param_groups(self.param_groups, self.optim.param_groups)
        loss = (self.optim.step(closure=closure, **kwargs) if closure is not None
                else self.optim.step(**kwargs))
        self._sync_params()
        self._sync_param_groups(self.optim.param_groups, self.param_groups)
        return loss

    def _sync_params(self):
        """Each rank's share to every rank: one broadcast per (rank, dtype, device)."""
        if self.world_size == 1:
            return
        g = self.process_group
        with fiamma.no_grad():
            for r in range(self.world_size):
                src = g._ranks[r]
                kinds = {}
                for ps in self._partition[r]:
                    for p in ps:
                        kinds.setdefault((p.dtype, p.device), []).append(p)
                for (dtype, device), ps in kinds.items():
                    if r == self.rank:
                        flat = fiamma.cat([p.detach().reshape(-1) for p in ps])
                    else:
                        flat = fiamma.empty(sum(p.numel() for p in ps), dtype=dtype,
                                            device=device)
                    dist.broadcast(flat, src=src, group=g)
                    if r != self.rank:
                        o = 0
                        for p in ps:
                            p.detach().copy_(flat[o:o + p.numel()].view(p.shape))
                            o += p.numel()

    # ---- state dicts ----

    def consolidate_state_dict(self, to=0):
        """Gather every rank's share of the optimizer state on rank ``to`` (a global rank);
        call it on every rank, then ``state_dict()`` on ``to``."""
        g = self.process_group
        local = self.optim.state_dict()
        gathered = [None] * self.world_size if self.global_rank == to else None
        dist.gather_object(local, gathered, dst=to, group=g)
        self._all_state_dicts = gathered if self.global_rank == to else []

    def state_dict(self):
        """The whole optimizer's state dict (PyTorch's layout: parameters numbered across the
        groups), after :meth:`consolidate_state_dict` on this rank."""
        if not self._all_state_dicts:
            raise RuntimeError("Optimizer state has not been consolidated on this rank. Please "
                               "call `consolidate_state_dict(to)` on all ranks beforehand if "
                               "you meant to save the global state.")
        index = {}
        groups = []
        for group in self.param_groups:
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {}
        for r, local in enumerate(self._all_state_dicts):
            order = [p for ps in self._partition[r] for p in ps]
            for i, s in local["state"].items():
                state[index[id(order[int(i)])]] = s
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a whole optimizer's state dict (from :meth:`state_dict`, or a plain optimizer
        of the same class and groups): each rank keeps its own share."""
        if "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict: expected a dict with "
                             f"'state' and 'param_groups', got keys {sorted(state_dict)}")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(
                len(a["params"]) != len(b["params"]) for a, b in zip(saved, self.param_groups)):
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict: the saved parameter "
                             "groups do not match this optimizer's (group count or sizes)")
        where = {}
        for ours, theirs in zip(self.param_groups, saved):
            for p, i in zip(ours["params"], theirs["params"]):
                where[id(p)] = i
        local_state, local_groups, n = {}, [], 0
        for theirs, ps in zip(saved, self._partition[self.rank]):
            ids = []
            for p in ps:
                k = where[id(p)]
                s = state_dict["state"].get(k, state_dict["state"].get(str(k)))
                if s is not None:
                    local_state[n] = s
                ids.append(n)
                n += 1
            local_groups.append({**{k: v for k, v in theirs.items() if k != "params"},
                                 "params": ids})
        self.optim.load_state_dict({"state": local_state, "param_groups": local_groups})
        for ours, theirs in zip(self.param_groups, saved):
            for k, v in theirs.items():
                if k != "params":
                    ours[k] = v

    # ---- Join ----

    def join_hook(self, **kwargs):
        return _ZeROJoinHook(self)

    @property
    def join_device(self):
        return self.param_groups[0]["params"][0].device

    @property
    def join_process_group(self):
        return self.process_group

    def __repr__(self):
        here = sum(len(ps) for ps in self._partition[self.rank])
        return (f"ZeroRedundancyOptimizer(rank {self.rank} of {self.world_size}, "
                f"{self._optim_constructor.__name__}, {here} parameters here)")
