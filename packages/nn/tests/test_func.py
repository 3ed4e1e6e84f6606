"""fiamma.func: vmap, grad, vjp, jvp, jacrev, jacfwd, hessian against float64 numerical
derivatives, hand-derived results and per-element loops; PyTorch's errors."""

import numpy as np
import pytest

import fiamma
import fiamma.nn as nn
from fiamma.func import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap

D = fiamma.float64


def t(a, **kw):
    return fiamma.tensor(np.asarray(a, dtype=np.float64), **kw)


def rnd(*shape, seed=0):
    return t(np.random.default_rng(seed).standard_normal(shape))


def num_jac(f, xs, j, eps=1e-6):
    """Central-difference Jacobian of f(*xs) (one tensor) w.r.t. xs[j]: out.shape + x.shape."""
    x = xs[j].numpy().astype(np.float64)
    out0 = f(*xs).numpy()
    jac = np.zeros(out0.shape + x.shape)
    for idx in np.ndindex(x.shape):
        for sign in (1, -1):
            xp = x.copy()
            xp[idx] += sign * eps
            args = list(xs)
            args[j] = t(xp)
            jac[(...,) + idx] += sign * f(*args).numpy() / (2 * eps)
    return jac


def f_two(x, y):
    return (x.sin() * y.unsqueeze(-1)).exp().sum(0)


# ---- vmap -----------------------------------------------------------------------------------

def test_vmap_matches_loop_in_dims_out_dims():
    x, y = rnd(3, 4), rnd(4, 5, seed=1)
    got = vmap(fiamma.mv, in_dims=(None, 1))(x, y)          # maps y's columns
    want = np.stack([x.numpy() @ y.numpy()[:, i] for i in range(5)])
    np.testing.assert_allclose(got.numpy(), want)
    got = vmap(fiamma.mv, in_dims=(None, -1), out_dims=1)(x, y)
    np.testing.assert_allclose(got.numpy(), want.T)
    assert vmap(lambda a: a.sum(), in_dims=-1)(x).shape == (4,)


def test_vmap_pytrees_kwargs_and_out_dims_structure():
    x = rnd(3, 4)

    def f(d, scale=1.0):
        return {"s": d["a"].sum() * scale, "p": d["a"] + d["b"]}, [d["b"]]

    out, (b,) = vmap(f, in_dims=({"a": 0, "b": None},), out_dims=({"s": 0, "p": 1}, None))(
        {"a": x, "b": fiamma.ones(4, dtype=D)}, scale=2.0)
    np.testing.assert_allclose(out["s"].numpy(), 2 * x.numpy().sum(1))
    np.testing.assert_allclose(out["p"].numpy(), (x.numpy() + 1).T)
    assert b.shape == (4,)
    # an int prefix applies to a whole subtree; lists are mapped too
    got = vmap(lambda pair: pair[0] * pair[1])([x, x])
    np.testing.assert_allclose(got.numpy(), x.numpy() ** 2)
    # out_dims=(0,) for a single output, as PyTorch allows
    assert vmap(lambda a: a, out_dims=(0,))(x).shape == (3, 4)


def test_vmap_nested_is_outer_product():
    a, b = rnd(3), rnd(5, seed=1)
    got = vmap(vmap(fiamma.mul, in_dims=(None, 0)), in_dims=(0, None))(a, b)
    np.testing.assert_allclose(got.numpy(), np.outer(a.numpy(), b.numpy()))


def test_vmap_empty_batch():
    got = vmap(lambda a: a.sum(0) * 2, out_dims=1)(fiamma.zeros(0, 3, 2))
    assert got.shape == (2, 0)


