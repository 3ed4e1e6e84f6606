"""Uneven inputs (``torch.distributed.algorithms.join``): ranks that run out of inputs early
keep answering the collectives of the ranks still training, until every rank has joined.

    >>> import fiamma, fiamma.distributed as dist
    >>> from fiamma import nn
    >>> from fiamma.distributed.algorithms import Join
    >>> dist.init_process_group("mpi")
    >>> model = nn.parallel.DistributedDataParallel(nn.Linear(2, 1))
    >>> with Join([model]):                      # or: with model.join():
    ...     for _ in range(dist.get_rank() + 1):  # each rank its own number of batches
    ...         model(fiamma.ones(4, 2)).sum().backward()
    >>> dist.destroy_process_group()

Protocol (PyTorch's): each iteration, every rank that has not joined calls
:meth:`Join.notify_join_context` (DDP's forward does): an all-reduce of a one. A rank that
left its loop enters ``Join.__exit__`` and all-reduces a zero: the sum is the number of ranks
still training. While it is not zero, the joined rank runs every joinable's
``join_hook().main_hook()`` (for DDP: the collectives of one training step, with zeros), and
once it is zero, ``post_hook(is_last_joiner)`` (for DDP: every rank takes the last joiner's
parameters and buffers). With ``throw_on_early_termination=True`` the first rank to join
makes every rank raise instead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import fiamma

__all__ = ["Join", "Joinable", "JoinHook"]


class JoinHook:
    """What a joined rank runs for one joinable: ``main_hook()`` once per iteration of the
    ranks still training, ``post_hook(is_last_joiner)`` once all have joined."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner: bool):
        pass


class Joinable(ABC):
    """A class whose per-iteration collectives a joined rank can shadow: it gives
    ``join_hook(**kwargs)``, ``join_device`` and ``join_process_group``, and calls
    ``Join.notify_join_context(self)`` once per iteration."""

    @abstractmethod
    def __init__(self):
        super().__init__()
        self._join_config = _JoinConfig.disabled()

    @abstractmethod
    def join_hook(self, **kwargs) -> JoinHook:
        ...

    @property
    @abstractmethod
    def join_device(self):
        ...

    @property
    @abstractmethod
    def join_process_group(self):
        ...


class _JoinConfig:
    __slots__ = ("enable", "throw_on_early_termination", "is_first_joinable")

    def __init__(self, enable, throw_on_early_termination, is_first_joinable):
        self.enable = enable
        self.throw_on_early_termination = throw_on_early_termination
        self.is_first_joinable = is_first_joinable

    @staticmethod
    def disabled():
        return _JoinConfig(False, False, False)


def _config(joinable):
    cfg = getattr(joinable, "_join_config", None)
    return cfg if cfg is not None else _JoinConfig.disabled()


class Join:
    """Context manager for training loops whose ranks have different numbers of inputs.

    ``joinables``: the :class:`Joinable` objects of the loop (a DistributedDataParallel, ...),
    all on one process group; ``enable=False`` makes it a no-op;
    ``throw_on_early_termination=True`` raises on every rank as soon as one runs out of
    inputs; other keyword arguments go to each ``join_hook(**kwargs)`` (DDP's:
    ``divide_by_initial_world_size``)."""

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        joinables = list(joinables)
        if not joinables:
            raise ValueError("The join context manager requires at least one joinable")
        for j in joinables:
            if not isinstance(j, Joinable):
                raise TypeError(f"Join: {type(j).__name__} is not a Joinable (DistributedData"
                                "Parallel and subclasses of fiamma.distributed.algorithms."
                                "Joinable are)")
        self._joinables = joinables
        self._join_hooks = [j.join_hook(**kwargs) for j in joinables]
        self._enable = bool(enable)
        self._throw_on_early_termination = bool(throw_on_early_termination)
        groups = {id(j.join_process_group) for j in joinables}
        if len(groups) > 1:
            raise ValueError("Using join context manager with multiple process groups")
        self._process_group = joinables[0].join_process_group
        self._device = joinables[0].join_device
        for i, j in enumerate(joinables):
            j._join_config = _JoinConfig(self._enable, self._throw_on_early_termination, i == 0)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if not self._enable or exc_type is not None:
                return False  # an exception in the loop is not an early exit: let it go
            all_joined, is_last_joiner = False, True
            while not all_joined:
                active = self._nonjoined()
                if active == 0:
                    all_joined = True
                else:
                    for j in self._joinables:  # (the ranks still training, for the hooks)
                        j._join_active = active
                    if self._throw_on_early_termination:
                        self._notify_procs_to_terminate()
                    for hook in self._join_hooks:
                        hook.main_hook()
                    is_last_joiner = False
            for hook in self._join_hooks:
                hook.post_hook(is_last_joiner)
            return False
        finally:
            for j in self._joinables:
                j._join_config = _JoinConfig.disabled()

    def _nonjoined(self):
        import fiamma.distributed as dist

        count = fiamma.zeros(1, device=self._device)
        dist.all_reduce(count, group=self._process_group)
        return int(count.item())

    def _notify_procs_to_terminate(self):
        import fiamma.distributed as dist

        dist.all_reduce(fiamma.ones(1, device=self._device), group=self._process_group)
        raise RuntimeError(f"Rank {dist.get_rank()} exhausted all inputs.")

    @staticmethod
    def notify_join_context(joinable):
        """Called by ``joinable`` once per iteration: tells the joined ranks that this one is
        still training (an all-reduce of a one, whose async work is returned) and, with
        ``throw_on_early_termination``, raises if some rank has joined. Returns None when
        ``joinable`` is not the first of an enabled join context."""
        import fiamma.distributed as dist

        cfg = _config(joinable)
        if not cfg.enable or not cfg.is_first_joinable:
            return None
        device, group = joinable.join_device, joinable.join_process_group
        work = dist.all_reduce(fiamma.ones(1, device=device), group=group, async_op=True)
        work.wait()  # (completed here: the collectives after it must not overtake it)
        if cfg.throw_on_early_termination:
            flag = fiamma.zeros(1, device=device)
            dist.all_reduce(flag, group=group)
            if flag.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. "
                                   "Throwing across all ranks.")
        return work
