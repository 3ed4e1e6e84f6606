"""The array-module backend's foundation on every device besides the CPU: storages, transfers,
the memory, elementwise, reduction and matmul families against the CPU backend's results."""

import numpy as np
import pytest
from conftest import assert_same

import fiamma


def _pair(a, device, dtype=None):
    c = fiamma.tensor(a, dtype=dtype)
    return c, c.to(device)


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64, fiamma.float16, fiamma.bfloat16,
                                fiamma.int64, fiamma.int32, fiamma.uint8, fiamma.bool])
def test_transfer_and_creation(device, dt):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(np.float64)
    c, d = _pair(a, device, dt)
    assert d.device.type == device
    assert_same(d, c)
    assert_same(d.permute(2, 0, 1).contiguous(), c.permute(2, 0, 1).contiguous())
    assert_same(d[:, ::2, 1:], c[:, ::2, 1:].contiguous())
    assert_same(fiamma.ones(2, 3, dtype=dt, device=device), fiamma.ones(2, 3, dtype=dt))
    assert_same(fiamma.full((4,), 3, dtype=dt, device=device), fiamma.full((4,), 3, dtype=dt))
    assert d[1, 2, 3].item() == c[1, 2, 3].item()


def test_ranges(device):
    for args in [(0, 10, 3), (5,), (-2.5, 4.0, 0.75)]:
        assert_same(fiamma.arange(*args, device=device), fiamma.arange(*args))
    assert_same(fiamma.linspace(-1, 3, 11, device=device), fiamma.linspace(-1, 3, 11))
    assert_same(fiamma.logspace(0, 2, 5, device=device), fiamma.logspace(0, 2, 5))


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64, fiamma.int64, fiamma.int16,
                                fiamma.bfloat16, fiamma.float16])
def test_binary_and_unary(device, dt):
    rng = np.random.default_rng(0)
    a = rng.integers(-9, 9, (3, 4)).astype(np.float64)
    b = rng.integers(1, 5, (4,)).astype(np.float64)
    ca, da = _pair(a, device, dt)
    cb, db = _pair(b, device, dt)
    tol = dict(rtol=1e-2, atol=1e-2) if dt.itemsize == 2 and dt._kind == 2 else {}
    for f in [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y,
              lambda x, y: x // y, lambda x, y: x % y, lambda x, y: fiamma.maximum(x, y),
              lambda x, y: x < y, lambda x, y: x == y, lambda x, y: x * 3 - 1,
              lambda x, y: 2 - x, lambda x, y: fiamma.where(x > 0, x, y),
              lambda x, y: x.clamp(-2, 3), lambda x, y: x.abs(), lambda x, y: -x,
              lambda x, y: x.sign(), lambda x, y: x.t() + 0]:
        assert_same(f(da, db), f(ca, cb), **tol)
    if dt._kind == 2:
        for f in [lambda x: x.exp(), lambda x: x.sigmoid(), lambda x: x.tanh(),
                  lambda x: x.sqrt(), lambda x: (x / 3).round(), lambda x: x.reciprocal()]:
            assert_same(f(da), f(ca), **tol)
    else:
        assert_same(da << 2, ca << 2)
        assert_same(da.pow(2), ca.pow(2))


def test_integer_division_by_zero_raises(device):
    d = fiamma.tensor([1, 2, 3], device=device)
    with pytest.raises(Exception, match="zero|invalid"):
        d // fiamma.tensor([1, 0, 1], device=device)


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64, fiamma.int64, fiamma.bfloat16])
def test_reductions(device, dt):
    rng = np.random.default_rng(1)
    a = rng.integers(-5, 9, (3, 4, 5)).astype(np.float64)
    c, d = _pair(a, device, dt)
    tol = dict(rtol=1e-2, atol=1e-2) if dt is fiamma.bfloat16 else {}
    for f in [lambda x: x.sum(), lambda x: x.sum((0, 2)), lambda x: x.amax(1),
              lambda x: x.argmax(2), lambda x: x.argmin(), lambda x: x.prod(1),
              lambda x: x.cumsum(1), lambda x: (x > 2).all(0), lambda x: (x > 2).any(),
              lambda x: x.max(1).values]:
        assert_same(f(d), f(c), **tol)
    if dt._kind == 2:
        for f in [lambda x: x.mean(1), lambda x: x.std(0), lambda x: x.var((1, 2)),
                  lambda x: x.softmax(-1), lambda x: x.log_softmax(0),
                  lambda x: x.logsumexp(1), lambda x: x.norm(), lambda x: x.norm(p=3, dim=1)]:
            assert_same(f(d), f(c), **tol)


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64, fiamma.int64, fiamma.bfloat16])
def test_matmul(device, dt):
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (2, 3, 5)).astype(np.float64)
    b = rng.integers(-3, 4, (5, 4)).astype(np.float64)
    ca, da = _pair(a, device, dt)
    cb, db = _pair(b, device, dt)
    assert_same(da @ db, ca @ cb)
    assert_same(da[0] @ db, ca[0] @ cb)
    assert_same(da.transpose(1, 2) @ da, ca.transpose(1, 2) @ ca)
    if dt._kind == 2:
        cbias, dbias = _pair(np.arange(4.0), device, dt)
        assert_same(fiamma.addmm(dbias, da[0], db, beta=0.5, alpha=2.0),
                    fiamma.addmm(cbias, ca[0], cb, beta=0.5, alpha=2.0))


def test_mixing_devices_raises(device):
    with pytest.raises(RuntimeError, match="cpu"):
        fiamma.ones(3, device=device) + fiamma.ones(3)