def test_vmap_errors():
    x, y = rnd(3, 4), rnd(5, 4)
    with pytest.raises(ValueError, match=r"same size in the mapped dimension, got sizes \[3, 5\]"):
        vmap(fiamma.add)(x, y)
    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        vmap(fiamma.sum, in_dims=2)(x)
    with pytest.raises(ValueError, match="in_dim must be either an integer dimension or None"):
        vmap(fiamma.add, in_dims=(0.5, 0))(x, x)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        vmap(lambda a, b: a * b, in_dims=(0, 0))(x, 2.0)
    with pytest.raises(ValueError, match="expected `in_dims` to be int or a"):
        vmap(fiamma.add, in_dims=[0, 0])(x, x)
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure"):
        vmap(fiamma.add, in_dims=(0,))(x, x)
    with pytest.raises(ValueError, match="at least one Tensor to vmap over"):
        vmap(fiamma.add, in_dims=(None, None))(x, x)
    with pytest.raises(ValueError, match="got no inputs"):
        vmap(lambda: fiamma.ones(2))()
    with pytest.raises(ValueError, match="must only return Tensors"):
        vmap(lambda a: 1.0)(x)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        vmap(lambda a: a * 2, out_dims=None)(x)
    assert vmap(lambda a: fiamma.ones(2), out_dims=None)(x).shape == (2,)
    with pytest.raises(IndexError, match="Dimension out of range"):
        vmap(lambda a: a, out_dims=2)(x)
    with pytest.raises(ValueError, match="out_dims is not compatible"):
        vmap(lambda a: (a, a), out_dims=(0, 0, 0))(x)
    with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
        vmap(lambda a: a, chunk_size=0)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(lambda a: a, randomness="foo")
    with pytest.raises(RuntimeError, match="returned tensors of shapes"):
        vmap(lambda a: a[: int(a[0].item()) + 1])(fiamma.tensor([[0.0, 1.0], [1.0, 1.0]]))


def test_vmap_randomness_modes():
    x = fiamma.zeros(3, 4)
    fiamma.manual_seed(5)
    before = fiamma.random.get_rng_state()
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: a + fiamma.rand(4))(x)
    assert bool((fiamma.random.get_rng_state() == before).all())  # the draw was undone
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: nn.functional.dropout(a + 1, 0.5))(x)

    fiamma.manual_seed(5)
    same = vmap(lambda a: a + fiamma.rand(4), randomness="same")(x)
    after_same = fiamma.rand(2)
    fiamma.manual_seed(5)
    one = fiamma.rand(4)
    np.testing.assert_array_equal(same.numpy(), np.stack([one.numpy()] * 3))
    np.testing.assert_array_equal(after_same.numpy(), fiamma.rand(2).numpy())  # advanced once

    fiamma.manual_seed(5)
    diff = vmap(lambda a: a + fiamma.rand(4), randomness="different")(x)
    fiamma.manual_seed(5)
    want = np.stack([fiamma.rand(4).numpy() for _ in range(3)])
    np.testing.assert_array_equal(diff.numpy(), want)
    assert len({tuple(r) for r in diff.numpy().tolist()}) == 3
    # dropout with 'same': one mask for every element
    drop = vmap(lambda a: nn.functional.dropout(a + 1, 0.5), randomness="same")
    masks = drop(fiamma.zeros(4, 50))
    assert all(bool((masks[i] == masks[0]).all()) for i in range(4))


# ---- grad and friends -------------------------------------------------------------------------

def test_grad_matches_numerical_with_argnums_and_pytrees():
    x, y = rnd(3, 2), rnd(3, seed=1)

    def f(x, y):
        return f_two(x, y).sum()

    gx = grad(f)(x, y)
    np.testing.assert_allclose(gx.numpy(), num_jac(f, [x, y], 0), rtol=1e-6, atol=1e-8)
    gx2, gy = grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx2.numpy(), gx.numpy())
    np.testing.assert_allclose(gy.numpy(), num_jac(f, [x, y], 1), rtol=1e-6, atol=1e-8)
    gy_neg = grad(f, argnums=-1)(x, y)
    np.testing.assert_allclose(gy_neg.numpy(), gy.numpy())

    def g(p, bias):
        return ((p["w"] @ p["v"][0]).tanh() + bias).sum()

    p = {"w": rnd(2, 3), "v": [rnd(3, seed=2)]}
    gp = grad(g)(p, 1.5)
    assert set(gp) == {"w", "v"} and isinstance(gp["v"], list)
    w, v = p["w"].numpy(), p["v"][0].numpy()
    s = 1 - np.tanh(w @ v) ** 2
    np.testing.assert_allclose(gp["w"].numpy(), np.outer(s, v))
    np.testing.assert_allclose(gp["v"][0].numpy(), w.T @ s)
    assert not gp["w"].requires_grad


