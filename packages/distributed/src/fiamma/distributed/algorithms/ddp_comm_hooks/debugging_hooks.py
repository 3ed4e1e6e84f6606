"""``torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks``: :func:`noop_hook`, which
communicates nothing (each rank keeps its own gradients), to measure what the all-reduce
costs."""

from __future__ import annotations

from fiamma.futures import Future

__all__ = ["noop_hook"]


def noop_hook(_, bucket):
    """A future of the bucket's own gradients, unreduced."""
    fut = Future()
    fut.set_result(bucket.buffer())
    return fut
