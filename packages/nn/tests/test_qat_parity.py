"""Quantization-aware training against PyTorch: the same model prepared by both libraries has
the same state-dict keys, dtypes and shapes; with torch's state loaded, train-mode outputs,
every parameter's gradient (fake-quant masks included), a few SGD steps and the int8 model
after convert agree."""
import copy
import io
import warnings

import numpy as np
import pytest

import fiamma
import fiamma.ao.quantization as tq
from fiamma import nn

pytestmark = pytest.mark.parity


def _torch():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    return torch


def _f(t):
    return fiamma.tensor(t.detach().numpy())


def _load_torch_state(fmod, tmod):
    fmod.load_state_dict({k: _f(v) for k, v in tmod.state_dict().items()})


def _check_state(fmod, tmod):
    fs, ts = fmod.state_dict(), tmod.state_dict()
    assert sorted(fs) == sorted(ts)
    for k, v in ts.items():
        assert str(fs[k].dtype).split(".")[-1] == str(v.dtype).split(".")[-1], k
        assert tuple(fs[k].shape) == tuple(v.shape), k


def _compare_state_values(fmod, tmod, rtol=1e-5, atol=1e-6):
    fs = fmod.state_dict()
    for k, v in tmod.state_dict().items():
        np.testing.assert_allclose(fs[k].numpy().astype(np.float64),
                                   v.detach().numpy().astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=k)


def _small_pair(torch, backend, version=1):
    import torch.ao.quantization as ttq

    def build(lib, q):
        m = lib.nn.Sequential(
            q.QuantStub(), lib.nn.Conv2d(3, 8, 3, padding=1, bias=False),
            lib.nn.BatchNorm2d(8), lib.nn.ReLU(), lib.nn.Conv2d(8, 8, 3, groups=2),
            lib.nn.BatchNorm2d(8), lib.nn.Conv2d(8, 6, 1), lib.nn.ReLU(), lib.nn.Hardsigmoid(),
            lib.nn.Flatten(), lib.nn.Linear(6 * 6 * 6, 10), lib.nn.ReLU(), lib.nn.Linear(10, 4),
            q.DeQuantStub())
        return m.train()
    torch.manual_seed(0)
    tm = build(torch, ttq)
    fm = build(fiamma, tq)
    fm.load_state_dict({k: _f(v) for k, v in tm.state_dict().items()})
    groups = [["1", "2", "3"], ["4", "5"], ["6", "7"], ["10", "11"]]
    ttq.fuse_modules_qat(tm, groups, inplace=True)
    tq.fuse_modules_qat(fm, groups, inplace=True)
    tm.qconfig = ttq.get_default_qat_qconfig(backend, version)
    fm.qconfig = tq.get_default_qat_qconfig(backend, version)
    ttq.prepare_qat(tm, inplace=True)
    tq.prepare_qat(fm, inplace=True)
    return tm, fm


def _grads_close(fm, tm, rtol=2e-4, atol=2e-5):
    fp = dict(fm.named_parameters())
    n = 0
    for k, p in tm.named_parameters():
        if p.grad is None:
            assert fp[k].grad is None, k
            continue
        np.testing.assert_allclose(fp[k].grad.numpy(), p.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=k)
        n += 1
    return n


@pytest.mark.parametrize("backend,version", [("qnnpack", 1), ("x86", 1), ("x86", 0)])
def test_small_qat_model_matches_torch(backend, version):
    torch = _torch()
    import torch.ao.nn.intrinsic.qat as tniqat
    import torch.ao.quantization as ttq

    import fiamma.ao.nn.intrinsic.qat as nniqat
    tm, fm = _small_pair(torch, backend, version)
    _check_state(fm, tm)
    assert [type(m).__name__ for m in fm] == [type(m).__name__ for m in tm]
    rng = np.random.default_rng(0)
    topt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    fopt = fiamma.optim.SGD(fm.parameters(), lr=0.05, momentum=0.9)
    for step in range(4):
        x = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
        target = rng.integers(0, 4, 4)
        to = tm(torch.from_numpy(x))
        fo = fm(fiamma.tensor(x))
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
        tl = torch.nn.functional.cross_entropy(to, torch.from_numpy(target))
        fl = fiamma.nn.functional.cross_entropy(fo, fiamma.tensor(target))
        topt.zero_grad()
        fopt.zero_grad()
        tl.backward()
        fl.backward()
        assert _grads_close(fm, tm) == len(list(tm.parameters()))
        topt.step()
        fopt.step()
        _compare_state_values(fm, tm, rtol=1e-4, atol=1e-5)
        if step == 1:  # PyTorch's tutorial: freeze the observers and BN statistics
            tm.apply(ttq.disable_observer)
            fm.apply(tq.disable_observer)
            tm.apply(tniqat.freeze_bn_stats)
            fm.apply(nniqat.freeze_bn_stats)
    tm.eval()
    fm.eval()
    x = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(fm(fiamma.tensor(x)).detach().numpy(),
                               tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = backend
    try:
        tq_ = ttq.convert(tm)
        fq_ = tq.convert(fm)
        assert [type(m).__name__ for m in fq_] == [type(m).__name__ for m in tq_]
        to = tq_(torch.from_numpy(x)).numpy()
        fo = fq_(fiamma.tensor(x)).numpy()
        assert np.abs(to - fo).max() <= 1.01 * float(tq_[12].scale)
        ts = tq_.state_dict()
        fs = fq_.state_dict()
        assert sorted(ts) == sorted(fs)
        np.testing.assert_array_equal(fs["1.weight"].int_repr().numpy(),
                                      ts["1.weight"].int_repr().numpy())
    finally:
        torch.backends.quantized.engine = old


def test_torch_qat_state_loads_into_fiamma_and_back():
    torch = _torch()
    tm, fm = _small_pair(torch, "qnnpack")
    x = torch.randn(2, 3, 8, 8)
    tm(x)  # observed state
    buf = io.BytesIO()
    torch.save(tm.state_dict(), buf)
    buf.seek(0)
    fm.load_state_dict(fiamma.load(buf))
    _compare_state_values(fm, tm)
    # and fiamma's state loads into torch by key
    t2 = copy.deepcopy(tm)
    t2.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                        for k, v in fm.state_dict().items()})


