"""DDP communication hooks (``torch.distributed.algorithms.ddp_comm_hooks``): register one
with ``DistributedDataParallel.register_comm_hook(state, hook)``, or by name with
:func:`register_ddp_comm_hook` and :class:`DDPCommHookType`.

- :mod:`.default_hooks`: ``allreduce_hook``, ``fp16_compress_hook``, ``bf16_compress_hook``,
  ``fp16_compress_wrapper``, ``bf16_compress_wrapper``;
- :mod:`.powerSGD_hook`: ``PowerSGDState``, ``powerSGD_hook``, ``batched_powerSGD_hook``;
- :mod:`.debugging_hooks`: ``noop_hook``.
"""

from __future__ import annotations

import enum
import functools

from fiamma.distributed.algorithms.ddp_comm_hooks import (  # noqa: F401
    debugging_hooks,
    default_hooks,
    powerSGD_hook,
)

__all__ = ["DDPCommHookType", "register_ddp_comm_hook", "default_hooks", "powerSGD_hook",
           "debugging_hooks"]


def _plain(comm_hook, model, state):
    model.register_comm_hook(state, comm_hook)


def _powerSGD(comm_hook, model, state, matrix_approximation_rank):
    # as PyTorch: the state's process group is the one given; PowerSGD from the first step
    ps = powerSGD_hook.PowerSGDState(process_group=state,
                                     matrix_approximation_rank=matrix_approximation_rank,
                                     start_powerSGD_iter=0)
    model.register_comm_hook(ps, comm_hook)


def _member(fn):
    member = getattr(enum, "member", None)  # (Python 3.11+: a partial needs enum.member)
    return member(fn) if member is not None else fn


class DDPCommHookType(enum.Enum):
    """Hooks by name: ``DDPCommHookType.FP16_COMPRESS.value(model=ddp, state=None)`` or
    :func:`register_ddp_comm_hook`."""

    ALLREDUCE = _member(functools.partial(_plain, default_hooks.allreduce_hook))
    FP16_COMPRESS = _member(functools.partial(_plain, default_hooks.fp16_compress_hook))
    BF16_COMPRESS = _member(functools.partial(_plain, default_hooks.bf16_compress_hook))
    POWER_SGD = _member(functools.partial(_powerSGD, powerSGD_hook.powerSGD_hook,
                                          matrix_approximation_rank=1))
    POWER_SGD_RANK2 = _member(functools.partial(_powerSGD, powerSGD_hook.powerSGD_hook,
                                                matrix_approximation_rank=2))
    BATCHED_POWER_SGD = _member(functools.partial(
        _powerSGD, powerSGD_hook.batched_powerSGD_hook, matrix_approximation_rank=1))
    BATCHED_POWER_SGD_RANK2 = _member(functools.partial(
        _powerSGD, powerSGD_hook.batched_powerSGD_hook, matrix_approximation_rank=2))
    NOOP = _member(functools.partial(_plain, debugging_hooks.noop_hook))


def register_ddp_comm_hook(comm_hook_type, model, state=None):
    """Register the hook named by ``comm_hook_type`` (a :class:`DDPCommHookType`) on the
    DistributedDataParallel ``model``; ``state`` is its process group (``None``: the default
    group)."""
    if not isinstance(comm_hook_type, DDPCommHookType):
        raise TypeError(f"register_ddp_comm_hook: expected a DDPCommHookType, got "
                        f"{comm_hook_type!r}")
    comm_hook_type.value(model=model, state=state)
