"""PyTorch's post-local SGD communication hook (``torch.distributed.algorithms.ddp_comm_hooks.
post_localSGD_hook``): gradients are averaged over the whole group for the first
``start_localSGD_iter`` iterations, then only within a subgroup (by default one per node, from
``new_subgroups()``), or not at all with ``post_local_gradient_allreduce=False``; a model
averager (not provided by fiamma) then averages the parameters every few steps.

>>> state = PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=10)
>>> ddp.register_comm_hook(state, post_localSGD_hook)  # doctest: +SKIP
"""

from __future__ import annotations

import fiamma.distributed as dist
from fiamma.distributed.algorithms.ddp_comm_hooks import default_hooks
from fiamma.futures import Future

__all__ = ["PostLocalSGDState", "post_localSGD_hook"]


class PostLocalSGDState:
    """The hook's state: the global ``process_group`` (None: the default group), the
    ``subgroup`` of the local phase (None: ``new_subgroups()`` on first use), the iteration
    the local phase starts at, and whether it still all-reduces within the subgroup."""

    __slots__ = ["process_group", "subgroup", "start_localSGD_iter",
                 "post_local_gradient_allreduce", "iter"]

    def __init__(self, process_group, subgroup, start_localSGD_iter,
                 post_local_gradient_allreduce=True):
        if not isinstance(start_localSGD_iter, int) or start_localSGD_iter < 1:
            raise ValueError(f"PostLocalSGDState: start_localSGD_iter must be a positive int, "
                             f"got {start_localSGD_iter!r}")
        self.process_group = process_group
        self.subgroup = subgroup
        self.start_localSGD_iter = start_localSGD_iter
        self.post_local_gradient_allreduce = post_local_gradient_allreduce
        self.iter = 0

    def maybe_increase_iter(self, bucket):
        """Count an iteration when the last bucket of a backward comes through."""
        if bucket.is_last():
            self.iter += 1


def post_localSGD_hook(state, bucket):
    """Average the bucket over the global group before ``start_localSGD_iter``, afterwards
    over ``state.subgroup`` (or leave it local)."""
    buffer = bucket.buffer()
    if state.iter < state.start_localSGD_iter:
        state.maybe_increase_iter(bucket)
        return default_hooks._allreduce_fut(state.process_group, buffer)
    if not state.post_local_gradient_allreduce:
        fut = Future()
        fut.set_result(buffer)
        state.maybe_increase_iter(bucket)
        return fut
    if state.subgroup is None:
        state.subgroup, _ = dist.new_subgroups()
    state.maybe_increase_iter(bucket)
    return default_hooks._allreduce_fut(state.subgroup, buffer)
