"""Regressions from the higher-order / forward-mode differential fuzz against PyTorch 2.13:
tangents and second derivatives at the points where a gradient formula special-cases its
inputs. References are analytic float64 values (or finite differences)."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.autograd.forward_ad as fwAD

D = fiamma.float64


def _tangent(f, primals, tangents):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        return fwAD.unpack_dual(f(*duals)).tangent


def test_xlogy_tangent_at_zero_y_is_infinite():
    # d/dx xlogy(x, y) = log(y): -inf at y == 0 for x != 0 (0 where x == 0, PyTorch's rule).
    x = fiamma.tensor([0.5, -1.5, 2.0, 0.0], dtype=D)
    y = fiamma.tensor([0.0, 0.0, 3.0, 0.0], dtype=D)
    t = fiamma.tensor([1.0, 2.0, 1.0, 1.0], dtype=D)
    tan = _tangent(lambda a: fiamma.special.xlogy(a, y), [x], [t]).numpy()
    np.testing.assert_array_equal(tan[:2], [-math.inf, -math.inf])
    np.testing.assert_allclose(tan[2], math.log(3.0))
    # xlog1py likewise at y == -1
    tan = _tangent(lambda a: fiamma.special.xlog1py(a, y - 1), [x], [t]).numpy()
    np.testing.assert_array_equal(tan[:2], [-math.inf, -math.inf])
    np.testing.assert_allclose(tan[2], math.log(3.0))


def test_logit_tangent_outside_unit_interval_is_nan():
    x = fiamma.tensor([0.3, 1.2, -0.5], dtype=D)
    t = fiamma.ones(3, dtype=D)
    tan = _tangent(fiamma.logit, [x], [t]).numpy()
    np.testing.assert_allclose(tan[0], 1 / (0.3 * 0.7))
    assert np.isnan(tan[1:]).all()
    # with eps the gradient (and tangent) is 0 outside [eps, 1 - eps]
    tan = _tangent(lambda a: fiamma.logit(a, 0.1), [x], [t]).numpy()
    np.testing.assert_allclose(tan, [1 / (0.3 * 0.7), 0.0, 0.0])


def test_quantile_gradient_wrt_q_tensor():
    # linear interpolation between the sorted neighbours: d/dq = (hi - lo) * (n - 1); the
    # result's graph keeps q (it used to be read as Python floats: zero gradient)
    g = fiamma.Generator().manual_seed(3)
    x = fiamma.randn(3, 5, generator=g, dtype=D)
    q0 = np.array([0.3, 0.85])
    for fn, dim in ((fiamma.quantile, 1), (fiamma.nanquantile, None)):
        q = fiamma.tensor(q0, dtype=D, requires_grad=True)
        w = fiamma.randn(*fn(x, q.detach(), dim=dim).shape, generator=g, dtype=D)
        (gq,) = fiamma.autograd.grad((fn(x, q, dim=dim) * w).sum(), q)
        eps = 1e-6
        for i in range(2):
            d = np.zeros(2)
            d[i] = eps
            hi = (fn(x, fiamma.tensor(q0 + d, dtype=D), dim=dim) * w).sum().item()
            lo = (fn(x, fiamma.tensor(q0 - d, dtype=D), dim=dim) * w).sum().item()
            np.testing.assert_allclose(gq[i].item(), (hi - lo) / (2 * eps), rtol=1e-6, atol=1e-8)
            assert gq[i].item() != 0.0
        # second order: the result is piecewise linear in q
        q = fiamma.tensor(q0, dtype=D, requires_grad=True)
        (gq,) = fiamma.autograd.grad(fn(x, q, dim=dim).sum(), q, create_graph=True)
        assert not gq.requires_grad or not fiamma.autograd.grad(
            gq.sum(), q, allow_unused=True)[0].abs().sum().item()


def _raises(fn, *words):
    with pytest.raises(RuntimeError) as e:
        fn()
    for w in words:
        assert w in str(e.value)


def test_functional_strict_mode_raises_on_independence():
    from fiamma.autograd import functional as AF

    x = fiamma.tensor([1.0, 2.0], dtype=D)
    one = fiamma.ones(2, dtype=D)
    _raises(lambda: AF.vjp(lambda a: fiamma.ones(2, dtype=D), x, one, strict=True),
            "vjp", "output 0", "does not require gradients")
    _raises(lambda: AF.vjp(lambda a, b: a * 2, (x, x), one, strict=True), "vjp", "input 1")
    _raises(lambda: AF.jvp(lambda a, b: a * 2, (x, x), (x, x), strict=True), "jvp", "input 1")
    _raises(lambda: AF.jacobian(lambda a, b: a * 2, (x, x), strict=True), "jacobian",
            "output 0", "input 1")
    _raises(lambda: AF.jacobian(lambda a: a * 2, x, strict=True, vectorize=True),
            "strict=True and vectorize=True")
    cube = lambda a, b: (a ** 3).sum()  # noqa: E731
    _raises(lambda: AF.hessian(cube, (x, x), strict=True), "hessian", "input 1")
    _raises(lambda: AF.vhp(cube, (x, x), (x, x), strict=True), "vhp", "input 1")
    _raises(lambda: AF.hvp(cube, (x, x), (x, x), strict=True), "hvp", "input 1")
    # without strict: zeros; with strict and full dependence: the values
    j = AF.jacobian(lambda a, b: a * 2, (x, x))
    assert j[1].abs().sum().item() == 0.0
    h = AF.hessian(lambda a: (a ** 3).sum(), x, strict=True)
    np.testing.assert_allclose(h.numpy(), np.diag([6.0, 12.0]))
    _, hv = AF.hvp(lambda a: (a ** 3).sum(), x, one, strict=True)
    np.testing.assert_allclose(hv.numpy(), [6.0, 12.0])


def test_functional_jvp_at_singular_point():
    # autograd.functional.jvp's double-vjp trick: d/dx xlogy(x, 0) = -inf for x != 0
    from fiamma.autograd import functional as AF

    y = fiamma.tensor([0.0, 2.0], dtype=D)
    _, t = AF.jvp(lambda a: fiamma.special.xlogy(a, y), fiamma.tensor([1.0, 1.0], dtype=D),
                  fiamma.ones(2, dtype=D))
    assert t[0].item() == -math.inf
    np.testing.assert_allclose(t[1].item(), math.log(2.0))


def test_inplace_op_on_a_dual_keeps_its_tangent():
    # make_dual's result is a view of the primal; an in-place op on it (primal without
    # history) must not route its old value's tangent to the history-less base
    x = fiamma.tensor([1.0, -2.0, 0.5], dtype=D)
    t = fiamma.tensor([1.0, 2.0, 3.0], dtype=D)
    with fwAD.dual_level():
        d = fwAD.make_dual(x.clone(), t)
        d.mul_(3.0)
        np.testing.assert_allclose(fwAD.unpack_dual(d).tangent.numpy(), [3.0, 6.0, 9.0])
        d.sin_()
        np.testing.assert_allclose(fwAD.unpack_dual(d).tangent.numpy(),
                                   np.cos(3 * x.numpy()) * 3 * t.numpy())
        assert d._base is not None  # still a view of the primal's storage


def test_inplace_on_custom_function_output_view():
    # the same rule in reverse mode: a Function's output that is a view of an input without
    # history, modified in place, keeps the Function in its history
    class V(fiamma.autograd.Function):
        @staticmethod
        def forward(ctx, p, w):
            return p.view_as(p)

        @staticmethod
        def backward(ctx, g):
            return g, g.sum(0)

    p = fiamma.ones(2, 3, dtype=D)
    w = fiamma.ones(3, dtype=D, requires_grad=True)
    v = V.apply(p, w)
    v.mul_(2.0)
    (gw,) = fiamma.autograd.grad(v.sum(), w)
    np.testing.assert_allclose(gw.numpy(), [4.0, 4.0, 4.0])


@pytest.mark.parity
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sample_double_backward_through_grid_parity(mode, pad):
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("fiamma.nn.functional")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 4, 5))
    g = rng.standard_normal((2, 3, 2, 2)) * 1.3
    w, v, u = (rng.standard_normal(s) for s in ((2, 2, 3, 2), g.shape, x.shape))
    res = []
    for lib, fn in ((torch, torch.nn.functional.grid_sample), (fiamma, F.grid_sample)):
        a = lib.from_numpy(x.copy()).requires_grad_()
        gr = lib.from_numpy(g.copy()).requires_grad_()
        o = fn(a, gr, mode=mode, padding_mode=pad, align_corners=False)
        ga, gg = lib.autograd.grad((o * lib.from_numpy(w)).sum(), [a, gr], create_graph=True)
        s = (gg * lib.from_numpy(v)).sum() + (ga * lib.from_numpy(u)).sum()
        res.append([np.array(t.tolist()) for t in lib.autograd.grad(s, [a, gr])])
    for p, q in zip(*res):
        np.testing.assert_allclose(q, p, rtol=1e-9, atol=1e-10)


def test_functional_argument_checks():
    from fiamma.autograd import functional as AF

    x = fiamma.tensor([1.0, 2.0], dtype=D)
    cube = lambda a: (a ** 3).sum()  # noqa: E731
    with pytest.raises(ValueError, match="jacobian.*strategy.*'sideways'"):
        AF.jacobian(fiamma.sin, x, strategy="sideways")
    with pytest.raises(ValueError, match="hessian.*strategy"):
        AF.hessian(cube, x, outer_jacobian_strategy="x")
    # v=None needs a one-element input (it used to take ones silently)
    with pytest.raises(RuntimeError, match="vhp: v can only be None"):
        AF.vhp(cube, x)
    with pytest.raises(RuntimeError, match="hvp: the function given to hvp should return"):
        AF.hvp(fiamma.sin, x, x)
    with pytest.raises(TypeError, match="jvp: the outputs must be a Tensor"):
        AF.jvp(lambda a: 3.0, x, x)
    _, r = AF.vhp(cube, x[:1])
    np.testing.assert_allclose(r.numpy(), [6.0])
    j = AF.jacobian(fiamma.sin, x, strategy="forward-mode", vectorize=True)
    np.testing.assert_allclose(j.numpy(), np.diag(np.cos([1.0, 2.0])))