def test_fake_quantize_functions_and_masks_match_torch():
    torch = _torch()
    from fiamma.ao.quantization import _fq_ops
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 5, 4)) * 3).astype(np.float32)
    x[0, 0, :2] = [0.25, 0.35]  # ties of x / 0.1
    tx = torch.tensor(x, requires_grad=True)
    fx = fiamma.tensor(x, requires_grad=True)
    ty = torch.fake_quantize_per_tensor_affine(tx, 0.1, 7, 0, 40)
    fy = _fq_ops.fake_quantize_per_tensor_affine(fx, 0.1, 7, 0, 40)
    np.testing.assert_array_equal(fy.detach().numpy(), ty.detach().numpy())
    g = rng.standard_normal(x.shape).astype(np.float32)
    ty.backward(torch.tensor(g))
    fy.backward(fiamma.tensor(g))
    np.testing.assert_array_equal(fx.grad.numpy(), tx.grad.numpy())
    sc = np.array([0.1, 0.3, 0.05, 0.2, 0.7], np.float32)
    zp = np.array([0, -3, 5, 1, 0], np.int32)
    tx.grad = None
    fx.grad = None
    ty = torch.fake_quantize_per_channel_affine(tx, torch.tensor(sc), torch.tensor(zp), 1,
                                                -10, 10)
    fy = _fq_ops.fake_quantize_per_channel_affine(fx, fiamma.tensor(sc), fiamma.tensor(zp), 1,
                                                  -10, 10)
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=0, atol=1e-6)
    ty.backward(torch.tensor(g))
    fy.backward(fiamma.tensor(g))
    np.testing.assert_array_equal(fx.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("kind", ["act", "wt", "per_channel_wt"])
def test_fused_fake_quant_qparams_match_torch(kind):
    torch = _torch()
    import torch.ao.quantization as ttq
    tf = getattr(ttq, f"default_fused_{kind}_fake_quant")()
    ff = getattr(tq, f"default_fused_{kind}_fake_quant")()
    rng = np.random.default_rng(2)
    for scale, shift in [(1.0, 0.0), (0.01, 0.5), (3.0, -1.0), (1e-6, 0.0), (0.0, 0.2)]:
        x = (rng.standard_normal((6, 4, 3)) * scale + shift).astype(np.float32)
        tx = torch.tensor(x, requires_grad=True)
        fx = fiamma.tensor(x, requires_grad=True)
        ty, fy = tf(tx), ff(fx)
        np.testing.assert_array_equal(ff.scale.numpy(), tf.scale.numpy())
        np.testing.assert_array_equal(ff.zero_point.numpy(), tf.zero_point.numpy())
        np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=0, atol=1e-7)
        ty.sum().backward()
        fy.sum().backward()
        np.testing.assert_array_equal(fx.grad.numpy(), tx.grad.numpy())
    _check_state(ff, tf)
    ts, fs = tf.calculate_qparams(), ff.calculate_qparams()
    np.testing.assert_allclose(fs[0].numpy(), ts[0].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(fs[1].numpy(), ts[1].numpy())


def test_fixed_qparams_fake_quant_matches_torch():
    torch = _torch()
    import torch.ao.quantization as ttq
    for name in ("default_fixed_qparams_range_0to1_fake_quant",
                 "default_fixed_qparams_range_neg1to1_fake_quant"):
        tf, ff = getattr(ttq, name)(), getattr(tq, name)()
        _check_state(ff, tf)
        x = np.linspace(-1.5, 1.5, 41).astype(np.float32)
        tx = torch.tensor(x, requires_grad=True)
        fx = fiamma.tensor(x, requires_grad=True)
        ty, fy = tf(tx), ff(fx)
        np.testing.assert_array_equal(fy.detach().numpy(), ty.detach().numpy())
        ty.sum().backward()
        fy.sum().backward()
        np.testing.assert_array_equal(fx.grad.numpy(), tx.grad.numpy())


def test_qat_modules_from_float_to_float_match_torch():
    torch = _torch()
    import torch.ao.nn.qat as tnnqat

    import fiamma.ao.nn.qat as nnqat
    torch.manual_seed(3)
    tl = torch.nn.Linear(5, 3)
    fl = nn.Linear(5, 3)
    fl.load_state_dict({k: _f(v) for k, v in tl.state_dict().items()})
    import torch.ao.quantization as ttq
    tl.qconfig = ttq.default_qat_qconfig
    fl.qconfig = tq.default_qat_qconfig
    tq_, fq_ = tnnqat.Linear.from_float(tl), nnqat.Linear.from_float(fl)
    _check_state(fq_, tq_)
    x = np.random.default_rng(4).standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_allclose(fq_(fiamma.tensor(x)).detach().numpy(),
                               tq_(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    back = fq_.to_float()
    assert type(back) is nn.Linear
    np.testing.assert_array_equal(back.weight.detach().numpy(), tl.weight.detach().numpy())
