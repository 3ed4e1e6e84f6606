"""Transforms: inverse round trips, log_abs_det_jacobian against the log-determinant of the
autograd Jacobian, domains/codomains, shapes, caching, composition; constraint_registry maps
unconstrained reals into each constraint."""

import math

import numpy as np
import pytest

import fiamma
import fiamma.distributions as D
from fiamma.distributions import biject_to, constraints, transform_to, transforms as Tr

F64 = fiamma.float64


def T(v):
    return fiamma.tensor(v, dtype=F64)


# name -> (transform, an input in its domain with event dims last)
ELEMENTWISE = {
    "Exp": (Tr.ExpTransform(), T([-1.0, 0.3, 2.0])),
    "Sigmoid": (Tr.SigmoidTransform(), T([-3.0, 0.3, 2.0])),
    "Tanh": (Tr.TanhTransform(), T([-3.0, 0.3, 2.0])),
    "Softplus": (Tr.SoftplusTransform(), T([-3.0, 0.3, 2.0])),
    "Affine": (Tr.AffineTransform(T([1.0, -2.0, 0.5]), T([2.0, -0.5, 3.0])), T([-1.0, 0.3, 2.0])),
    "Affine_scalar": (Tr.AffineTransform(1.0, -2.0), T([-1.0, 0.3, 2.0])),
    "Power": (Tr.PowerTransform(T(2.5)), T([0.5, 1.3, 2.0])),
    "Power_negative": (Tr.PowerTransform(T(-1.0)), T([0.5, 1.3, 2.0])),
    "Compose": (Tr.ComposeTransform([Tr.AffineTransform(0.5, 2.0), Tr.ExpTransform()]),
                T([-1.0, 0.3, 2.0])),
    "Inverse_exp": (Tr.ExpTransform().inv, T([0.5, 1.3, 2.0])),
}


def _jacobian(f, x):
    """The Jacobian of f at x (flattened event) by autograd, row by row."""
    x = x.detach().requires_grad_()
    y = f(x).reshape(-1)
    rows = []
    for i in range(y.numel()):
        (g,) = fiamma.autograd.grad(y[i], x, retain_graph=True, allow_unused=True)
        rows.append((g if g is not None else fiamma.zeros_like(x)).reshape(-1))
    return fiamma.stack(rows).numpy()


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_round_trip_and_log_det(name):
    t, x = ELEMENTWISE[name]
    y = t(x)
    assert bool(t.codomain.check(y).all())
    np.testing.assert_allclose(t.inv(y).numpy(), x.numpy(), rtol=1e-10)
    ladj = t.log_abs_det_jacobian(x, y).numpy()
    J = _jacobian(t, x)
    np.testing.assert_allclose(ladj, np.log(np.abs(np.diag(J))), rtol=1e-8, atol=1e-12)
    assert t.bijective


# name -> (transform, input with the event dims last, has log_abs_det_jacobian)
VECTOR = {
    "StickBreaking": (Tr.StickBreakingTransform(), T([-0.5, 0.3, 1.2]), True),
    "CorrCholesky": (Tr.CorrCholeskyTransform(), T([-0.5, 0.3, 1.2]), True),
    "LowerCholesky": (Tr.LowerCholeskyTransform(), T([[0.5, 0.0], [0.3, -0.2]]), False),
    "PositiveDefinite": (Tr.PositiveDefiniteTransform(), T([[0.5, 0.0], [0.3, -0.2]]), False),
    "Softmax": (Tr.SoftmaxTransform(), T([-0.5, 0.3, 1.2]), False),
    "Reshape": (Tr.ReshapeTransform((2, 3), (3, 2)), T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
                True),
    "Independent": (Tr.IndependentTransform(Tr.ExpTransform(), 1), T([0.1, 0.2, -0.3]), True),
}


@pytest.mark.parametrize("name", sorted(VECTOR))
def test_vector_transforms(name):
    t, x, has_ladj = VECTOR[name]
    y = t(x)
    assert tuple(y.shape) == tuple(t.forward_shape(x.shape))
    assert tuple(t.inverse_shape(y.shape)) == tuple(x.shape)
    assert bool(t.codomain.check(y).all())
    if name != "Softmax":
        np.testing.assert_allclose(t.inv(y).numpy(), x.numpy(), rtol=1e-9, atol=1e-12)
    else:  # softmax's inverse is log: equal up to an additive constant
        d = t.inv(y).numpy() - x.numpy()
        np.testing.assert_allclose(d, d[0], atol=1e-12)
    if not has_ladj:
        return
    ladj = t.log_abs_det_jacobian(x, y).item()
    J = _jacobian(t, x)
    if name == "StickBreaking":       # K - 1 -> K: use the first K - 1 outputs
        J = J[:-1]
    elif name == "CorrCholesky":      # 3 -> 3 x 3: the strict lower part carries the map
        J = J[[3, 6, 7]]
    sign, logdet = np.linalg.slogdet(J)
    assert ladj == pytest.approx(logdet, rel=1e-8, abs=1e-10)


