"""vmap's batched path (one call of the function on tensors carrying the mapped dims) against
the per-element loop it falls back to: the same numbers (float32 rounding), and the cases
without a batching rule fall back (counted in ``_vmap.STATS``) with the loop's results."""

import pytest

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma.func import (
    _vmap,
    functional_call,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    stack_module_state,
    vjp,
    vmap,
)


def _loop(fn):
    _vmap._BATCHED[0] = False
    try:
        return fn()
    finally:
        _vmap._BATCHED[0] = True


def _close(a, b, rtol=1e-5, atol=1e-6):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k], rtol, atol)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, rtol, atol)
    else:
        assert isinstance(a, fiamma.Tensor), type(a)
        assert a.shape == b.shape, (a.shape, b.shape)
        assert a.dtype == b.dtype
        assert fiamma.allclose(a, b, rtol=rtol, atol=atol), (a - b).abs().max()


def check(fn, batched=True, **tol):
    """``fn()`` (which calls vmap) on the batched path and with the loop: same results; the
    batched path ran (or, ``batched=False``, fell back)."""
    b0, f0 = _vmap.STATS["batched"], _vmap.STATS["fallback"]
    fiamma.manual_seed(123)  # inputs drawn inside ``fn`` are the same on both runs
    got = fn()
    if batched:
        assert _vmap.STATS["fallback"] == f0, _vmap.STATS["last_fallback"]
        assert _vmap.STATS["batched"] > b0
    else:
        assert _vmap.STATS["fallback"] > f0
    fiamma.manual_seed(123)
    _close(got, _loop(fn), **tol)
    return got


@pytest.fixture(autouse=True)
def _seed():
    fiamma.manual_seed(0)


def r(*shape):
    return fiamma.randn(*shape)


# ---- rules, op by op --------------------------------------------------------------------------

def test_elementwise_broadcasting_against_higher_rank_unbatched():
    x, y = r(5, 3), r(2, 3)
    check(lambda: vmap(lambda a, b: (a * b + 1).tanh() - b.exp() / 2, in_dims=(0, None))(x, y))
    check(lambda: vmap(lambda a: fiamma.where(a > 0, a, a.sigmoid()).clamp(-0.5, 2))(x))
    check(lambda: vmap(lambda a, b: fiamma.maximum(a, b) ** 2, in_dims=(1, 0))(r(3, 4), r(4, 3)))
    check(lambda: vmap(lambda a: 2 - a, in_dims=0)(x))
    check(lambda: vmap(lambda a: F.gelu(F.leaky_relu(a, 0.1)) + F.silu(a))(x))


def test_matrix_products():
    A, v, B = r(4, 3, 5), r(4, 5), r(5, 2)
    check(lambda: vmap(fiamma.mv)(A, v))
    check(lambda: vmap(fiamma.dot)(v, r(4, 5)))
    check(lambda: vmap(fiamma.mm, in_dims=(0, None))(A, B))
    check(lambda: vmap(fiamma.mm, in_dims=(None, 0))(r(3, 5), r(4, 5, 2)))
    check(lambda: vmap(fiamma.matmul, in_dims=(0, None))(v, B))
    check(lambda: vmap(lambda a, b: a @ b, in_dims=(None, 0))(r(2, 3, 5), r(4, 5)))
    check(lambda: vmap(lambda a, b: b @ a)(A, r(4, 3)))
    check(lambda: vmap(fiamma.bmm)(r(4, 2, 3, 5), r(4, 2, 5, 1)))
    check(lambda: vmap(lambda x, w, b: F.linear(x, w, b), in_dims=(0, None, None))(
        r(6, 5), r(3, 5), r(3)))
    check(lambda: vmap(F.linear)(r(6, 2, 5), r(6, 3, 5), r(6, 3)))  # batched weights
    check(lambda: vmap(lambda a, b: fiamma.einsum("ij,jk->ik", a, b), in_dims=(0, None))(A, B))
    check(lambda: vmap(lambda a: fiamma.einsum("...i,...i->...", a, a))(A))


