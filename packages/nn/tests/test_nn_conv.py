"""Conv1d/2d/3d, ConvTranspose1d/2d/3d, Fold, Unfold: shapes, state_dict keys, repr, init,
gradients by gradcheck (float64), bad input, and (parity) outputs and gradients against
torch.nn with the same weights for every option, padding modes included."""

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

parity = [pytest.mark.parity, pytest.mark.skipif(torch is None, reason="needs torch")]


def test_shapes_unbatched_empty_and_keys():
    m = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    assert tuple(m(fiamma.randn(2, 3, 9, 9)).shape) == (2, 8, 5, 5)
    assert tuple(m(fiamma.randn(3, 9, 9)).shape) == (8, 5, 5)
    assert tuple(m(fiamma.randn(0, 3, 9, 9)).shape) == (0, 8, 5, 5)
    assert list(m.state_dict()) == ["weight", "bias"]
    assert tuple(m.weight.shape) == (8, 3, 3, 3)
    t = nn.ConvTranspose1d(4, 6, 3, groups=2, bias=False)
    assert list(t.state_dict()) == ["weight"] and tuple(t.weight.shape) == (4, 3, 3)
    assert tuple(t(fiamma.randn(4, 5)).shape) == (6, 7)
    c3 = nn.Conv3d(2, 2, (1, 2, 3), padding="same", padding_mode="replicate")
    assert tuple(c3(fiamma.randn(1, 2, 3, 4, 5)).shape) == (1, 2, 3, 4, 5)


def test_default_init_bounds():
    m = nn.Conv2d(4, 6, 3)
    bound = 1 / np.sqrt(4 * 9)
    assert float(m.weight.abs().max()) <= bound + 1e-7
    assert float(m.bias.abs().max()) <= bound + 1e-7
    assert float(m.weight.std()) > bound / 4


def test_repr():
    assert repr(nn.Conv2d(3, 8, 3, padding=1)) == \
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"
    assert repr(nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1, groups=2, bias=False)) \
        == ("ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1), "
            "groups=2, bias=False)")
    assert repr(nn.Conv1d(4, 2, 3, padding="same", padding_mode="circular")) == \
        "Conv1d(4, 2, kernel_size=(3,), stride=(1,), padding=same, padding_mode=circular)"
    assert repr(nn.Unfold(2)) == "Unfold(kernel_size=2, dilation=1, padding=0, stride=1)"


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_gradcheck_modules(mode):
    fiamma.manual_seed(0)
    m = nn.Conv2d(2, 4, (2, 3), stride=(1, 2), padding=1, dilation=(2, 1), groups=2,
                  padding_mode=mode, dtype=fiamma.float64)
    x = fiamma.randn(2, 2, 5, 6, dtype=fiamma.float64).requires_grad_()
    assert gradcheck(lambda x, w, b: F.conv2d(
        F.pad(x, m._reversed_padding_repeated_twice, mode=mode) if mode != "zeros" else x, w, b,
        m.stride, 0 if mode != "zeros" else m.padding, m.dilation, m.groups), (x, m.weight, m.bias))
    y = m(x)
    y.sum().backward()
    assert x.grad is not None and m.weight.grad is not None and m.bias.grad is not None


def test_gradcheck_transposed_and_fold():
    fiamma.manual_seed(1)
    t = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2,
                           dtype=fiamma.float64)
    x = fiamma.randn(1, 4, 3, 2, dtype=fiamma.float64).requires_grad_()
    assert gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1, 2), (x, t.weight, t.bias))
    c = fiamma.randn(2, 8, 6, dtype=fiamma.float64).requires_grad_()
    assert gradcheck(lambda c: F.fold(c, (3, 4), 2), (c,))
    u = fiamma.randn(2, 2, 4, 5, dtype=fiamma.float64).requires_grad_()
    assert gradcheck(lambda u: F.unfold(u, (2, 3), padding=1, stride=2), (u,))


def test_noncontiguous_input_matches_contiguous():
    m = nn.Conv1d(3, 2, 3, padding=1)
    base = fiamma.randn(2, 7, 3)
    x = base.transpose(1, 2)
    np.testing.assert_allclose(m(x).detach().numpy(), m(x.contiguous()).detach().numpy(),
                               rtol=1e-6)


