"""Device dispatch: a tensor's device names its backend, ops run on the backend of their
inputs, results stay on that device, and mixing devices raises an error naming both.

The device here is a test device, ``testdev``: a backend that runs every primitive with the
CPU backend's code (over memory from the CPU allocator) and records the primitives it was
asked for. Ops reaching it prove that they dispatch instead of calling the CPU directly."""

import numpy as np
import pytest

import fiamma
from fiamma import _backend
from fiamma._backend import cpu
from fiamma._storage import Storage


class _Recorder:
    name = "testdev"

    def __init__(self):
        self.calls = []
        dev = fiamma.device("testdev")

        class _TestStorage(Storage):
            __slots__ = ()
            device = dev
            backend = self

        self.storage = _TestStorage

    def new_storage(self, dev, nbytes, zero=False):
        self.calls.append("new_storage")
        return self.storage(nbytes, zero)

    def __getattr__(self, name):
        fn = getattr(cpu, name)

        def primitive(*args, **kwargs):
            self.calls.append(name)
            return fn(*args, **kwargs)

        return primitive


@pytest.fixture
def testdev(monkeypatch):
    monkeypatch.setattr(_backend, "_BACKENDS", dict(_backend._BACKENDS))
    monkeypatch.setattr(_backend, "DEVICE_TYPES", set(_backend.DEVICE_TYPES))
    _backend.DEVICE_TYPES.add("testdev")  # the device name must exist before the backend
    rec = _Recorder()
    _backend.register("testdev", rec)
    return rec


def _on(rec, a):
    t = fiamma.tensor(a).to("testdev")
    assert t.device == fiamma.device("testdev") and t._storage.backend is rec
    return t


def test_device_type_is_registered(testdev):
    assert "testdev" in _backend.registered()
    assert fiamma.device("testdev").type == "testdev"
    with pytest.raises(ValueError, match="nodev"):
        fiamma.device("nodev")


def test_creation_and_transfer(testdev):
    x = fiamma.ones(2, 3, device="testdev")
    assert x.device.type == "testdev" and "fill" in testdev.calls
    assert x.cpu().tolist() == [[1.0] * 3] * 2
    y = fiamma.arange(6, device="testdev")
    assert y.device.type == "testdev" and "arange" in testdev.calls
    assert y.tolist() == list(range(6))
    z = fiamma.zeros(3).to("testdev")
    z.copy_(fiamma.tensor([1.0, 2.0, 3.0]))
    assert z.cpu().tolist() == [1.0, 2.0, 3.0]


def test_ops_run_on_their_inputs_backend(testdev):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = _on(testdev, a)
    w = _on(testdev, a[0])
    testdev.calls.clear()
    checks = [
        (x + x, a + a, "binary"),
        (x * 2.0, a * 2.0, "binary"),
        (x + w, a + a[0], "binary"),
        (x.exp(), np.exp(a), "unary"),
        (fiamma.where(x > 3, x, w), np.where(a > 3, a, a[0]), "ternary"),
        (x.sum(1), a.sum(1), "reduce"),
        (x.cumsum(0), a.cumsum(0), "scan"),
        (x.softmax(-1), np.exp(a) / np.exp(a).sum(-1, keepdims=True), "softmax"),
        (x @ x.t(), a @ a.T, "mm"),
        (x.sort(1, descending=True).values, -np.sort(-a, 1), "sort"),
        (x[:, fiamma.tensor([2, 0]).to("testdev")], a[:, [2, 0]], "index_gather"),
        (x[fiamma.tensor([2, 0]).to("testdev")], a[[2, 0]], "ixop"),  # whole rows
    ]
    for got, want, prim in checks:
        assert got.device.type == "testdev", prim
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-6, err_msg=prim)
        assert prim in testdev.calls, prim


def test_in_place_and_item(testdev):
    x = fiamma.zeros(3, device="testdev")
    x += 1
    x.add_(fiamma.ones(3, device="testdev"), alpha=2)
    assert x.cpu().tolist() == [3.0, 3.0, 3.0]
    testdev.calls.clear()
    assert x[1].item() == 3.0 and "read_float" in testdev.calls  # one element, on the device
    testdev.calls.clear()
    assert x.tolist() == [3.0, 3.0, 3.0] and "to_host" in testdev.calls


def test_mixing_devices_names_both(testdev):
    x = fiamma.ones(3, device="testdev")
    y = fiamma.ones(3)
    for fn in (lambda: x + y, lambda: y * x, lambda: fiamma.cat([x, y]),
               lambda: fiamma.where(y > 0, x, y)):
        with pytest.raises(RuntimeError, match="testdev.*cpu|cpu.*testdev"):
            fn()


def test_device_without_backend_fails_naming_it():
    from fiamma._backend import _BACKENDS, _LOADERS, DEVICE_TYPES

    DEVICE_TYPES.add("nodev")
    try:
        assert "nodev" not in _BACKENDS and "nodev" not in _LOADERS
        with pytest.raises(RuntimeError, match="nodev"):
            fiamma.ones(2, device="nodev")
    finally:
        DEVICE_TYPES.discard("nodev")


def test_gradient_crosses_back(testdev):
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.to("testdev")
    (y * y).sum().backward()
    assert x.grad.device == fiamma.device("cpu")
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