def test_reductions_and_dim_ops():
    x = r(4, 3, 5)
    check(lambda: vmap(lambda a: a.sum())(x))
    check(lambda: vmap(lambda a: a.sum(1) + a.mean(-1, keepdim=True).squeeze(-1))(x))
    check(lambda: vmap(lambda a: fiamma.softmax(a, 1) + F.log_softmax(a, dim=0))(x))
    check(lambda: vmap(lambda a: a.max() + a.amax(dim=(0, 1)) + a.logsumexp(1).sum())(x))
    check(lambda: vmap(lambda a: a.max(dim=1).values + a.norm(2, dim=0)[:3])(x))
    check(lambda: vmap(lambda a: a.var(0) + a.std(dim=0))(x))
    check(lambda: vmap(lambda a: a.cumsum(1).argmax(1).float())(x))


def test_views_and_indexing():
    x = r(4, 3, 6)
    check(lambda: vmap(lambda a: a.reshape(-1, 2).t())(x))
    check(lambda: vmap(lambda a: a.view(18)[2:7])(x))
    check(lambda: vmap(lambda a: a.flatten() + a.permute(1, 0).reshape(-1))(x))
    check(lambda: vmap(lambda a: a.transpose(0, 1).unsqueeze(0).squeeze())(x))
    check(lambda: vmap(lambda a: a[None, 1:, ::2] * a.T[::2, 0])(x))
    check(lambda: vmap(lambda a: a[:, fiamma.tensor([0, 2, 5])])(x))
    check(lambda: vmap(lambda a: a[1].expand(2, 6) + a.unbind(0)[0])(x))
    check(lambda: vmap(lambda a: fiamma.stack([a, a * 2], dim=-1).sum(1))(x))
    check(lambda: vmap(lambda a, b: fiamma.cat([a, b], 1), in_dims=(0, None))(x, r(3, 2)))
    check(lambda: vmap(lambda a: list(a.split(2, dim=1)))(x))
    check(lambda: vmap(lambda a: a.chunk(3, 1)[1] + a.narrow(1, 0, 2) + a.select(1, 4)[:, None])(
        x))


def test_convolution_pooling_and_losses():
    x, w, b = r(5, 2, 3, 9, 9), r(4, 3, 3, 3), r(4)
    check(lambda: vmap(lambda i: F.max_pool2d(F.conv2d(i, w, b, padding=1).relu(), 2))(x))
    check(lambda: vmap(lambda i: F.conv2d(i, w, b, stride=2))(r(5, 3, 8, 8)))  # (C, H, W)
    check(lambda: vmap(F.conv2d, in_dims=(None, 0, 0))(x[0], r(5, 4, 3, 3, 3), r(5, 4)))
    check(lambda: vmap(lambda i, k: F.conv2d(i, k, groups=3))(r(5, 2, 6, 7, 7),
                                                           r(5, 6, 2, 3, 3)))
    check(lambda: vmap(lambda i: F.adaptive_avg_pool2d(i, 1) + F.avg_pool2d(i, 9))(x))
    logits, target = r(6, 4, 10), fiamma.randint(0, 10, (6, 4))
    target[2, 1] = -100
    check(lambda: vmap(F.cross_entropy)(logits, target))
    check(lambda: vmap(lambda a, t: F.cross_entropy(a, t, reduction="sum", label_smoothing=0.1))(
        logits, target))
    check(lambda: vmap(F.cross_entropy)(logits, r(6, 4, 10).softmax(-1)))
    check(lambda: vmap(F.cross_entropy)(r(6, 10), fiamma.randint(0, 10, (6,))))
    check(lambda: vmap(lambda a, t: F.nll_loss(a.log_softmax(-1), t))(logits, target))
    check(lambda: vmap(F.mse_loss, in_dims=(0, None))(r(6, 3), r(3)))
    check(lambda: vmap(lambda a, t: F.l1_loss(a, t, reduction="none"))(r(6, 3), r(6, 3)))


def test_padding_and_inference_batch_norm():
    x = r(4, 2, 3, 5, 5)
    check(lambda: vmap(lambda a: F.pad(a, (1, 2, 0, 1), value=0.5))(x))
    check(lambda: vmap(lambda a: F.pad(a, (1, 1, 2, 2), mode="reflect"))(x))
    check(lambda: vmap(lambda a: F.pad(a, (1, 1), mode="replicate"))(r(4, 3, 6)))
    bn = nn.BatchNorm2d(3)
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2)
    bn.eval()
    check(lambda: vmap(bn)(x))
    bn.train()
    check(lambda: vmap(bn)(x), batched=False)  # batch statistics: per element
    bn.eval()