def test_grad_has_aux_value_unused_and_constant():
    x = rnd(4)
    g, aux = grad(lambda a: ((a ** 2).sum(), {"m": a.mean()}), has_aux=True)(x)
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy())
    assert aux["m"].item() == pytest.approx(x.numpy().mean())
    (g1, g2), (value, aux) = grad_and_value(lambda a, b: (a.sum() * 3, b), argnums=(0, 1),
                                            has_aux=True)(x, x)
    np.testing.assert_allclose(g1.numpy(), 3.0)
    np.testing.assert_allclose(g2.numpy(), 0.0)  # unused input: zeros
    assert value.item() == pytest.approx(3 * x.numpy().sum())
    np.testing.assert_allclose(grad(lambda a: fiamma.tensor(1.0))(x).numpy(), 0.0)


def test_grad_nested_and_under_no_grad():
    x = t(2.0)
    assert grad(grad(lambda a: a ** 3))(x).item() == pytest.approx(12.0)
    assert grad(grad(grad(lambda a: a ** 3)))(x).item() == pytest.approx(6.0)
    with fiamma.no_grad():
        assert grad(grad(lambda a: a.sin()))(x).item() == pytest.approx(-np.sin(2.0))


def test_grad_composes_with_outer_autograd():
    # a captured tensor that requires grad: the gradient is differentiable w.r.t. it
    w = t([1.0, 2.0, 3.0], requires_grad=True)
    x = t([0.5, -1.0, 2.0])
    g = grad(lambda a: ((a * w) ** 2).sum())(x)       # 2 a w^2
    assert g.requires_grad
    g.sum().backward()                                 # d/dw sum(2 a w^2) = 4 a w
    np.testing.assert_allclose(w.grad.numpy(), 4 * x.numpy() * w.detach().numpy())
    # an input that requires grad: d/dx of grad_x f, through ordinary backward
    xr = x.clone().requires_grad_(True)
    g = grad(lambda a: (a ** 3).sum())(xr)             # 3 x^2
    g.sum().backward()
    np.testing.assert_allclose(xr.grad.numpy(), 6 * x.numpy())


def test_grad_errors():
    x = rnd(3)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, "
                                           "got tensor with 1 dims"):
        grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="to return a Tensor, got <class 'float'>"):
        grad(lambda a: 1.0)(x)
    with pytest.raises(RuntimeError, match="Got argnum=1, but only 1 positional inputs"):
        grad(lambda a: a.sum(), argnums=1)(x)
    with pytest.raises(RuntimeError, match="argnums must be non-empty"):
        grad(lambda a: a.sum(), argnums=())(x)
    with pytest.raises(RuntimeError, match="argnums elements must be unique"):
        grad(lambda a, b: a.sum(), argnums=(0, 0))(x, x)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        grad(lambda a: a.sum(), argnums="0")(x)
    with pytest.raises(ValueError, match="Thing passed to transform API must be Tensor"):
        grad(lambda a: a.sum())(2.0)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype"):
        grad(lambda a: a.sum())(fiamma.ones(2, dtype=fiamma.int64))
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        grad(lambda a: a.sum(), has_aux=True)(x)


