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


def test_extremes_with_nan_follow_pytorch():
    # amax/amin/aminmax: (g / count) * mask, NaN over a slice whose extreme is NaN;
    # max()/min()/median() of all elements: the gradient split among the NaN elements
    v = [1.0, NAN, 3.0, NAN]
    assert all(math.isnan(e) for e in _grad(lambda x: x.amax(-1), v))
    assert all(math.isnan(e) for e in _grad(lambda x: fiamma.stack(fiamma.aminmax(x)), v))
    assert _grad(lambda x: x.max(), v) == [0.0, 0.5, 0.0, 0.5]
    assert _grad(lambda x: x.min(), v) == [0.0, 0.5, 0.0, 0.5]
    assert _grad(lambda x: x.median(), v) == [0.0, 0.5, 0.0, 0.5]
    assert _grad(lambda x: x.nanmedian(), [NAN]) == [1.0]
    g = _grad(lambda x: x.amax(-1), [[1.0, NAN], [2.0, 3.0]])
    assert math.isnan(g[0][0]) and math.isnan(g[0][1]) and g[1] == [0.0, 1.0]
    assert _grad(lambda x: x.amax(), [3.0, 1.0, 3.0]) == [0.5, 0.0, 0.5]


def test_quantile_of_nan_picks_the_nan_element():
    g = _grad(lambda x: x.quantile(0.5), [1.0, NAN, 2.0, 0.5])
    assert g == [0.0, 1.0, 0.0, 0.0]
    assert _grad(lambda x: x.nanquantile(0.5), [NAN, NAN]) == [1.0, 0.0]
    x = fiamma.tensor([[1.0, NAN, 3.0], [2.0, 0.0, 1.0]], dtype=fiamma.float64)
    r = x.quantile(0.25, dim=-1)
    assert math.isnan(r[0].item()) and r[1].item() == 0.5
    r = x.nanquantile(0.5, dim=-1)
    assert r.tolist() == [2.0, 1.0]


def test_logit_with_a_negative_eps_is_unclamped():
    g = _grad(lambda x: fiamma.logit(x, -2.0), [0.3, 1.5, -0.5])
    assert abs(g[0] - 1 / (0.3 * 0.7)) < 1e-12 and math.isnan(g[1]) and math.isnan(g[2])


def test_float_power_with_an_integer_or_bool_exponent():
    for e, want in (([True, False], [1.0, 0.0]), ([2, 0], [3.0, 0.0])):
        x = fiamma.tensor([1.5, 2.0], requires_grad=True)
        fiamma.float_power(x, fiamma.tensor(e)).sum().backward()
        assert x.grad.dtype == fiamma.float32 and x.grad.tolist() == want