def test_in_dims_out_dims_and_structures():
    x, y = r(3, 4), r(4, 3)
    check(lambda: vmap(lambda a, b: a * b, in_dims=(1, 0), out_dims=1)(x, y))
    check(lambda: vmap(lambda d: {"s": d["a"] + d["b"], "t": (d["a"],)},
                       in_dims=({"a": 0, "b": None},))({"a": x, "b": r(4)}))
    check(lambda: vmap(lambda a, k: (a.sum(), k * 2), out_dims=(0, None))(x, k=r(2)))
    c = r(2)
    check(lambda: vmap(lambda a: c * 0 + 1)(x))  # an unbatched output is copied per element
    check(lambda: vmap(lambda a: a, out_dims=-1)(r(2, 3, 4)))


def test_nested_vmap_levels():
    x, y = r(3, 5), r(4, 5)
    got = check(lambda: vmap(vmap(fiamma.dot, (None, 0)), (0, None))(x, y))
    _close(got, x @ y.T)
    check(lambda: vmap(vmap(lambda a, b: a * b + a.sum()), in_dims=(1, 1))(r(2, 3, 4),
                                                                           r(2, 3, 4)))
    check(lambda: vmap(lambda a: vmap(lambda b: (a * b).sum())(y))(x))


# ---- transforms inside vmap --------------------------------------------------------------------

def _mlp_loss(params, x, t):
    h = F.linear(x, params["w1"], params["b1"]).tanh()
    return F.cross_entropy(F.linear(h, params["w2"], params["b2"]), t)


def test_per_sample_gradients_mlp():
    params = {"w1": r(8, 5), "b1": r(8), "w2": r(3, 8), "b2": r(3)}
    x, t = r(16, 1, 5), fiamma.randint(0, 3, (16, 1))
    got = check(lambda: vmap(grad(_mlp_loss), in_dims=(None, 0, 0))(params, x, t))
    assert got["w1"].shape == (16, 8, 5)
    # per-sample: each row is the gradient of that sample alone
    one = grad(_mlp_loss)(params, x[3], t[3])
    _close({k: v[3] for k, v in got.items()}, one)


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        x = F.max_pool2d(self.c1(x).relu(), 2)
        x = nn.functional.relu(self.c2(x))
        return self.fc(x.flatten(1))


def test_per_sample_gradients_cnn_functional_call():
    model = _CNN()
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, t):
        return F.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), t.unsqueeze(0))

    x, t = r(8, 1, 8, 8), fiamma.randint(0, 5, (8,))
    check(lambda: vmap(grad(loss), in_dims=(None, 0, 0))(params, x, t))


def test_ensemble_with_stacked_weights():
    models = [_CNN() for _ in range(3)]
    p, b = stack_module_state(models)
    base = _CNN()
    x = r(2, 1, 8, 8)
    got = check(lambda: vmap(lambda p, b, x: functional_call(base, (p, b), (x,)),
                             in_dims=(0, 0, None))(p, b, x))
    _close(got[1], models[1](x))


def test_jacobians_and_hessians_inside_vmap():
    w, b, x = r(6, 4), r(6), r(5, 4)

    def predict(w, b, x):
        return F.linear(x, w, b).tanh()

    check(lambda: vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))(w, b, x))
    check(lambda: vmap(jacrev(predict, argnums=(0, 1)), in_dims=(None, None, 0))(w, b, x))
    check(lambda: vmap(jacfwd(predict, argnums=2), in_dims=(None, None, 0))(w, b, x))
    check(lambda: vmap(hessian(predict, argnums=2), in_dims=(None, None, 0))(w, b, x))
    # the tutorial's identity: batched Jacobians of a per-row function == jacrev of the sum
    bj = vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))(w, b, x)
    summed = jacrev(lambda w, b, x: predict(w, b, x).sum(0), argnums=2)(w, b, x).movedim(1, 0)
    assert fiamma.allclose(bj, summed)


def test_vmap_of_vjp_fn_and_ntk_vector_products():
    w = r(3, 4)

    def f(p, x):
        return (x @ p.T).sin()

    _, fn = vjp(lambda x: f(w, x), r(4))
    check(lambda: vmap(fn)(fiamma.eye(3)))

    def ntk(x1, x2):
        out, vjp_fn = vjp(lambda p: f(p, x1), w)

        def slice_(vec):
            return jvp(lambda p: f(p, x2), (w,), vjp_fn(vec))[1]

        return vmap(slice_)(fiamma.eye(out.numel()))

    x1, x2 = r(2, 4), r(3, 4)
    got = check(lambda: vmap(vmap(ntk, (None, 0)), (0, None))(x1, x2))
    j1 = vmap(jacrev(f), (None, 0))(w, x1).flatten(2)
    j2 = vmap(jacrev(f), (None, 0))(w, x2).flatten(2)
    _close(got, fiamma.einsum("Naf,Mbf->NMab", j1, j2))


