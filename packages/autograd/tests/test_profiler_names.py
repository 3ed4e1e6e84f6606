"""``fiamma.autograd.profiler``'s names beside ``profile``: ``emit_nvtx`` (fiamma emits no NVTX
ranges: entering it enabled raises, disabled it does nothing, as PyTorch's does when off)."""

import pytest

import fiamma
from fiamma.autograd import profiler


def test_emit_nvtx_raises_when_enabled_and_is_inert_when_disabled():
    with pytest.raises(RuntimeError, match="emits no NVTX ranges"):
        with profiler.emit_nvtx():
            pass
    with profiler.emit_nvtx(enabled=False, record_shapes=True) as ctx:
        y = (fiamma.ones(2, requires_grad=True) * 3).sum()
    assert ctx.record_shapes and y.item() == 6.0


def test_private_profiler_enabled_follows_the_profiler():
    import fiamma.autograd as autograd

    assert autograd._profiler_enabled() is False
    with profiler.profile():
        assert autograd._profiler_enabled() is True
    assert autograd._profiler_enabled() is False
