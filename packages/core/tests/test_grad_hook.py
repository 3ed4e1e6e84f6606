"""The autograd hook contract (fiamma._grad_hook): core calls the registered recorder only when
an input requires grad and grad mode is on; without fiamma-autograd, asking for gradients fails
with an error naming the package."""

import importlib.util

import pytest

import fiamma
from fiamma import _grad_hook as G


class FakeRecorder:
    def __init__(self):
        self.calls = []

    def record(self, op, out, inputs, kwargs):
        # a real recorder attaches a grad_fn and marks the result as requiring grad
        out.requires_grad = True
        self.calls.append(("record", op, out, inputs, kwargs))

    def record_inplace(self, op, out, inputs, kwargs):
        self.calls.append(("inplace", op, out, inputs, kwargs))

    def inplace(self, fn, name, self_, args, kwargs):
        # the contract: compute the out-of-place op, write it into self (bumping its version)
        res = fn(self_, *args, **kwargs)
        with fiamma.no_grad():
            self_.copy_(res)
        self.calls.append(("inplace", name, self_, args, kwargs))

    def requires_grad_(self, t, flag):
        t.requires_grad = bool(flag)


@pytest.fixture
def recorder():
    prev = G._recorder
    rec = FakeRecorder()
    G.register_autograd(rec)
    yield rec
    G._recorder = prev


def test_no_recording_without_requires_grad(recorder):
    a = fiamma.ones(3)
    b = fiamma.ones(3)
    (a + b).exp()
    a.view(3, 1).transpose(0, 1)
    assert recorder.calls == []


def test_records_ops_on_tensors_that_require_grad(recorder):
    a = fiamma.ones(2, 3).requires_grad_()
    b = fiamma.ones(3)
    c = a + b
    d = c.exp()
    v = d.view(6)
    ops = [c_[1] for c_ in recorder.calls]
    assert ops == ["add", "exp", "view"]
    kind, op, out, inputs, kwargs = recorder.calls[0]
    assert out is c and inputs[0] is a and inputs[1] is b
    assert recorder.calls[2][4]["shape"] == (6,)
    assert v.shape == (6,)


def test_no_grad_disables_recording(recorder):
    a = fiamma.ones(3).requires_grad_()
    with fiamma.no_grad():
        assert not fiamma.is_grad_enabled()
        a * 2
    assert fiamma.is_grad_enabled()
    assert recorder.calls == []
    a * 2
    assert [c[1] for c in recorder.calls] == ["mul"]


def test_inplace_ops_bump_version_and_record(recorder):
    a = fiamma.ones(3).requires_grad_()
    v0 = a._version
    a.add_(1)
    assert a._version == v0 + 1
    assert recorder.calls[-1][0] == "inplace" and recorder.calls[-1][1] == "add_"


def test_grad_mode_is_thread_local():
    import threading

    seen = []
    with fiamma.no_grad():
        t = threading.Thread(target=lambda: seen.append(fiamma.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_set_grad_enabled_forms():
    fiamma.set_grad_enabled(False)
    assert not fiamma.is_grad_enabled()
    fiamma.set_grad_enabled(True)
    assert fiamma.is_grad_enabled()

    @fiamma.set_grad_enabled(False)
    def f():
        return fiamma.is_grad_enabled()

    assert fiamma.is_grad_enabled()
    assert f() is False
    assert fiamma.is_grad_enabled()

    @fiamma.no_grad()
    def g():
        return fiamma.is_grad_enabled()

    assert g() is False and fiamma.is_grad_enabled()
    with fiamma.inference_mode():
        assert fiamma.is_inference_mode_enabled() and not fiamma.is_grad_enabled()
    assert not fiamma.is_inference_mode_enabled()


@pytest.mark.skipif(importlib.util.find_spec("fiamma.autograd") is not None,
                    reason="fiamma-autograd is installed")
def test_requires_grad_without_autograd_names_the_package():
    prev = G._recorder
    G._recorder = None
    try:
        with pytest.raises(RuntimeError, match="fiamma-autograd"):
            fiamma.ones(2).requires_grad_()
        with pytest.raises(RuntimeError, match="fiamma-autograd"):
            fiamma.ones(2, requires_grad=True)
    finally:
        G._recorder = prev
    # asking for no gradients is always fine
    assert fiamma.ones(2).requires_grad_(False).requires_grad is False


def test_missing_sibling_names_the_distribution():
    if importlib.util.find_spec("fiamma.nn") is not None:
        pytest.skip("fiamma-nn is installed")
    with pytest.raises(AttributeError, match="fiamma-nn"):
        fiamma.nn
    with pytest.raises(AttributeError):
        fiamma.not_a_thing