# ---- what falls back ---------------------------------------------------------------------------

def test_data_dependent_control_flow_item_and_inplace_fall_back():
    x = r(6, 3)
    check(lambda: vmap(lambda a: a * 2 if a.sum() > 0 else -a)(x), batched=False)
    check(lambda: vmap(lambda a: a * a[0].item())(x), batched=False)

    def inplace(a):
        b = a * 1
        b += 1
        return b.mul_(2)

    check(lambda: vmap(inplace)(x), batched=False)
    # an input mutated in place by the function is mutated once (by the loop)
    y = fiamma.zeros(4, 2)
    vmap(lambda a: a.add_(1))(y)
    assert y.tolist() == [[1.0, 1.0]] * 4


def test_ops_without_rules_fall_back():
    x = r(5, 4)
    check(lambda: vmap(lambda a: fiamma.sort(a).values)(x), batched=False)
    check(lambda: vmap(lambda a: fiamma.add(a, 1, out=fiamma.empty(4)))(x), batched=False)
    check(lambda: vmap(lambda a: F.pad(a, (1, 1)).diff())(x), batched=False)


def test_random_draws_fall_back_with_the_loops_semantics():
    x = r(4, 3)
    fiamma.manual_seed(1)
    f0 = _vmap.STATS["fallback"]
    a = vmap(lambda a: F.dropout(a, 0.5), randomness="different")(x)
    assert _vmap.STATS["fallback"] == f0 + 1
    fiamma.manual_seed(1)
    b = _loop(lambda: vmap(lambda a: F.dropout(a, 0.5), randomness="different")(x))
    assert fiamma.equal(a, b)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: a + fiamma.rand(3))(x)
    check(lambda: vmap(lambda a: F.dropout(a, 0.5, training=False))(x))


def test_errors_raised_by_the_function_are_the_loops():
    with pytest.raises(RuntimeError) as batched:
        vmap(lambda a, b: a @ b)(r(2, 3), r(2, 4))
    with pytest.raises(RuntimeError) as looped:
        _loop(lambda: vmap(lambda a, b: a @ b)(r(2, 3), r(2, 4)))
    assert str(batched.value) == str(looped.value)
    with pytest.raises(ValueError, match="must only return Tensors"):
        vmap(lambda a: 3)(r(2, 3))
    with pytest.raises(ValueError, match="can not return a BatchedTensor"):
        vmap(lambda a: a * 2, out_dims=None)(r(2, 3))


def test_rules_are_removed_after_the_call():
    before = (fiamma.add, F.linear, F.conv2d, fiamma.autograd.grad)
    w = r(2, 3)
    vmap(lambda a: F.linear(a, w).sum())(r(4, 3))
    assert (fiamma.add, F.linear, F.conv2d, fiamma.autograd.grad) == before
    from fiamma.nn.modules import conv

    assert conv._CONV_FN[2] is F.conv2d


# ---- against torch.func ------------------------------------------------------------------------

@pytest.mark.parity
def test_batched_vmap_matches_torch_func():
    torch = pytest.importorskip("torch")
    import numpy as np

    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((8, 5)), rng.standard_normal(8)
    w2, b2 = rng.standard_normal((3, 8)), rng.standard_normal(3)
    xs, ts = rng.standard_normal((10, 5)), rng.integers(0, 3, 10)

    def run(lib, func):
        P = {"w1": lib.tensor(w1), "b1": lib.tensor(b1), "w2": lib.tensor(w2),
             "b2": lib.tensor(b2)}

        def loss(p, x, t):
            h = lib.nn.functional.linear(x, p["w1"], p["b1"]).tanh()
            out = lib.nn.functional.linear(h, p["w2"], p["b2"])
            return lib.nn.functional.cross_entropy(out.unsqueeze(0), t.unsqueeze(0))

        g = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(P, lib.tensor(xs), lib.tensor(ts))
        jac = func.vmap(func.jacrev(lambda x: lib.nn.functional.linear(x, P["w1"]).sin()))(
            lib.tensor(xs))
        nested = func.vmap(func.vmap(lambda a, b: (a * b).sum(), (None, 0)), (0, None))(
            lib.tensor(xs), lib.tensor(xs[:4]))
        return [g[k] for k in sorted(g)] + [jac, nested]

    import fiamma.func as ff

    got = run(fiamma, ff)
    want = run(torch, torch.func)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


