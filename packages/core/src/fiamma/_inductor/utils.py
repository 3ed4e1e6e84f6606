"""``torch._inductor.utils``: ``fresh_inductor_cache``, which PyTorch uses to time cold
compilations; fiamma has no compiled-code cache, so it isolates nothing."""

import contextlib

__all__ = ["fresh_inductor_cache"]


@contextlib.contextmanager
def fresh_inductor_cache(cache_entries=None, dir=None, delete=True):
    """Run the block with a fresh, temporary Inductor cache: fiamma has none, so the block
    just runs (``cache_entries``, if a dict, stays empty)."""
    yield