def test_vmap_grad_is_per_sample_loop_and_grad_of_vmap():
    w, xs = rnd(3), rnd(5, 3, seed=1)

    def loss(w, x):
        return (w * x).sum().tanh() ** 2

    per = vmap(grad(loss), in_dims=(None, 0))(w, xs)
    for i in range(5):
        np.testing.assert_allclose(per[i].numpy(), grad(loss)(w, xs[i]).numpy())
    total = grad(lambda w: vmap(loss, in_dims=(None, 0))(w, xs).sum())(w)
    np.testing.assert_allclose(total.numpy(), per.numpy().sum(0), rtol=1e-12)


# ---- vjp, jvp, linearize ------------------------------------------------------------------------

def test_vjp_against_numerical_and_reuse():
    x, y = rnd(3, 2), rnd(3, seed=1)
    out, fn = vjp(f_two, x, y)
    ct = rnd(*out.shape, seed=3)
    gx, gy = fn(ct)
    jx, jy = num_jac(f_two, [x, y], 0), num_jac(f_two, [x, y], 1)
    np.testing.assert_allclose(gx.numpy(), np.tensordot(ct.numpy(), jx, 1), rtol=1e-6)
    np.testing.assert_allclose(gy.numpy(), np.tensordot(ct.numpy(), jy, 1), rtol=1e-6)
    gx2, _ = fn(ct * 2)                                # callable again
    np.testing.assert_allclose(gx2.numpy(), 2 * gx.numpy())
    assert isinstance(fn(ct), tuple) and not out.requires_grad
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn(fiamma.ones(5, dtype=D))
    with pytest.raises(RuntimeError, match="Expected pytree structure of cotangents"):
        fn((ct,))
    out, fn, aux = vjp(lambda a: (a * 2, a.sum()), x, has_aux=True)
    assert aux.item() == pytest.approx(x.numpy().sum())
    with pytest.raises(RuntimeError, match="expected f\\(\\*primals\\) to return only tensors"):
        vjp(lambda a: 1.0, x)


def test_jvp_against_numerical():
    x, y = rnd(3, 2), rnd(3, seed=1)
    tx, ty = rnd(3, 2, seed=4), rnd(3, seed=5)
    out, tout = jvp(f_two, (x, y), (tx, ty))
    want = (np.tensordot(num_jac(f_two, [x, y], 0), tx.numpy(), 2)
            + np.tensordot(num_jac(f_two, [x, y], 1), ty.numpy(), 1))
    np.testing.assert_allclose(tout.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), f_two(x, y).numpy())
    # several outputs, one of them constant; has_aux
    (o1, o2), (t1, t2), aux = jvp(lambda a: ((a.exp(), fiamma.ones(2)), a.sum()), (x,), (tx,),
                                  has_aux=True)
    np.testing.assert_allclose(t1.numpy(), np.exp(x.numpy()) * tx.numpy())
    np.testing.assert_allclose(aux.numpy(), x.numpy().sum())
    np.testing.assert_allclose(t2.numpy(), 0.0)


def test_jvp_errors():
    x = rnd(3, 4)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        jvp(lambda a: a, x, x)
    with pytest.raises(RuntimeError, match="same python structure"):
        jvp(lambda a: a, (x,), [x])
    with pytest.raises(RuntimeError, match="different size than that of the original Tensor"):
        jvp(lambda a: a, (x,), (rnd(5, 4),))
    with pytest.raises(ValueError, match="Expected tangent to be floating point"):
        jvp(lambda a: a, (x,), (fiamma.ones(3, 4, dtype=fiamma.int64),))
    with pytest.raises(RuntimeError, match="expected f\\(\\*primals\\) to return only tensors"):
        jvp(lambda a: 1.0, (x,), (x,))
    with pytest.raises(RuntimeError, match="Expected all inputs to be real"):
        jvp(lambda a: a, (x.to(fiamma.complex128),), (x.to(fiamma.complex128),))


def test_linearize_reuses_the_graph():
    x = rnd(4)
    out, fn = linearize(lambda a: a.sin() * a, x)
    for seed in (1, 2):
        tan = rnd(4, seed=seed)
        want = (np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy())) * tan.numpy()
        np.testing.assert_allclose(fn(tan).numpy(), want, rtol=1e-12)