def test_cat_and_stack_transforms():
    cat = Tr.CatTransform([Tr.ExpTransform(), Tr.AffineTransform(1.0, 3.0)], dim=0,
                          lengths=[2, 1])
    x = T([0.5, -1.0, 2.0])
    y = cat(x)
    np.testing.assert_allclose(y.numpy(), [math.exp(0.5), math.exp(-1.0), 7.0])
    np.testing.assert_allclose(cat.inv(y).numpy(), x.numpy())
    np.testing.assert_allclose(cat.log_abs_det_jacobian(x, y).numpy(),
                               [0.5, -1.0, math.log(3.0)])
    st = Tr.StackTransform([Tr.ExpTransform(), Tr.AffineTransform(1.0, 3.0)], dim=1)
    x2 = T([[0.5, 2.0], [-1.0, 0.0]])
    y2 = st(x2)
    np.testing.assert_allclose(y2.numpy(), [[math.exp(0.5), 7.0], [math.exp(-1.0), 1.0]])
    np.testing.assert_allclose(st.inv(y2).numpy(), x2.numpy())
    np.testing.assert_allclose(st.log_abs_det_jacobian(x2, y2).numpy(),
                               [[0.5, math.log(3)], [-1.0, math.log(3)]])
    with pytest.raises(ValueError, match="expected size 3"):
        cat(T([1.0, 2.0]))


def test_cache_and_inverse_identity():
    t = Tr.ExpTransform(cache_size=1)
    x = T([0.1, 0.2])
    y = t(x)
    assert t.inv(y) is x
    assert Tr.ExpTransform().inv.inv == Tr.ExpTransform()
    assert Tr.ComposeTransform([Tr.ExpTransform(), Tr.SigmoidTransform()]).inv.parts[0] == \
        Tr.SigmoidTransform().inv
    with pytest.raises(ValueError, match="cache_size"):
        Tr.ExpTransform(cache_size=2)
    assert Tr.identity_transform(x) is x


def test_transformed_distribution_change_of_variables():
    base = D.Normal(T([0.0, 1.0]), T([1.0, 0.5]))
    d = D.TransformedDistribution(base, [Tr.AffineTransform(1.0, 2.0), Tr.ExpTransform()])
    y = T([0.7, 3.0])
    x = (y.log() - 1.0) / 2.0
    ref = base.log_prob(x) - math.log(2.0) - y.log()
    np.testing.assert_allclose(d.log_prob(y).numpy(), ref.numpy(), rtol=1e-12)
    np.testing.assert_allclose(d.cdf(y).numpy(), base.cdf(x).numpy(), rtol=1e-12)
    np.testing.assert_allclose(d.icdf(d.cdf(y)).numpy(), y.numpy(), rtol=1e-10)
    dec = D.TransformedDistribution(base, [Tr.AffineTransform(0.0, -1.0)])   # decreasing
    np.testing.assert_allclose(dec.cdf(T([0.3, -0.2])).numpy(),
                               (1 - base.cdf(T([-0.3, 0.2]))).numpy(), rtol=1e-12)
    # a transform that adds an event dim turns batch dims into event dims
    sb = D.TransformedDistribution(D.Normal(fiamma.zeros(2, dtype=F64), 1.0),
                                   Tr.StickBreakingTransform())
    assert tuple(sb.batch_shape) == () and tuple(sb.event_shape) == (3,)
    with pytest.raises(ValueError, match="Transform"):
        D.TransformedDistribution(base, ["exp"])


SUPPORTS = [constraints.real, constraints.positive, constraints.nonnegative,
            constraints.greater_than(2.0), constraints.greater_than_eq(-1.0),
            constraints.less_than(3.0), constraints.unit_interval, constraints.interval(-2.0, 5.0),
            constraints.half_open_interval(0.0, 4.0), constraints.simplex,
            constraints.corr_cholesky, constraints.lower_cholesky,
            constraints.positive_definite, constraints.independent(constraints.positive, 1),
            constraints.cat([constraints.positive, constraints.real], -1, [2, 1])]


@pytest.mark.parametrize("c", SUPPORTS, ids=[repr(c) for c in SUPPORTS])
@pytest.mark.parametrize("registry", [biject_to, transform_to], ids=["biject_to", "transform_to"])
def test_constraint_registry_maps_reals_into_the_constraint(c, registry):
    try:
        t = registry(c)
    except NotImplementedError:
        assert registry is biject_to and c in (constraints.lower_cholesky,
                                                constraints.positive_definite)
        return
    fiamma.manual_seed(0)
    if c.event_dim == 2:
        x = fiamma.randn(5, 3, 3, dtype=F64)
    elif c is constraints.corr_cholesky:
        x = fiamma.randn(5, 3, dtype=F64)
    else:
        x = fiamma.randn(5, 3, dtype=F64) * 3
    y = t(x)
    assert bool(c.check(y).all()), c
    if registry is biject_to:
        assert t.bijective
        np.testing.assert_allclose(t(t.inv(y)).numpy(), y.numpy(), rtol=1e-8, atol=1e-10)


def test_registry_register_and_errors():
    class MyConstraint(constraints.Constraint):
        pass

    with pytest.raises(NotImplementedError, match="MyConstraint"):
        transform_to(MyConstraint())
    transform_to.register(MyConstraint, lambda c: Tr.ExpTransform())
    assert isinstance(transform_to(MyConstraint()), Tr.ExpTransform)
    with pytest.raises(TypeError, match="Constraint"):
        transform_to.register(int, lambda c: None)
