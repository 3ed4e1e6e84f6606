"""Gradients at non-finite and out-of-domain points, as PyTorch 2.13 gives them (found by a
differential fuzz against PyTorch)."""
import math

import fiamma
import fiamma.autograd  # noqa: F401

NAN = float("nan")
INF = float("inf")


def _grad(fn, values, dtype=fiamma.float64):
    x = fiamma.tensor(values, dtype=dtype, requires_grad=True)
    fn(x).sum().backward()
    return x.grad.tolist()


def _same(a, b):
    return all((math.isnan(p) and math.isnan(q)) or p == q for p, q in zip(a, b))


def test_relu_passes_the_gradient_of_nan_outputs():
    for dt in (fiamma.float32, fiamma.float64, fiamma.bfloat16):
        g = _grad(fiamma.relu, [NAN, INF, -INF, 1.0, -1.0, 0.0], dt)
        assert g == [1.0, 1.0, 0.0, 1.0, 0.0, 0.0], dt
    # the composed path (a non-contiguous input) agrees
    x = fiamma.tensor([[NAN, -1.0], [2.0, 0.0]], requires_grad=True)
    fiamma.relu(x.t()).sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0], [1.0, 0.0]]


def test_logit_gradient_outside_the_unit_interval():
    g = _grad(fiamma.logit, [0.0, 1.0, -0.5, 1.5, 0.3])
    assert g[0] == INF and g[1] == INF and math.isnan(g[2]) and math.isnan(g[3])
    assert abs(g[4] - 1 / (0.3 * 0.7)) < 1e-12
    g = _grad(lambda x: fiamma.logit(x, 1e-3), [0.0, 1.0, -0.5, 1.5, 0.3])
    assert g[:4] == [0.0, 0.0, 0.0, 0.0]


def test_angle_of_real_inputs_has_zero_gradient():
    assert _grad(fiamma.angle, [NAN, INF, -2.0, 0.0, 3.0]) == [0.0] * 5
    z = fiamma.tensor([1 + 1j, -2j], requires_grad=True)
    (fiamma.angle(z) * fiamma.tensor([1.0, 2.0])).sum().backward()
    # d angle / d z (PyTorch's convention: the conjugate Wirtinger gradient): i z / |z|^2
    expect = [1j * (1 + 1j) / 2, 2 * (1j * -2j) / 4]
    assert _same([c.real for c in z.grad.tolist()], [c.real for c in expect])
    assert _same([c.imag for c in z.grad.tolist()], [c.imag for c in expect])