# ---- Jacobians and Hessians -------------------------------------------------------------------

def test_jacrev_jacfwd_against_numerical():
    x, y = rnd(3, 2), rnd(3, seed=1)
    jx, jy = num_jac(f_two, [x, y], 0), num_jac(f_two, [x, y], 1)
    for jac in (jacrev, jacfwd):
        a = jac(f_two)(x, y)
        assert a.shape == (2, 3, 2)
        np.testing.assert_allclose(a.numpy(), jx, rtol=1e-6, atol=1e-9)
        a, b = jac(f_two, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(b.numpy(), jy, rtol=1e-6, atol=1e-9)


def test_jacobian_pytree_layouts():
    x = rnd(3, 4)
    for jac in (jacrev, jacfwd):
        out = jac(lambda a: {"s": a.sum(0), "p": a})(x)
        assert out["s"].shape == (4, 3, 4) and out["p"].shape == (3, 4, 3, 4)
        np.testing.assert_allclose(out["p"].numpy().reshape(12, 12), np.eye(12))
        d = jac(lambda p: p["u"].sum(0) * p["v"])({"u": x, "v": fiamma.ones(4, dtype=D)})
        assert d["u"].shape == (4, 3, 4) and d["v"].shape == (4, 4)
        np.testing.assert_allclose(d["v"].numpy(), np.diag(x.numpy().sum(0)))
        j, aux = jac(lambda a: (a.sum(0), a * 2), has_aux=True)(x)
        np.testing.assert_allclose(aux.numpy(), 2 * x.numpy())


def test_hessian_hand_derived():
    a = rnd(3, 3)
    x = rnd(3, seed=1)
    h = hessian(lambda v: v @ a @ v)(x)                # x^T A x -> A + A^T
    np.testing.assert_allclose(h.numpy(), a.numpy() + a.numpy().T, rtol=1e-12)
    h2 = jacrev(jacrev(lambda v: v @ a @ v))(x)
    np.testing.assert_allclose(h2.numpy(), h.numpy(), rtol=1e-12)
    h3 = jacfwd(jacfwd(lambda v: v @ a @ v))(x)
    np.testing.assert_allclose(h3.numpy(), h.numpy(), rtol=1e-12)
    # sum(exp(x) * y) w.r.t. (x, y): blocks diag(exp(x) y), diag(exp(x)), diag(exp(x)), 0
    xx, yy = rnd(2, seed=2), rnd(2, seed=3)
    (hxx, hxy), (hyx, hyy) = hessian(lambda p, q: (p.exp() * q).sum(), argnums=(0, 1))(xx, yy)
    e = np.exp(xx.numpy())
    np.testing.assert_allclose(hxx.numpy(), np.diag(e * yy.numpy()), rtol=1e-12)
    np.testing.assert_allclose(hxy.numpy(), np.diag(e), rtol=1e-12)
    np.testing.assert_allclose(hyx.numpy(), np.diag(e), rtol=1e-12)
    np.testing.assert_allclose(hyy.numpy(), 0.0)


def test_vmap_of_jacobians():
    xs = rnd(4, 3)
    got = vmap(jacrev(lambda v: v.sin()))(xs)
    want = np.stack([np.diag(np.cos(r)) for r in xs.numpy()])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    got = vmap(hessian(lambda v: (v ** 3).sum()))(xs)
    np.testing.assert_allclose(got.numpy(), np.stack([np.diag(6 * r) for r in xs.numpy()]))


def test_jacobian_errors_and_randomness():
    x = rnd(3)
    with pytest.raises(RuntimeError, match="jacrev: Expected all outputs to be real"):
        jacrev(lambda a: a.to(fiamma.complex128))(x)
    with pytest.raises(RuntimeError, match="jacfwd: Expected all inputs to be real"):
        jacfwd(lambda a: a.abs())(x.to(fiamma.complex128))
    with pytest.raises(ValueError, match="jacrev: `chunk_size` should be greater than 0"):
        jacrev(lambda a: a, chunk_size=0)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        jacfwd(lambda a: a * fiamma.rand(3, dtype=D))(x)
    fiamma.manual_seed(0)
    j = jacfwd(lambda a: a * fiamma.rand(3, dtype=D), randomness="same")(x)
    fiamma.manual_seed(0)
    np.testing.assert_allclose(j.numpy(), np.diag(fiamma.rand(3, dtype=D).numpy()))
    fiamma.manual_seed(0)
    j = jacfwd(lambda a: a * fiamma.rand(3, dtype=D), randomness="different")(x)
    fiamma.manual_seed(0)
    draws = [fiamma.rand(3, dtype=D).numpy() for _ in range(3)]
    np.testing.assert_allclose(j.numpy(), np.stack([draws[k][:] * (np.arange(3) == k)
                                                    for k in range(3)], 1))


def test_top_level_vmap_and_runner_names():
    import fiamma.func as F

    assert fiamma.vmap is F.vmap and fiamma.func is F
    assert set(F.__all__) >= {"vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd",
                              "hessian", "functional_call", "stack_module_state", "linearize"}


def test_namedtuples_sizes_and_identity_functions():
    import collections

    P = collections.namedtuple("P", "a b")
    x = fiamma.arange(6.0, dtype=D).reshape(2, 3)
    r = vmap(lambda p: P(p.a * 2, p.b.sum()))(P(x, x))
    assert type(r) is P and r.a.shape == (2, 3) and r.b.shape == (2,)
    g = grad(lambda p: (p.a * p.b).sum())(P(x, x + 1))
    assert type(g) is P
    np.testing.assert_allclose(g.a.numpy(), x.numpy() + 1)
    _, n = vmap(lambda a: (a, a.shape), out_dims=(0, None))(x)  # a Size is one leaf
    assert tuple(n) == (3,)
    np.testing.assert_allclose(jvp(lambda a: a, (x,), (fiamma.ones_like(x),))[1].numpy(), 1.0)
    np.testing.assert_allclose(jacfwd(lambda a: a)(fiamma.ones(2, dtype=D)).numpy(), np.eye(2))
    np.testing.assert_allclose(jacrev(lambda a: a)(fiamma.ones(2, dtype=D)).numpy(), np.eye(2))


def test_rearrange_against_numpy():
    from fiamma.func import rearrange

    a = np.arange(2 * 6 * 4.0).reshape(2, 6, 4)
    x = fiamma.tensor(a)
    np.testing.assert_array_equal(rearrange(x, "b h w -> w b h").numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(rearrange(x, "b (h1 h) w -> (b h1) h w", h1=2).numpy(),
                                  a.reshape(2, 2, 3, 4).reshape(4, 3, 4))
    np.testing.assert_array_equal(rearrange(x, "b (h h1) w -> b h (w h1)", h1=2).numpy(),
                                  a.reshape(2, 3, 2, 4).transpose(0, 1, 3, 2).reshape(2, 3, 8))
    np.testing.assert_array_equal(rearrange(x, "b ... -> ... b").numpy(), a.transpose(1, 2, 0))
    assert rearrange(x, "b h w -> b () h w 1").shape == (2, 1, 6, 4, 1)
    assert rearrange([x, x], "n b h w -> (n b) h w").shape == (4, 6, 4)
    for bad, match in [("b h -> b h", "Number of dimensions in pattern"),
                       ("b h w -> b h", "only on one side"),
                       ("b b w -> b w", "duplicate dimension"),
                       ("b h w => b h w", "single '->'"),
                       ("b (h1 h2) w -> b h1 h2 w", "cannot infer the sizes"),
                       ("b h w -> b h w ...", "Ellipsis found in right side")]:
        with pytest.raises(ValueError, match=match):
            rearrange(x, bad)
    with pytest.raises(ValueError, match="cannot be split"):
        rearrange(x, "b (h1 h) w -> b h1 h w", h1=4)
