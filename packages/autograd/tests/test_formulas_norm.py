"""First and second derivatives of the normalisation ops (batch_norm in training and eval,
instance_norm, layer_norm, group_norm, rms_norm; with and without affine parameters; through
the fused C backward ops and their composed double backward), checked numerically in
float64."""

import numpy as np
import pytest
from _formula_check import check, noncontig, rand

import fiamma


def _bn(training):
    def fn(x, w, b):
        rm = fiamma.zeros(x.shape[1], dtype=fiamma.float64) + 0.3
        rv = fiamma.ones(x.shape[1], dtype=fiamma.float64) * 1.7
        return fiamma.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5)
    return fn


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm(training, affine):
    x = rand(3, 2, 4, seed=1)
    w = rand(2, seed=2) if affine else None
    b = rand(2, seed=3) if affine else None
    check(_bn(training), x, w, b)


def test_batch_norm_2d_noncontiguous_weight_only():
    x = noncontig(3, 2, 2, 3)
    w = rand(2, seed=4)
    check(lambda x, w: fiamma.batch_norm(x, None, None, w, None, True), x, w)


def test_batch_norm_weight_grad_only():
    x = rand(4, 3, seed=5).detach()
    w, b = rand(3, seed=6), rand(3, seed=7)
    check(lambda x, w, b: fiamma.batch_norm(x, None, None, w, b, True), x, w, b)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine):
    x = rand(3, 2, 4, seed=8)
    w = rand(2, 4, seed=9) if affine else None
    b = rand(2, 4, seed=10) if affine else None
    check(lambda x, w, b: fiamma.layer_norm(x, (2, 4), w, b, 1e-5), x, w, b)


def test_layer_norm_noncontiguous_last_dim():
    x = noncontig(3, 5)
    w = rand(5, seed=11)
    check(lambda x, w: fiamma.layer_norm(x, (5,), w, None), x, w)


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(affine):
    x = rand(2, 6, 3, seed=12)
    w = rand(6, seed=13) if affine else None
    b = rand(6, seed=14) if affine else None
    check(lambda x, w, b: fiamma.group_norm(x, 3, w, b, 1e-5), x, w, b)


def test_group_norm_2d_input():
    x = noncontig(3, 4)
    check(lambda x: fiamma.group_norm(x, 2), x)


@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(affine):
    x = rand(3, 5, seed=15)
    w = rand(5, seed=16) if affine else None
    check(lambda x, w: fiamma.rms_norm(x, (5,), w, 1e-6), x, w)


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm(use_input_stats):
    x = rand(2, 3, 4, seed=17)
    w, b = rand(3, seed=18), rand(3, seed=19)

    def fn(x, w, b):
        rm = fiamma.zeros(3, dtype=fiamma.float64) + 0.2
        rv = fiamma.ones(3, dtype=fiamma.float64) * 0.8
        return fiamma.instance_norm(x, rm, rv, w, b, use_input_stats, 0.1, 1e-5)
    check(fn, x, w, b)


def test_third_order_layer_norm_runs():
    x = rand(2, 4, seed=20)
    y = fiamma.layer_norm(x, (4,))
    (g1,) = fiamma.autograd.grad((y * y * y).sum(), x, create_graph=True)
    (g2,) = fiamma.autograd.grad((g1 * g1).sum(), x, create_graph=True)
    (g3,) = fiamma.autograd.grad(g2.sum(), x)
    assert np.isfinite(g3.numpy()).all()


def test_float32_gradients_match_float64():
    rng = np.random.default_rng(21)
    a = rng.standard_normal((4, 3, 5))
    grads = []
    for dt in (fiamma.float32, fiamma.float64):
        x = fiamma.tensor(a, dtype=dt).requires_grad_()
        w = fiamma.ones(3, dtype=dt).requires_grad_()
        y = fiamma.batch_norm(x, None, None, w, None, True)
        (y * y * fiamma.tensor(a, dtype=dt)).sum().backward()
        grads.append((x.grad.to(fiamma.float64).numpy(), w.grad.to(fiamma.float64).numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-4, atol=1e-5)


def _written_bias_case(name):
    x = rand(2, 4, 3, 3, seed=3).requires_grad_(True)
    w = rand(4, seed=4).requires_grad_(True)
    b = rand(4, seed=5).requires_grad_(True)
    if name == "conv2d":
        k = rand(4, 4, 3, 3, seed=6).requires_grad_(True)
        return (x, k, b), lambda: fiamma.conv2d(x, k, b, padding=1)
    if name == "conv_transpose2d":
        k = rand(4, 4, 3, 3, seed=6).requires_grad_(True)
        return (x, k, b), lambda: fiamma.conv_transpose2d(x, k, b, stride=2)
    if name == "batch_norm":
        rm, rv = fiamma.zeros(4, dtype=fiamma.float64), fiamma.ones(4, dtype=fiamma.float64)
        return (x, w, b), lambda: fiamma.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
    return (x, w, b), lambda: fiamma.group_norm(x, 2, w, b, 1e-5)


@pytest.mark.parametrize("name", ["conv2d", "conv_transpose2d", "batch_norm", "group_norm"])
def test_bias_written_in_place_before_backward(name):
    # convolution's, batch_norm's and group_norm's bias values are not saved for backward (only
    # that there is one), as in PyTorch: an optimizer step on the bias between the forward pass
    # and backward is allowed, and the gradients are those of the forward pass; the weight
    # still raises the version error, and layer_norm (which PyTorch saves the bias of) too
    (x, w, b), f = _written_bias_case(name)
    y = f()
    g = rand(*y.shape, seed=7).detach()
    want = fiamma.autograd.grad(y, (x, w, b), g, retain_graph=True)
    with fiamma.no_grad():
        b.add_(1.0)
    got = fiamma.autograd.grad(y, (x, w, b), g, retain_graph=True)
    for a, e in zip(got, want):
        np.testing.assert_array_equal(a.detach().numpy(), e.detach().numpy())
    np.testing.assert_allclose(got[2].numpy(), g.sum(dim=(0, 2, 3)).numpy(), rtol=1e-12)
    with fiamma.no_grad():
        w.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward(g)


def test_layer_norm_bias_still_saved():
    x = rand(2, 3, seed=1).requires_grad_(True)
    w, b = rand(3, seed=2).requires_grad_(True), rand(3, seed=3).requires_grad_(True)
    y = fiamma.layer_norm(x, (3,), w, b)
    with fiamma.no_grad():
        b.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
