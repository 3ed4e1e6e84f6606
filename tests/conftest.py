"""Shared by the root tests: the ``device`` fixture (the same rule as core's tests/conftest.py):
``xp`` (the NumPy reference device of the array-module backend) always, ``cuda`` (CuPy on a
GPU) marked ``gpu`` and skipped without one; FIAMMA_TEST_DEVICES=cuda (comma-separated)
picks devices.

    from conftest import assert_same, needs_device_support
"""

import re

import numpy as np
import pytest

import fiamma


def _device_params():
    params = []
    for name, reason in fiamma.testing.devices_to_test():
        marks = [] if name != "cuda" else [
            pytest.mark.gpu, pytest.mark.skipif(reason is not None, reason=str(reason))]
        params.append(pytest.param(name, id=name, marks=marks))
    return params


_cuda_reason = fiamma.testing.cuda_skip_reason
DEVICES = _device_params()


@pytest.fixture(params=DEVICES)
def device(request):
    """A device other than the CPU to run a test on (see DEVICES)."""
    return request.param


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    """A tensor computed on another device equals the CPU's result: dtype, shape, values."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    g = got.detach().cpu().float() if got.dtype == fiamma.bfloat16 else got.detach().cpu()
    w = want.detach().float() if want.dtype == fiamma.bfloat16 else want.detach()
    g, w = g.numpy(), w.numpy()
    if w.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def needs_device_support(device, what, probe):
    """Skip (naming the missing piece) when ``probe()`` shows that the device's backend does
    not yet run ``what``: a missing backend primitive (its family is still to come on this
    device) or a result computed off the device. Anything else the probe raises propagates."""
    try:
        out = probe()
    except AttributeError as e:
        m = re.search(r"object has no attribute '(\w+)'", str(e))
        if m is None or "Backend" not in str(e):
            raise
        pytest.skip(f"{what} on {device}: the {device} backend has no '{m.group(1)}' primitive "
                    "yet")
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for t in outs:
        if isinstance(t, fiamma.Tensor) and t.device.type != device:
            pytest.skip(f"{what} on {device}: its op-layer path still computes on {t.device}")
