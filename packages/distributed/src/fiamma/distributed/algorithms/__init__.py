"""``fiamma.distributed.algorithms`` (``torch.distributed.algorithms``): :mod:`.join`, training
with uneven inputs across ranks."""

from fiamma.distributed.algorithms.join import Join, Joinable, JoinHook

__all__ = ["Join", "Joinable", "JoinHook"]