# ---- jacrev / jacfwd: the basis vectors as one batched pass -------------------------------------

@pytest.fixture
def small_basis():
    from fiamma.func import _jacobian

    old = _jacobian._MIN_BASIS[0]
    _jacobian._MIN_BASIS[0] = 2
    yield
    _jacobian._MIN_BASIS[0] = old


def check_jac(fn, batched=True):
    j0, f0 = _vmap.STATS["jac_batched"], _vmap.STATS["jac_fallback"]
    fiamma.manual_seed(123)
    got = fn()
    if batched:
        assert _vmap.STATS["jac_fallback"] == f0, _vmap.STATS["last_fallback"]
        assert _vmap.STATS["jac_batched"] > j0
    else:
        assert _vmap.STATS["jac_fallback"] > f0
    fiamma.manual_seed(123)
    _close(got, _loop(fn))
    return got


def test_jacobians_batched_over_basis_vectors(small_basis):
    w, b, x = r(6, 4), r(6), r(4)

    def predict(w, b, x):
        return F.linear(x, w, b).tanh()

    def two(x, y):
        return {"s": (x * y).sin(), "p": x.sum() * y[:2]}

    check_jac(lambda: jacrev(predict, argnums=2)(w, b, x))
    check_jac(lambda: jacrev(predict, argnums=(0, 1), chunk_size=4)(w, b, x))
    check_jac(lambda: jacfwd(predict, argnums=(0, 2))(w, b, x))
    check_jac(lambda: jacrev(two, argnums=(0, 1))(r(3), r(3)))
    check_jac(lambda: jacfwd(two, argnums=(0, 1))(r(3), r(3)))
    check_jac(lambda: hessian(lambda x: predict(w, b, x).pow(2).sum())(x))
    check_jac(lambda: vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))(w, b, r(3, 4)))
    check_jac(lambda: vmap(hessian(predict, argnums=2), in_dims=(None, None, 0))(w, b, r(3, 4)))
    # a Jacobian is exact against autograd rows
    x.requires_grad_(False)
    jr = jacrev(predict, argnums=2)(w, b, x)
    xr = x.clone().requires_grad_()
    rows = [fiamma.autograd.grad(predict(w, b, xr), xr, e)[0] for e in fiamma.eye(6)]
    _close(jr, fiamma.stack(rows))


def test_jacobians_fall_back_without_rules(small_basis):
    check_jac(lambda: jacrev(lambda x: fiamma.sort(x).values)(r(5)), batched=False)
    check_jac(lambda: jacfwd(lambda x: x * 2 if x.sum() > 0 else x)(r(5)), batched=False)


def test_modules_called_directly_and_mapped_dims_not_first():
    lin, conv = nn.Linear(3, 2), nn.Conv2d(2, 3, 3, padding=1)
    check(lambda: vmap(lin)(r(5, 4, 3)))
    check(lambda: vmap(conv, in_dims=1)(r(1, 5, 2, 6, 6)))
    check(lambda: vmap(lambda x: conv(x.unsqueeze(0)).squeeze(0), in_dims=3, out_dims=2)(
        r(2, 6, 6, 5)))


def test_plain_tensors_on_the_left_of_batched_ones():
    x, p = r(5, 3), r(3)
    check(lambda: vmap(lambda a: (p - a, p / (a.abs() + 1), 2 ** a, p @ a, p < a))(x))
    check(lambda: vmap(lambda a: fiamma.maximum(p, a) + fiamma.where(p > 0, a, p))(x))


def test_outer_autograd_through_the_batched_path():
    w = r(3, 4).requires_grad_()
    x = r(5, 4)

    def run():
        w.grad = None
        out = vmap(lambda a: (F.linear(a, w).tanh() ** 2).sum())(x)
        out.sum().backward()
        return out.detach(), w.grad.clone()

    check(run)


def test_jacobian_of_a_constant_and_with_aux(small_basis):
    x = r(4)
    j = check_jac(lambda: jacrev(lambda a: fiamma.ones(3) + 0 * a[:3])(x))
    assert not j.any()
    got, aux = jacrev(lambda a: (a.sin(), a.sum()), has_aux=True)(x)
    _close(got, fiamma.diag(x.cos()))
    _close(aux, x.sum())
