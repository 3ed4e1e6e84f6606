"""Engine semantics side by side with PyTorch (run by `nox -s parity`; skipped without torch).

The same program runs on both libraries (``lib`` is fiamma or torch); gradients, error kinds
and graph shapes must agree. Only add/mul/sum and in-place forms are used, whose formulas the
engine ships itself."""

import numpy as np
import pytest

import fiamma

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def tensors(lib, *arrays, grad=True):
    dt = lib.float64
    return [lib.tensor(a, dtype=dt, requires_grad=grad) for a in arrays]


def grads(ts):
    return [None if t.grad is None else np.asarray(t.grad.tolist()) for t in ts]


def run_both(program):
    out = {}
    for lib in (fiamma, torch):
        out[lib.__name__] = program(lib)
    return out["fiamma"], out["torch"]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if x is None or y is None:
            assert x is None and y is None
        else:
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 1))
B = RNG.standard_normal((4,))
C = RNG.standard_normal(())
X43 = RNG.standard_normal((4, 3))
W23 = RNG.standard_normal((2, 3))
V4 = RNG.standard_normal(4)


def test_broadcasting_and_accumulation():
    def program(lib):
        a, b, c = tensors(lib, A, B, C)
        ((a + b) * c * a).sum().backward()
        (a * b).sum(1).sum().backward()
        return grads([a, b, c])

    assert_same(*run_both(program))


def test_double_backward():
    def program(lib):
        a, b = tensors(lib, B, B * 2)
        y = (a * a * b).sum()
        ga, gb = lib.autograd.grad(y, (a, b), create_graph=True)
        (ga.sum() * gb.sum()).backward()
        return grads([a, b])

    assert_same(*run_both(program))


def test_inplace_on_views():
    def program(lib):
        a, w, v = tensors(lib, X43, W23, V4)
        base = a * 1
        base[1:3].mul_(w)
        base.t()[0].add_(v * 2)
        (base * base).sum().backward()
        return grads([a, w, v])

    assert_same(*run_both(program))


def test_retain_grad_and_hooks():
    def program(lib):
        a, b = tensors(lib, A, B)
        h = a * b
        h.retain_grad()
        h.register_hook(lambda g: g * 3)
        (h * h).sum().backward()
        return grads([a, b, h])

    assert_same(*run_both(program))


def test_error_kinds_match():
    for lib in (fiamma, torch):
        (a,) = tensors(lib, B)
        h = a * 1
        y = (h * h).sum()
        h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            a.mul_(2)
        y = (a * a).sum()
        y.backward()
        with pytest.raises(RuntimeError, match="retain_graph=True"):
            y.backward()


def test_grad_fn_names():
    names = {}
    for lib in (fiamma, torch):
        (a,) = tensors(lib, B)
        y = (a * 2 + a).sum()
        def name(n):
            return None if n is None else n.name().replace("torch::autograd::", "")

        names[lib.__name__] = (name(y.grad_fn),
                               [name(n) for n, _ in y.grad_fn.next_functions],
                               [name(n) for n, _ in y.grad_fn.next_functions[0][0].next_functions])
    assert names["fiamma"] == names["torch"]
