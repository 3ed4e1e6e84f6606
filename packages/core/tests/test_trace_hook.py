"""The trace hook (fiamma.autograd_hook.set_trace_hook): while installed, the recording calls
go to it instead of the autograd recorder; uninstalled, nothing changes."""

import threading

import pytest

import fiamma
from fiamma import autograd_hook


class Tape:
    def __init__(self):
        self.calls = []

    def record(self, op, out, inputs, kwargs):
        self.calls.append(("record", op))
        out.requires_grad = True

    def record_inplace(self, op, out, inputs, kwargs):
        self.calls.append(("record_inplace", op))

    def check_inplace(self, t, op):
        self.calls.append(("check_inplace", op))

    def inplace(self, fn, name, self_, args, kwargs):
        self.calls.append(("inplace", name))


def test_hook_receives_ops_of_marked_tensors():
    tape = Tape()
    x = fiamma.ones(3)
    x.requires_grad = True  # the slot: what a tracer sets
    prev = autograd_hook.set_trace_hook(tape)
    try:
        y = (x * 2).sum()
        z = fiamma.ones(3) + 1  # unmarked: not recorded
        x.add_(1)
    finally:
        autograd_hook.set_trace_hook(prev)
        x.requires_grad = False
    assert ("record", "mul") in tape.calls and ("record", "sum") in tape.calls
    assert ("inplace", "add_") in tape.calls and len(tape.calls) == 3
    assert y.grad_fn is None and z.grad_fn is None  # autograd saw nothing


def test_hook_is_per_thread_and_removable():
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    tape = Tape()
    prev = autograd_hook.set_trace_hook(tape)
    seen = []
    try:
        t = threading.Thread(target=lambda: seen.append(autograd_hook.set_trace_hook(None)))
        t.start()
        t.join()
    finally:
        assert autograd_hook.set_trace_hook(prev) is tape
    assert seen == [None]
    x = fiamma.ones(2, requires_grad=True)
    assert (x * 3).grad_fn is not None  # back to autograd


def test_get_trace_hook_returns_the_installed_tracer():
    from fiamma import autograd_hook
    assert autograd_hook.get_trace_hook() is None
    tracer = object()
    prev = autograd_hook.set_trace_hook(tracer)
    try:
        assert autograd_hook.get_trace_hook() is tracer
    finally:
        autograd_hook.set_trace_hook(prev)
    assert autograd_hook.get_trace_hook() is None


def test_grad_mode_off_does_not_stop_a_trace():
    # PyTorch's tracer records what a model runs under no_grad: while a trace hook is
    # installed, no_grad / set_grad_enabled(False) / inference_mode keep grad mode on, so the
    # marked tensors' ops still reach the hook; without a hook they turn it off as usual
    tape = Tape()
    x = fiamma.ones(3)
    x.requires_grad = True
    prev_flag = autograd_hook.set_grad_enabled_flag(True)
    prev = autograd_hook.set_trace_hook(tape)
    try:
        with fiamma.no_grad():
            assert fiamma.is_grad_enabled()
            x * 2
        with fiamma.set_grad_enabled(False):
            x + 1
        with fiamma.inference_mode():
            assert not fiamma.is_inference_mode_enabled()
            x - 1
        fiamma.set_grad_enabled(False)
        assert fiamma.is_grad_enabled()
    finally:
        autograd_hook.set_trace_hook(prev)
        autograd_hook.set_grad_enabled_flag(prev_flag)
    assert [c[1] for c in tape.calls] == ["mul", "add", "sub"], tape.calls
    x.requires_grad = False
    with fiamma.no_grad():
        assert not fiamma.is_grad_enabled()
    with fiamma.inference_mode():
        assert fiamma.is_inference_mode_enabled()
    assert fiamma.is_grad_enabled()
