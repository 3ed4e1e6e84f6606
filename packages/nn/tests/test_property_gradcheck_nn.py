"""Property-based gradient checks of fiamma.nn.functional: gradcheck (float64, numerical
Jacobians) over random shapes, hyper-parameters and operand layouts (transposed, stepped, offset,
expanded) for the activations, every loss with each reduction and its weights, convolution and
pooling, the normalisations, embeddings and attention; float32 gradients against float64.
Deterministic (conftest.py); small sizes, a few examples per op, to stay fast."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma
from fiamma.autograd._gradprops import F64, LAYOUTS, check_grad, make_operand, operands, shapes
from fiamma.nn import functional as F

pytestmark = pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")

FEW = settings(max_examples=5)
SOME = settings(max_examples=8)
REDUCTIONS = ("none", "mean", "sum")


def _ints(rng, high, shape):
    return fiamma.tensor(rng.integers(0, high, shape), dtype=fiamma.int64)


# ---- activations -----------------------------------------------------------------------------

# name -> (fn, kinks inside [-2, 2])
ACTIVATIONS = {
    "relu": (F.relu, (0.0,)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), (0.0,)),
    "elu": (lambda x: F.elu(x, 1.3), (0.0,)),
    "selu": (F.selu, (0.0,)),
    "celu": (lambda x: F.celu(x, 0.7), (0.0,)),
    "gelu": (F.gelu, ()),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), ()),
    "silu": (F.silu, ()),
    "mish": (F.mish, ()),
    "softplus": (lambda x: F.softplus(x, beta=2.0, threshold=3.0), (1.5,)),
    "hardtanh": (lambda x: F.hardtanh(x, -1.0, 1.5), (-1.0, 1.5)),
    "relu6": (lambda x: F.relu6(x * 4.0), (0.0, 1.5)),
    "hardswish": (lambda x: F.hardswish(x * 2.0), (-1.5, 1.5)),
    "hardsigmoid": (lambda x: F.hardsigmoid(x * 2.0), (-1.5, 1.5)),
    "logsigmoid": (F.logsigmoid, ()),
    "softsign": (F.softsign, (0.0,)),
    "tanhshrink": (F.tanhshrink, ()),
    "softshrink": (lambda x: F.softshrink(x, 0.5), (-0.5, 0.5)),
    "hardshrink": (lambda x: F.hardshrink(x, 0.5), (-0.5, 0.5)),
    "threshold": (lambda x: F.threshold(x, 0.3, -1.0), (0.3,)),
    "rrelu_eval": (lambda x: F.rrelu(x, training=False), (0.0,)),
    "softmax": (lambda x: F.softmax(x, -1), ()),
    "log_softmax": (lambda x: F.log_softmax(x, 0), ()),
    "softmin": (lambda x: F.softmin(x, -1), ()),
    "normalize": (lambda x: F.normalize(x, p=2.0, dim=-1), ()),
    "normalize_p1": (lambda x: F.normalize(x, p=1.0, dim=0), (0.0,)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@FEW
@given(data=st.data(), shape=shapes(1, 3, 1, 3))
def test_activations(name, data, shape):
    fn, kinks = ACTIVATIONS[name]
    check_grad(fn, data.draw(operands([shape], away=kinks)))


@FEW
@given(data=st.data(), shape=shapes(2, 4, 1, 3), channels=st.booleans())
def test_prelu_and_glu(data, shape, channels):
    c = shape[1] if channels else 1
    x, w = data.draw(operands([shape, (c,)], away=(0.0,)))
    check_grad(F.prelu, [x, w])
    glu_shape = shape[:-1] + (2 * shape[-1],)
    (y,) = data.draw(operands([glu_shape]))
    check_grad(lambda t: F.glu(t, -1), [y])


# ---- losses ----------------------------------------------------------------------------------

def _pointwise_losses():
    """name -> (fn(input, target, reduction), input domain, target domain, target differentiable)"""
    return {
        "mse": (lambda x, t, r: F.mse_loss(x, t, reduction=r), (-2, 2), (-2, 2), True),
        "l1": (lambda x, t, r: F.l1_loss(x, t, reduction=r), (-2, 2), (-2, 2), True),
        "smooth_l1": (lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.7), (-2, 2),
                      (-2, 2), True),
        "huber": (lambda x, t, r: F.huber_loss(x, t, reduction=r, delta=0.6), (-2, 2), (-2, 2),
                  True),
        "bce": (lambda x, t, r: F.binary_cross_entropy(x, t, reduction=r), (0.05, 0.95),
                (0, 1), True),
        "bce_logits": (lambda x, t, r: F.binary_cross_entropy_with_logits(x, t, reduction=r),
                       (-3, 3), (0, 1), True),
        "kl_div": (lambda x, t, r: F.kl_div(x, t, reduction=r), (-3, 0), (0.05, 1), True),
        "kl_div_log": (lambda x, t, r: F.kl_div(x, t, reduction=r, log_target=True), (-3, 0),
                       (-3, 0), True),
        "poisson": (lambda x, t, r: F.poisson_nll_loss(x, t, reduction=r), (-2, 2), (0, 4),
                    True),
        "poisson_rate_full": (lambda x, t, r: F.poisson_nll_loss(
            x, t, log_input=False, full=True, reduction=r), (0.1, 3), (0, 4), True),
        "soft_margin": (lambda x, t, r: F.soft_margin_loss(x, t.sign(), reduction=r), (-2, 2),
                        (-1, 1), False),
        "hinge": (lambda x, t, r: F.hinge_embedding_loss(x, t.sign(), margin=1.3,
                                                         reduction=r), (-2, 2), (-1, 1), False),
    }


POINTWISE = _pointwise_losses()


@pytest.mark.parametrize("name", sorted(POINTWISE))
@pytest.mark.parametrize("reduction", REDUCTIONS)
@FEW
@given(data=st.data(), shape=shapes(0, 3, 1, 3), weighted=st.booleans())
def test_pointwise_losses(name, reduction, data, shape, weighted):
    fn, (xl, xh), (tl, th), target_grad = POINTWISE[name]
    x, t, w = data.draw(operands([shape, shape, shape], domains=[(xl, xh, ()), (tl, th, (0.0,)),
                                                                 (0.5, 2.0, ())]))
    if not target_grad:
        t = (t[0].detach(), t[1])
    if weighted and name in ("bce", "bce_logits"):  # the pointwise losses with weights
        wt = w[0].detach()

        def fn(a, b, r):
            if name == "bce":
                return F.binary_cross_entropy(a, b, wt, r)
            return F.binary_cross_entropy_with_logits(a, b, wt, r, pos_weight=wt * 2)

    ops = [x, t] if t[0].requires_grad else [x]
    tt = t[1](t[0])
    check_grad((lambda a, b: fn(a, b, reduction)) if len(ops) == 2 else
               (lambda a: fn(a, tt, reduction)), ops)


@FEW
@given(data=st.data(), n=st.integers(1, 3), c=st.integers(2, 4), extra=shapes(0, 2, 1, 2),
       reduction=st.sampled_from(REDUCTIONS), weighted=st.booleans(),
       smoothing=st.sampled_from([0.0, 0.2]), seed=st.integers(0, 2**16))
def test_classification_losses(data, n, c, extra, reduction, weighted, smoothing, seed):
    rng = np.random.default_rng(seed)
    x, probs, w = data.draw(operands([(n, c) + extra, (n, c) + extra, (c,)],
                                     domains=[(-2, 2, ()), (0.1, 1, ()), (0.5, 2, ())]))
    target = _ints(rng, c, (n,) + extra)
    ignore = int(rng.integers(0, c))
    wt = w[0].detach() if weighted else None
    check_grad(lambda a: F.cross_entropy(a, target, wt, reduction=reduction,
                                         label_smoothing=smoothing), [x])
    check_grad(lambda a: F.cross_entropy(a, target, wt, ignore_index=ignore,
                                         reduction=reduction), [x])
    # probabilities as targets (differentiable too)
    check_grad(lambda a, p: F.cross_entropy(a, p / p.sum(1, keepdim=True), wt,
                                            reduction=reduction, label_smoothing=smoothing),
               [x, probs])
    check_grad(lambda a: F.nll_loss(a.log_softmax(1), target, wt, ignore_index=ignore,
                                    reduction=reduction), [x])
    x2 = (x[0].detach().reshape(n, -1)[:, :c].contiguous().requires_grad_(), lambda t: t)
    check_grad(lambda a: F.multi_margin_loss(a, target.reshape(n, -1)[:, 0], p=2, margin=0.7,
                                             weight=wt, reduction=reduction), [x2])
    check_grad(lambda a: F.multi_margin_loss(a, target.reshape(n, -1)[:, 0],
                                             reduction=reduction), [x2])
    labels = fiamma.tensor(np.where(rng.random((n, c)) < 0.5, rng.integers(0, c, (n, c)), -1),
                           dtype=fiamma.int64)
    check_grad(lambda a: F.multilabel_margin_loss(a, labels, reduction=reduction), [x2])
    multi = fiamma.tensor(rng.integers(0, 2, (n, c)), dtype=F64)
    check_grad(lambda a: F.multilabel_soft_margin_loss(a, multi, wt, reduction=reduction),
               [x2])


@FEW
@given(data=st.data(), n=st.integers(1, 3), d=st.integers(1, 4),
       reduction=st.sampled_from(REDUCTIONS), seed=st.integers(0, 2**16))
def test_pair_and_triplet_losses(data, n, d, reduction, seed):
    rng = np.random.default_rng(seed)
    a, p, q, v = data.draw(operands([(n, d)] * 3 + [(n, 1)], domains=[(-2, 2, ())] * 3 +
                                    [(0.2, 2, ())]))
    y = fiamma.tensor(rng.choice([-1.0, 1.0], n), dtype=F64)
    check_grad(lambda x1, x2: F.cosine_embedding_loss(x1, x2, y, margin=0.1,
                                                      reduction=reduction), [a, p])
    check_grad(lambda x1, x2: F.margin_ranking_loss(x1[:, 0], x2[:, 0], y, margin=0.2,
                                                    reduction=reduction), [a, p])
    for swap in (False, True):
        check_grad(lambda x1, x2, x3: F.triplet_margin_loss(x1, x2, x3, margin=3.0, p=2,
                                                            swap=swap, reduction=reduction),
                   [a, p, q])
    check_grad(lambda x1, x2, x3: F.triplet_margin_with_distance_loss(
        x1, x2, x3, distance_function=lambda u, w: (u - w).pow(2).sum(-1), margin=5.0,
        reduction=reduction), [a, p, q])
    check_grad(lambda x, t, var: F.gaussian_nll_loss(x, t, var, full=True,
                                                     reduction=reduction), [a, p, v])


# ---- convolution and pooling ------------------------------------------------------------------

@st.composite
def _conv_case(draw, nd):
    groups = draw(st.sampled_from([1, 2]))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    k = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    stride = draw(st.integers(1, 2))
    dilation = draw(st.integers(1, 2))
    padding = draw(st.integers(0, 1))
    size = tuple(draw(st.integers((ki - 1) * dilation + 1, (ki - 1) * dilation + 3))
                 for ki in k)
    n = draw(st.integers(1, 2))
    return n, cin, cout, k, stride, dilation, padding, size, groups


@pytest.mark.parametrize("nd", [1, 2, 3])
@FEW
@given(data=st.data(), case=st.data())
def test_conv(nd, data, case):
    n, cin, cout, k, stride, dil, pad, size, groups = case.draw(_conv_case(nd))
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
    x, w, b = data.draw(operands([(n, cin) + size, (cout, cin // groups) + k, (cout,)]))
    check_grad(lambda a, ww, bb: conv(a, ww, bb, stride, pad, dil, groups), [x, w, b])


@pytest.mark.parametrize("nd", [1, 2])
@FEW
@given(data=st.data(), case=st.data(), out_pad=st.booleans())
def test_conv_transpose(nd, data, case, out_pad):
    n, cin, cout, k, stride, dil, pad, size, groups = case.draw(_conv_case(nd))
    conv_t = {1: F.conv_transpose1d, 2: F.conv_transpose2d}[nd]
    op = 1 if out_pad and stride > 1 else 0
    x, w, b = data.draw(operands([(n, cin) + size, (cin, cout // groups) + k, (cout,)]))
    check_grad(lambda a, ww, bb: conv_t(a, ww, bb, stride, pad, op, groups, dil), [x, w, b])


@st.composite
def _pool_case(draw, nd):
    k = draw(st.integers(1, 3))
    stride = draw(st.integers(1, 3))
    pad = draw(st.integers(0, k // 2))
    size = tuple(draw(st.integers(k, k + 3)) for _ in range(nd))
    return k, stride, pad, size, draw(st.booleans())


@pytest.mark.parametrize("nd", [1, 2])
@SOME
@given(data=st.data(), case=st.data())
def test_pooling(nd, data, case):
    k, stride, pad, size, ceil = case.draw(_pool_case(nd))
    avg = {1: F.avg_pool1d, 2: F.avg_pool2d}[nd]
    mx = {1: F.max_pool1d, 2: F.max_pool2d}[nd]
    aavg = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d}[nd]
    amax = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d}[nd]
    lp = {1: F.lp_pool1d, 2: F.lp_pool2d}[nd]
    shape = (2, 2) + size
    # no ties for max pooling: no expanded operand
    (x,) = data.draw(operands([shape], layouts=LAYOUTS[:4]))
    for cip in (True, False):
        check_grad(lambda a: avg(a, k, stride, pad, ceil, cip), [x])
    check_grad(lambda a: mx(a, k, stride, pad, 1, ceil), [x])
    out = tuple(max(1, s - 1) for s in size)
    check_grad(lambda a: aavg(a, out), [x])
    check_grad(lambda a: amax(a, out), [x])
    (p,) = data.draw(operands([shape], 0.3, 2.0))
    check_grad(lambda a: lp(a, 2.0, k, stride, ceil), [p])


@FEW
@given(data=st.data(), size=st.tuples(st.integers(2, 4), st.integers(2, 4)),
       mode=st.sampled_from(["constant", "reflect", "replicate", "circular"]),
       pads=st.tuples(*[st.integers(0, 1)] * 4))
def test_pad_unfold_fold_interpolate(data, size, mode, pads):
    (x,) = data.draw(operands([(1, 2) + size]))
    check_grad(lambda a: F.pad(a, pads, mode=mode, value=0.5) if mode == "constant" else
               F.pad(a, pads, mode=mode), [x])
    check_grad(lambda a: F.unfold(a, 2, padding=1, stride=1), [x])
    blocks = (size[0] - 1) * (size[1] - 1)
    (c,) = data.draw(operands([(1, 2 * 4, blocks)]))
    check_grad(lambda a: F.fold(a, size, 2), [c])
    for m, ac in (("nearest", None), ("bilinear", False), ("bilinear", True)):
        check_grad(lambda a: F.interpolate(a, scale_factor=1.5, mode=m, align_corners=ac), [x])


# ---- normalisation -------------------------------------------------------------------------

@SOME
@given(data=st.data(), n=st.integers(2, 3), c=st.sampled_from([2, 4]),
       spatial=shapes(0, 2, 1, 3), affine=st.booleans(), seed=st.integers(0, 2**16))
def test_norms(data, n, c, spatial, affine, seed):
    shape = (n, c) + spatial
    x, w, b = data.draw(operands([shape, (c,), (c,)], domains=[(-2, 2, ()), (0.5, 2, ()),
                                                               (-1, 1, ())],
                                 layouts=LAYOUTS[:4]))  # a constant line has no derivative
    wb = [w, b] if affine else []

    def aff(fn):
        return (lambda a, ww, bb: fn(a, ww, bb)) if affine else (lambda a: fn(a, None, None))

    check_grad(aff(lambda a, ww, bb: F.batch_norm(a, None, None, ww, bb, training=True)),
               [x] + wb)
    rm, rv = fiamma.zeros(c, dtype=F64), fiamma.ones(c, dtype=F64) * 1.5
    check_grad(aff(lambda a, ww, bb: F.batch_norm(a, rm, rv, ww, bb, training=False)), [x] + wb)
    check_grad(aff(lambda a, ww, bb: F.group_norm(a, 2, ww, bb)), [x] + wb)
    if spatial and np.prod(spatial) > 1:  # one value per instance has no variance to use
        check_grad(aff(lambda a, ww, bb: F.instance_norm(a, weight=ww, bias=bb)), [x] + wb)
    if spatial:
        check_grad(lambda a: F.local_response_norm(a, 2), [x])
    k = int(np.random.default_rng(seed).integers(1, len(shape)))
    ns = shape[len(shape) - k:]
    lw, lb = data.draw(operands([ns, ns], domains=[(0.5, 2, ()), (-1, 1, ())]))
    check_grad(lambda a, ww, bb: F.layer_norm(a, ns, ww, bb), [x, lw, lb])
    check_grad(lambda a, ww: F.rms_norm(a, ns, ww), [x, lw])


# ---- embeddings, linear layers, attention -----------------------------------------------------

@FEW
@given(data=st.data(), num=st.integers(2, 5), dim=st.integers(1, 3),
       idx_shape=shapes(1, 2, 1, 3), seed=st.integers(0, 2**16))
def test_embeddings_and_linear(data, num, dim, idx_shape, seed):
    rng = np.random.default_rng(seed)
    idx = _ints(rng, num, idx_shape)
    pad = int(rng.integers(0, num))
    (w,) = data.draw(operands([(num, dim)]))
    check_grad(lambda t: F.embedding(idx, t), [w])
    # padding_idx: the same gradient with the padding row's left out (PyTorch's convention;
    # the output does depend on that row, so a numerical check would not apply)
    (g,) = fiamma.autograd.grad((F.embedding(idx, w[0], padding_idx=pad) ** 2).sum(), w[0])
    (g0,) = fiamma.autograd.grad((F.embedding(idx, w[0]) ** 2).sum(), w[0])
    g0[pad] = 0.0
    np.testing.assert_array_equal(g.numpy(), g0.numpy())
    bags = _ints(rng, num, (3, 2))
    for mode in ("sum", "mean", "max"):
        check_grad(lambda t: F.embedding_bag(bags, t, mode=mode), [w])
    x, lw, lb, bw = data.draw(operands([idx_shape + (dim,), (2, dim), (2,), (2, dim, dim)]))
    check_grad(F.linear, [x, lw, lb])
    check_grad(lambda a, ww: F.bilinear(a, a * 0.5, ww), [x, bw])


@SOME
@given(data=st.data(), b=st.integers(1, 2), h=st.integers(1, 2), lq=st.integers(1, 3),
       lk=st.integers(1, 3), e=st.integers(1, 3), mask=st.sampled_from(["none", "bool",
                                                                        "float", "causal"]),
       scale=st.sampled_from([None, 0.7]), seed=st.integers(0, 2**16))
def test_scaled_dot_product_attention(data, b, h, lq, lk, e, mask, scale, seed):
    rng = np.random.default_rng(seed)
    q, k, v = data.draw(operands([(b, h, lq, e), (b, h, lk, e), (b, h, lk, e + 1)]))
    attn_mask = None
    if mask == "bool":
        m = rng.random((lq, lk)) < 0.7
        m[:, 0] = True  # every query sees one key (an all-masked row is NaN, as in PyTorch)
        attn_mask = fiamma.tensor(m)
    elif mask == "float":
        attn_mask = fiamma.tensor(rng.standard_normal((lq, lk)), dtype=F64)
    causal = mask == "causal" and lq <= lk
    check_grad(lambda a, kk, vv: F.scaled_dot_product_attention(
        a, kk, vv, attn_mask=attn_mask, is_causal=causal, scale=scale), [q, k, v])


@FEW
@given(data=st.data(), L=st.integers(1, 3), S=st.integers(1, 3), n=st.integers(1, 2),
       heads=st.sampled_from([1, 2]))
def test_multi_head_attention(data, L, S, n, heads):
    e = 2 * heads
    q, k, v, w_in, b_in, w_out, b_out = data.draw(operands(
        [(L, n, e), (S, n, e), (S, n, e), (3 * e, e), (3 * e,), (e, e), (e,)]))

    def f(qq, kk, vv, wi, bi, wo, bo):
        out, weights = F.multi_head_attention_forward(qq, kk, vv, e, heads, wi, bi, None, None,
                                                      False, 0.0, wo, bo, training=False)
        return out.sum() + weights.sum() * 0.5

    check_grad(f, [q, k, v, w_in, b_in, w_out, b_out])


# ---- float32 ---------------------------------------------------------------------------------

FLOAT32_OPS = {
    "gelu": lambda x: F.gelu(x).sum(),
    "cross_entropy": lambda x: F.cross_entropy(x.reshape(-1, x.shape[-1]),
                                               fiamma.zeros(x.numel() // x.shape[-1],
                                                            dtype=fiamma.int64)),
    "layer_norm": lambda x: (F.layer_norm(x, x.shape[-1:]) * fiamma.arange(
        x.shape[-1], dtype=x.dtype)).sum(),
    "bce_logits": lambda x: F.binary_cross_entropy_with_logits(x, (x.detach() > 0).to(
        x.dtype)),
    "attention": lambda x: F.scaled_dot_product_attention(x, x * 0.5, x).pow(2).sum(),
}


@pytest.mark.parametrize("name", sorted(FLOAT32_OPS))
@FEW
@given(data=st.data(), shape=shapes(2, 3, 2, 3))
def test_float32_gradients_follow_float64(name, data, shape):
    seed = data.draw(st.integers(0, 2**32 - 1))
    layout = data.draw(st.sampled_from(LAYOUTS[:4]))
    grads = []
    for dt in (F64, fiamma.float32):
        leaf, build = make_operand(np.random.default_rng(seed), shape, layout, dtype=dt)
        FLOAT32_OPS[name](build(leaf)).backward()
        assert leaf.grad.dtype is dt
        grads.append(leaf.grad.to(F64).numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-4, atol=1e-5)