def test_bad_input():
    with pytest.raises(RuntimeError, match="conv2d"):
        nn.Conv2d(3, 4, 3)(fiamma.randn(3, 5))
    with pytest.raises(RuntimeError, match="channels"):
        nn.Conv2d(3, 4, 3)(fiamma.randn(1, 4, 5, 5))
    with pytest.raises(RuntimeError, match="kernel"):
        nn.Conv2d(3, 4, 3)(fiamma.randn(1, 3, 2, 2))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="output size"):
        nn.ConvTranspose2d(3, 4, 3, stride=2)(fiamma.randn(1, 3, 4, 4), output_size=(20, 20))
    with pytest.raises(NotImplementedError, match="unfold"):
        F.unfold(fiamma.randn(2, 3), 2)


# ---- parity with torch.nn -----------------------------------------------------------------

def _to_t(a):
    return torch.tensor(a.detach().numpy()) if isinstance(a, fiamma.Tensor) else a


def _compare(fm, tm, x_np, out_kwargs=None, rtol=1e-5, atol=1e-5):
    """Same weights, same input: outputs and input/weight/bias gradients agree."""
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in
                        ((k, v.detach()) for k, v in fm.state_dict().items())})
    assert list(fm.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        assert tuple(fm.state_dict()[k].shape) == tuple(v.shape)
    kw = out_kwargs or {}
    x = fiamma.tensor(x_np).requires_grad_()
    tx = torch.tensor(x_np).requires_grad_()
    y, ty = fm(x, **kw), tm(tx, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=atol)
    g = np.random.default_rng(9).standard_normal(tuple(ty.shape)).astype(np.float32)
    (y * fiamma.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(fm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=rtol,
                               atol=atol * 10)
    if fm.bias is not None:
        np.testing.assert_allclose(fm.bias.grad.numpy(), tm.bias.grad.numpy(), rtol=rtol,
                                   atol=atol * 10)


CONV_CASES = [
    dict(), dict(stride=2), dict(padding=2), dict(padding="same"), dict(padding="valid"),
    dict(dilation=2, padding=1), dict(groups=2), dict(bias=False), dict(stride=2, groups=4),
    dict(padding=1, padding_mode="reflect"), dict(padding=2, padding_mode="replicate"),
    dict(padding=1, padding_mode="circular"), dict(padding="same", padding_mode="reflect"),
]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", CONV_CASES, ids=[str(c) for c in CONV_CASES])
@pytest.mark.parametrize("unbatched", [False, True])
def test_parity_conv(nd, kw, unbatched, request):
    for m in parity:
        request.applymarker(m)
    if torch is None:
        pytest.skip("needs torch")
    k = 4 if kw.get("padding") == "same" else 3
    fm = getattr(nn, f"Conv{nd}d")(4, 8, k, **kw)
    tm = getattr(torch.nn, f"Conv{nd}d")(4, 8, k, **kw)
    sp = [9, 8, 7][:nd] if nd < 3 else [6, 5, 7]
    rng = np.random.default_rng(nd)
    x = rng.standard_normal(([] if unbatched else [3]) + [4] + sp).astype(np.float32)
    _compare(fm, tm, x)


CONVT_CASES = [
    dict(), dict(stride=2), dict(stride=2, padding=1, output_padding=1), dict(groups=2),
    dict(dilation=2, padding=2), dict(stride=3, output_padding=2, bias=False),
    dict(stride=2, dilation=2, output_padding=1, groups=4),
    dict(dilation=3, padding=1, output_padding=2),
]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", CONVT_CASES, ids=[str(c) for c in CONVT_CASES])
def test_parity_conv_transpose(nd, kw, request):
    for m in parity:
        request.applymarker(m)
    if torch is None:
        pytest.skip("needs torch")
    fm = getattr(nn, f"ConvTranspose{nd}d")(4, 8, 3, **kw)
    tm = getattr(torch.nn, f"ConvTranspose{nd}d")(4, 8, 3, **kw)
    sp = [5, 4, 3][:nd]
    x = np.random.default_rng(nd).standard_normal([2, 4] + sp).astype(np.float32)
    _compare(fm, tm, x)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_parity_conv_transpose_output_size_and_repr():
    fm, tm = nn.ConvTranspose2d(4, 2, 3, stride=2), torch.nn.ConvTranspose2d(4, 2, 3, stride=2)
    x = np.random.default_rng(0).standard_normal((1, 4, 5, 5)).astype(np.float32)
    _compare(fm, tm, x, out_kwargs={"output_size": (12, 11)})
    for args, kw in [((3, 8, 3), dict(padding=1)), ((3, 8, (3, 5)), dict(stride=(2, 1),
                     dilation=2, groups=1, bias=False, padding_mode="reflect")),
                     ((4, 8, 3), dict(padding="same", groups=4))]:
        assert repr(nn.Conv2d(*args, **kw)) == repr(torch.nn.Conv2d(*args, **kw))
    assert repr(nn.ConvTranspose3d(4, 2, 3, 2, 1, 1, 2, False, 2)) == \
        repr(torch.nn.ConvTranspose3d(4, 2, 3, 2, 1, 1, 2, False, 2))


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("kw", [dict(), dict(dilation=2, padding=1, stride=2),
                                dict(padding=(1, 0), stride=(1, 2))])
def test_parity_fold_unfold(kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    u, tu = nn.Unfold((2, 3), **kw), torch.nn.Unfold((2, 3), **kw)
    fx, tx = fiamma.tensor(x).requires_grad_(), torch.tensor(x).requires_grad_()
    y, ty = u(fx), tu(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
    assert repr(u) == repr(tu)
    f, tf = nn.Fold((7, 6), (2, 3), **kw), torch.nn.Fold((7, 6), (2, 3), **kw)
    z, tz = f(y * 2), tf(ty * 2)
    np.testing.assert_allclose(z.detach().numpy(), tz.detach().numpy(), rtol=1e-5, atol=1e-5)
    z.sum().backward()
    tz.sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    # unbatched
    np.testing.assert_allclose(u(fiamma.tensor(x[0])).numpy(), tu(torch.tensor(x[0])).numpy(),
                               rtol=1e-6)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
def test_parity_functional_noncontiguous_and_double_backward():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 7, 4)).astype(np.float64)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float64)
    fx = fiamma.tensor(x).transpose(2, 3).requires_grad_()
    fw = fiamma.tensor(w).requires_grad_()
    tx = torch.tensor(x).transpose(2, 3).requires_grad_()
    tw = torch.tensor(w).requires_grad_()
    y = F.conv2d(fx, fw, None, 2, 1, 1, 2)
    ty = torch.nn.functional.conv2d(tx, tw, None, 2, 1, 1, 2)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10)
    gx, = fiamma.autograd.grad((y * y).sum(), (fx,), create_graph=True)
    tgx, = torch.autograd.grad((ty * ty).sum(), (tx,), create_graph=True)
    gx.sum().backward()
    tgx.sum().backward()
    np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parity
def test_profiler_with_flops_conv_parity():
    # the profiler's FLOP estimate of F.conv2d (stride, padding, groups) is PyTorch's;
    # conv1d, conv3d and the transposed convolutions carry none, in both
    torch = pytest.importorskip("torch")
    import fiamma.profiler

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 11, 9)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    x1 = rng.standard_normal((2, 4, 9)).astype(np.float32)
    w1 = rng.standard_normal((3, 4, 3)).astype(np.float32)
    wt = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def run(lib, F, tensor):
        with lib.profiler.profile(with_flops=True) as p:
            F.conv2d(tensor(x), tensor(w), groups=2, stride=2, padding=1)
            F.conv2d(tensor(x), tensor(w[:, :1].repeat(4, 1)), dilation=2)
            F.conv1d(tensor(x1), tensor(w1))
            F.conv3d(tensor(x[None]), tensor(w[:, :, None].repeat(4, 2)))
            F.conv_transpose2d(tensor(x), tensor(wt))
        return {a.key: a.flops for a in p.key_averages() if a.flops}

    got = run(fiamma, F, fiamma.tensor)
    want = run(torch, torch.nn.functional, torch.from_numpy)
    assert got == want and got["aten::conv2d"] > 0
