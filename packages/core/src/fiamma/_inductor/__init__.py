"""``torch._inductor``'s user-facing pieces for programs that touch them around
``torch.compile``: ``config`` (flags, settable without effect: fiamma compiles nothing) and
``utils.fresh_inductor_cache`` (a context manager with no cache to isolate)."""

from fiamma._inductor import config, utils  # noqa: F401

__all__ = ["config", "utils"]
