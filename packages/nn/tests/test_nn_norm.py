"""Normalisation layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, GroupNorm,
LocalResponseNorm, RMSNorm and their functional forms. Values and running stats against float64
NumPy, gradients by gradcheck, and (parity session) outputs, input/weight/bias gradients,
running stats, state_dict keys and reprs against torch.nn for every option."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck
from fiamma.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

parity = pytest.mark.parity
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


@pytest.fixture(autouse=True, scope="module")
def _torch_one_thread():
    """torch's thread pool spins for ~0.1 s per tiny op on a loaded machine: one thread here,
    restored after this file."""
    if torch is None:
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def T(a, dt=fiamma.float64):
    return fiamma.tensor(np.asarray(a, dtype=np.float64), dtype=dt)


# ---- against NumPy -------------------------------------------------------------------------

def _bn_ref(x, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def test_batchnorm_train_eval_and_running_stats_over_steps():
    rng = np.random.default_rng(0)
    m = nn.BatchNorm2d(3, momentum=0.2, dtype=fiamma.float64)
    rm, rv = np.zeros(3), np.ones(3)
    for _ in range(3):
        x = rng.standard_normal((4, 3, 5, 2)) * 2 + 1
        y = m(T(x))
        np.testing.assert_allclose(y.detach().numpy(), _bn_ref(x), atol=1e-10)
        r = x.transpose(1, 0, 2, 3).reshape(3, -1)
        rm = 0.8 * rm + 0.2 * r.mean(1)
        rv = 0.8 * rv + 0.2 * r.var(1, ddof=1)
    np.testing.assert_allclose(m.running_mean.numpy(), rm, atol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), rv, atol=1e-12)
    assert m.num_batches_tracked.item() == 3 and m.num_batches_tracked.dtype is fiamma.int64
    m.eval()
    x = rng.standard_normal((2, 3, 4, 4))
    y = m(T(x))
    ey = (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y.detach().numpy(), ey, atol=1e-10)


def test_batchnorm_momentum_none_is_cumulative_average():
    rng = np.random.default_rng(1)
    m = nn.BatchNorm1d(2, momentum=None, dtype=fiamma.float64)
    means = []
    for _ in range(4):
        x = rng.standard_normal((6, 2)) + 3
        m(T(x))
        means.append(x.mean(0))
    np.testing.assert_allclose(m.running_mean.numpy(), np.mean(means, 0), atol=1e-12)


def test_batchnorm_without_running_stats_and_checks():
    m = nn.BatchNorm1d(3, track_running_stats=False, affine=False)
    assert m.running_mean is None and list(m.state_dict()) == []
    m.eval()
    x = fiamma.randn(5, 3)
    np.testing.assert_allclose(m(x).numpy(), _bn_ref(x.numpy().astype(np.float64)), atol=1e-5)
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.BatchNorm1d(3)(fiamma.randn(2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(fiamma.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 5D input"):
        nn.BatchNorm3d(3)(fiamma.randn(2, 3, 4, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        nn.BatchNorm1d(3)(fiamma.randn(1, 3))
    with pytest.raises(ValueError, match="batch_norm.*3"):
        nn.BatchNorm2d(3)(fiamma.randn(2, 4, 3, 3))


def test_state_dict_keys_and_reprs():
    bn = nn.BatchNorm2d(4)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    assert repr(bn) == "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, " \
                       "track_running_stats=True)"
    assert repr(nn.InstanceNorm2d(3)) == "InstanceNorm2d(3, eps=1e-05, momentum=0.1, " \
                                         "affine=False, bias=False, track_running_stats=False)"
    assert list(nn.BatchNorm1d(3, bias=False).state_dict())[:2] == ["weight", "running_mean"]
    assert list(nn.InstanceNorm1d(3).state_dict()) == []
    assert repr(nn.LayerNorm(5)) == "LayerNorm((5,), eps=1e-05, elementwise_affine=True, " \
                                    "bias=True)"
    assert list(nn.LayerNorm(5, bias=False).state_dict()) == ["weight"]
    assert repr(nn.GroupNorm(2, 4)) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"
    assert repr(nn.LocalResponseNorm(3)) == "LocalResponseNorm(3, alpha=0.0001, beta=0.75, " \
                                            "k=1.0)"
    assert repr(nn.RMSNorm([2, 3])) == "RMSNorm((2, 3), eps=None, elementwise_affine=True)"
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(3, 4)


def test_old_checkpoint_without_num_batches_tracked_loads():
    m = nn.BatchNorm1d(2)
    sd = {k: v for k, v in m.state_dict().items() if k != "num_batches_tracked"}
    from collections import OrderedDict
    sd = OrderedDict(sd)
    sd._metadata = OrderedDict({"": {"version": 1}})
    m.load_state_dict(sd)
    assert m.num_batches_tracked.item() == 0


def test_instance_norm_rejects_untracked_running_stats_in_old_checkpoints():
    m = nn.InstanceNorm1d(3)
    with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
        m.load_state_dict({"running_mean": fiamma.zeros(3), "running_var": fiamma.ones(3)})
    m = nn.InstanceNorm1d(3, track_running_stats=True)
    m.load_state_dict({"running_mean": fiamma.ones(3), "running_var": fiamma.ones(3)})
    assert m.running_mean.tolist() == [1.0] * 3 and m.num_batches_tracked.item() == 0


def test_instance_norm_unbatched_and_layer_group_rms_values():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 7))
    y = nn.InstanceNorm1d(3)(T(x))
    np.testing.assert_allclose(y.numpy(), _bn_ref(x[:, None, :].transpose(1, 0, 2))
                               .transpose(1, 0, 2)[:, 0], atol=1e-10)
    with pytest.raises(ValueError, match=r"expected 3D or 4D input"):
        nn.InstanceNorm2d(3)(T(x))
    x = rng.standard_normal((2, 4, 3))
    ln = nn.LayerNorm((4, 3), dtype=fiamma.float64)
    r = x.reshape(2, -1)
    eln = ((r - r.mean(1, keepdims=True)) / np.sqrt(r.var(1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(ln(T(x)).detach().numpy(), eln.reshape(x.shape), atol=1e-10)
    gn = nn.GroupNorm(1, 4, dtype=fiamma.float64)
    np.testing.assert_allclose(gn(T(x)).detach().numpy(), eln.reshape(x.shape), atol=1e-10)
    rms = nn.RMSNorm(3, eps=1e-6, dtype=fiamma.float64)
    erms = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(rms(T(x)).detach().numpy(), erms, atol=1e-10)


def _lrn_ref(x, size, alpha, beta, k):
    C = x.shape[1]
    sq = x * x
    div = np.zeros_like(x)
    for c in range(C):
        lo, hi = c - size // 2, c + (size - 1) // 2
        div[:, c] = sq[:, max(lo, 0):min(hi, C - 1) + 1].sum(1)
    return x / (k + alpha / size * div) ** beta


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_local_response_norm(size):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 3, 2))
    y = nn.LocalResponseNorm(size, alpha=0.3, beta=0.6, k=1.5)(T(x))
    np.testing.assert_allclose(y.numpy(), _lrn_ref(x, size, 0.3, 0.6, 1.5), atol=1e-12)
    with pytest.raises(ValueError, match="Expected 3D or higher"):
        F.local_response_norm(T(x[0, 0]), 2)


def test_functional_gradcheck():
    rng = np.random.default_rng(4)

    def leaf(*s):
        return T(rng.standard_normal(s)).requires_grad_()
    x, w, b = leaf(3, 4, 5), leaf(4), leaf(4)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, True), (x, w, b))
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), (x, w, b))
    assert gradcheck(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), (x, w, b))
    w5, b5 = leaf(5), leaf(5)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (5,), w, b), (x, w5, b5))
    assert gradcheck(lambda x, w: F.rms_norm(x, (5,), w), (x, w5))
    assert gradcheck(lambda x: F.local_response_norm(x, 3, 0.5, 0.7, 1.2), (x,))


def test_empty_batch():
    assert tuple(nn.LayerNorm(4)(fiamma.randn(0, 4)).shape) == (0, 4)
    assert tuple(nn.GroupNorm(2, 4)(fiamma.randn(0, 4, 3)).shape) == (0, 4, 3)
    assert tuple(nn.BatchNorm1d(4).eval()(fiamma.randn(0, 4)).shape) == (0, 4)


# ---- parity with PyTorch -------------------------------------------------------------------

def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(a, b, what, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(_np(a).astype(np.float64), _np(b).astype(np.float64), rtol=rtol,
                               atol=atol, err_msg=what)


def _parity(tm, fm, shape, steps=3, transpose=False, seed=0):
    rng = np.random.default_rng(seed)
    sd = tm.state_dict()
    assert list(sd) == list(fm.state_dict())
    for k, v in sd.items():
        assert tuple(v.shape) == tuple(fm.state_dict()[k].shape), k
    # random affine parameters (the defaults are ones/zeros)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype))
    fm.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    assert repr(tm) == repr(fm)
    for train in (True, False, True):
        tm.train(train)
        fm.train(train)
        for _ in range(steps):
            a = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
            if transpose:
                a = np.ascontiguousarray(np.swapaxes(a, -1, -2))
            xt = torch.tensor(a, requires_grad=True)
            xf = fiamma.tensor(a).requires_grad_()
            it = xt.transpose(-1, -2) if transpose else xt
            fi = xf.transpose(-1, -2) if transpose else xf
            yt, yf = tm(it), fm(fi)
            _close(yt, yf, "output")
            gy = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
            (yt * torch.tensor(gy)).sum().backward()
            (yf * fiamma.tensor(gy)).sum().backward()
            _close(xt.grad, xf.grad, "input grad", rtol=1e-4, atol=1e-4)
            for (n, pt), (n2, pf) in zip(tm.named_parameters(), fm.named_parameters()):
                assert n == n2
                _close(pt.grad, pf.grad, f"{n} grad", rtol=1e-4, atol=1e-4)
                pt.grad, pf.grad = None, None
        for k, v in tm.state_dict().items():
            _close(v, fm.state_dict()[k], k)


BN_OPTIONS = [{}, {"affine": False}, {"track_running_stats": False}, {"momentum": None},
              {"momentum": 0.3, "eps": 1e-3}, {"bias": False}]


@parity
@needs_torch
@pytest.mark.parametrize("kw", BN_OPTIONS)
@pytest.mark.parametrize("dims,shape,transpose", [
    (1, (5, 4), False), (1, (5, 4, 7), True), (2, (4, 4, 5, 6), True), (2, (1, 4, 3, 5), False),
    (3, (2, 4, 3, 2, 5), False)])
def test_batchnorm_parity(kw, dims, shape, transpose):
    name = f"BatchNorm{dims}d"
    _parity(getattr(torch.nn, name)(4, **kw), getattr(nn, name)(4, **kw), shape,
            transpose=transpose)


@parity
@needs_torch
@pytest.mark.parametrize("kw", [{}, {"affine": True}, {"track_running_stats": True},
                                {"affine": True, "track_running_stats": True, "momentum": 0.4},
                                {"affine": True, "bias": False}])
@pytest.mark.parametrize("dims,shape", [(1, (3, 4, 6)), (1, (4, 6)), (2, (2, 4, 3, 5)),
                                        (2, (4, 3, 5)), (3, (2, 4, 2, 3, 2))])
def test_instancenorm_parity(kw, dims, shape):
    name = f"InstanceNorm{dims}d"
    _parity(getattr(torch.nn, name)(4, **kw), getattr(nn, name)(4, **kw), shape)


@parity
@needs_torch
@pytest.mark.parametrize("ns,kw,shape,transpose", [
    ((6,), {}, (3, 6), False), ((6,), {}, (2, 5, 6), True), ((4, 6), {}, (3, 4, 6), False),
    ((6,), {"elementwise_affine": False}, (4, 6), False), ((6,), {"bias": False}, (4, 6), True),
    ((6,), {"eps": 1e-2}, (6,), False)])
def test_layernorm_parity(ns, kw, shape, transpose):
    _parity(torch.nn.LayerNorm(ns, **kw), nn.LayerNorm(ns, **kw), shape, transpose=transpose)


@parity
@needs_torch
@pytest.mark.parametrize("groups,kw,shape,transpose", [
    (2, {}, (3, 6, 5), False), (3, {}, (2, 6, 4, 3), True), (6, {"affine": False}, (2, 6), False),
    (1, {"eps": 1e-3}, (2, 6, 2, 2, 3), False), (2, {"bias": False}, (2, 6, 3), False)])
def test_groupnorm_parity(groups, kw, shape, transpose):
    _parity(torch.nn.GroupNorm(groups, 6, **kw), nn.GroupNorm(groups, 6, **kw), shape,
            transpose=transpose)


@parity
@needs_torch
@pytest.mark.parametrize("ns,kw,shape,transpose", [
    ((6,), {}, (3, 6), False), ((4, 6), {"eps": 1e-6}, (2, 4, 6), True),
    ((6,), {"elementwise_affine": False}, (5, 6), False)])
def test_rmsnorm_parity(ns, kw, shape, transpose):
    _parity(torch.nn.RMSNorm(ns, **kw), nn.RMSNorm(ns, **kw), shape, transpose=transpose)


@parity
@needs_torch
@pytest.mark.parametrize("size,kw,shape", [(3, {}, (2, 5, 4)), (2, {"alpha": 0.1}, (2, 5, 3, 4)),
                                           (4, {"beta": 0.5, "k": 2.0}, (1, 6, 2, 3, 2))])
def test_localresponsenorm_parity(size, kw, shape):
    _parity(torch.nn.LocalResponseNorm(size, **kw), nn.LocalResponseNorm(size, **kw), shape)


@parity
@needs_torch
def test_functional_parity_running_stats():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 3, 4)).astype(np.float32)
    rmt, rvt = torch.zeros(3), torch.ones(3)
    rmf, rvf = fiamma.zeros(3), fiamma.ones(3)
    for _ in range(3):
        yt = torch.nn.functional.batch_norm(torch.tensor(a), rmt, rvt, training=True,
                                            momentum=0.2)
        yf = F.batch_norm(fiamma.tensor(a), rmf, rvf, training=True, momentum=0.2)
        _close(yt, yf, "output")
    _close(rmt, rmf, "running_mean")
    _close(rvt, rvf, "running_var")
    yt = torch.nn.functional.instance_norm(torch.tensor(a), rmt, rvt, use_input_stats=True)
    yf = F.instance_norm(fiamma.tensor(a), rmf, rvf, use_input_stats=True)
    _close(yt, yf, "instance_norm")
    _close(rmt, rmf, "instance running_mean")
    _close(rvt, rvf, "instance running_var")
