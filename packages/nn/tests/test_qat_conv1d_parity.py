"""Conv1d quantization-aware training against PyTorch: ``fuse_modules_qat`` of Conv1d + ReLU
(and Conv1d + BatchNorm1d + ReLU) -> ``prepare_qat`` -> ``convert`` gives the modules PyTorch's
gives, the same int8 weights and outputs within one quantum; ``nniqat.ConvReLU1d`` (kept out
of the default QAT mapping, as in PyTorch) through a custom mapping and directly."""
import warnings

import numpy as np
import pytest

import fiamma
import fiamma.ao.nn.intrinsic as nni
import fiamma.ao.nn.intrinsic.qat as nniqat
import fiamma.ao.nn.intrinsic.quantized as nniq
import fiamma.ao.quantization as tq
from fiamma import nn


def _torch():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    return torch


def _f(t):
    return fiamma.tensor(t.detach().numpy())


def _names(model):
    return [type(m).__name__ for m in model]


def _pair(torch, ttq, layers):
    def build(lib, q):
        return lib.nn.Sequential(q.QuantStub(), *layers(lib), q.DeQuantStub()).train()
    torch.manual_seed(0)
    tm, fm = build(torch, ttq), build(fiamma, tq)
    fm.load_state_dict({k: _f(v) for k, v in tm.state_dict().items()})
    return tm, fm


def _convert_and_compare(torch, ttq, tm, fm, backend, t_mapping=None):
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = backend
    try:
        tqm = ttq.convert(tm, mapping=t_mapping)
        fqm = tq.convert(fm)
        assert _names(fqm) == _names(tqm)
        ts, fs = tqm.state_dict(), fqm.state_dict()
        assert sorted(ts) == sorted(fs)
        n = 0
        for k, v in ts.items():
            if isinstance(v, torch.Tensor) and v.is_quantized:
                assert fs[k].is_quantized, k
                np.testing.assert_array_equal(fs[k].int_repr().numpy(), v.int_repr().numpy(),
                                              err_msg=k)
                n += 1
        assert n >= 2
        x = np.random.default_rng(9).standard_normal((4, 3, 12)).astype(np.float32)
        to = tqm(torch.from_numpy(x)).numpy()
        fo = fqm(fiamma.tensor(x)).numpy()
        assert np.abs(to - fo).max() <= 1.01 * float(tqm[-2].scale)
        return fqm
    finally:
        torch.backends.quantized.engine = old


def _train_steps(torch, tm, fm, steps=3):
    rng = np.random.default_rng(0)
    topt = torch.optim.SGD(tm.parameters(), lr=0.05)
    fopt = fiamma.optim.SGD(fm.parameters(), lr=0.05)
    for _ in range(steps):
        x = rng.standard_normal((4, 3, 12)).astype(np.float32)
        to, fo = tm(torch.from_numpy(x)), fm(fiamma.tensor(x))
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
        topt.zero_grad()
        fopt.zero_grad()
        (to ** 2).mean().backward()
        (fo ** 2).mean().backward()
        topt.step()
        fopt.step()
    tm.eval()
    fm.eval()


@pytest.mark.parity
@pytest.mark.parametrize("backend", ["qnnpack", "x86"])
def test_fused_conv1d_relu_qat_pipeline_matches_torch(backend):
    torch = _torch()
    import torch.ao.nn.intrinsic as tnni
    import torch.ao.nn.intrinsic.qat as tniqat
    import torch.ao.quantization as ttq
    tm, fm = _pair(torch, ttq, lambda lib: [
        lib.nn.Conv1d(3, 6, 3, padding=1), lib.nn.ReLU(),
        lib.nn.Conv1d(6, 6, 3, bias=False), lib.nn.BatchNorm1d(6), lib.nn.ReLU(),
        lib.nn.Conv1d(6, 4, 1)])
    groups = [["1", "2"], ["3", "4", "5"]]
    ttq.fuse_modules_qat(tm, groups, inplace=True)
    tq.fuse_modules_qat(fm, groups, inplace=True)
    assert type(fm[1]) is nni.ConvReLU1d and type(fm[3]) is nni.ConvBnReLU1d
    assert _names(fm) == _names(tm)
    tm.qconfig = ttq.get_default_qat_qconfig(backend)
    fm.qconfig = tq.get_default_qat_qconfig(backend)
    ttq.prepare_qat(tm, inplace=True)
    tq.prepare_qat(fm, inplace=True)
    # PyTorch's default QAT mapping keeps a fused Conv1d + ReLU float (observed at its output)
    # and swaps Conv1d + BatchNorm1d + ReLU for the QAT ConvBnReLU1d; fiamma's does the same
    assert type(fm[1]) is nni.ConvReLU1d and type(fm[3]) is nniqat.ConvBnReLU1d
    assert type(tm[1]) is tnni.ConvReLU1d and type(tm[3]) is tniqat.ConvBnReLU1d
    assert sorted(fm.state_dict()) == sorted(tm.state_dict())
    _train_steps(torch, tm, fm)
    fqm = _convert_and_compare(torch, ttq, tm, fm, backend)
    assert type(fqm[1]) is nniq.ConvReLU1d and type(fqm[3]) is nniq.ConvReLU1d


@pytest.mark.parity
def test_qat_conv_relu1d_by_custom_mapping_matches_torch():
    torch = _torch()
    import torch.ao.nn.intrinsic as tnni
    import torch.ao.nn.intrinsic.qat as tniqat
    import torch.ao.nn.intrinsic.quantized as tniq
    import torch.ao.quantization as ttq
    from torch.ao.quantization import quantization_mappings as tmaps
    tm, fm = _pair(torch, ttq, lambda lib: [
        lib.nn.Conv1d(3, 6, 3, padding=1, stride=2), lib.nn.ReLU(), lib.nn.Conv1d(6, 4, 1)])
    ttq.fuse_modules_qat(tm, [["1", "2"]], inplace=True)
    tq.fuse_modules_qat(fm, [["1", "2"]], inplace=True)
    tm.qconfig = ttq.get_default_qat_qconfig("x86")
    fm.qconfig = tq.get_default_qat_qconfig("x86")
    t_qat = {**tmaps.get_default_qat_module_mappings(), tnni.ConvReLU1d: tniqat.ConvReLU1d}
    f_qat = {**tq.get_default_qat_module_mappings(), nni.ConvReLU1d: nniqat.ConvReLU1d}
    ttq.prepare_qat(tm, mapping=t_qat, inplace=True)
    tq.prepare_qat(fm, mapping=f_qat, inplace=True)
    assert type(tm[1]) is tniqat.ConvReLU1d and type(fm[1]) is nniqat.ConvReLU1d
    assert sorted(fm.state_dict()) == sorted(tm.state_dict())
    _train_steps(torch, tm, fm)
    # PyTorch's static table has no entry for its QAT ConvReLU1d (fiamma's does)
    t_static = {**tmaps.get_default_static_quant_module_mappings(),
                tniqat.ConvReLU1d: tniq.ConvReLU1d}
    fqm = _convert_and_compare(torch, ttq, tm, fm, "x86", t_mapping=t_static)
    assert type(fqm[1]) is nniq.ConvReLU1d


@pytest.mark.parity
def test_qat_conv_relu1d_module_matches_torch():
    torch = _torch()
    import torch.ao.nn.intrinsic as tnni
    import torch.ao.nn.intrinsic.qat as tniqat
    import torch.ao.quantization as ttq
    torch.manual_seed(2)
    tf = tnni.ConvReLU1d(torch.nn.Conv1d(2, 3, 3, dilation=2, groups=1), torch.nn.ReLU())
    ff = nni.ConvReLU1d(nn.Conv1d(2, 3, 3, dilation=2), nn.ReLU())
    ff.load_state_dict({k: _f(v) for k, v in tf.state_dict().items()})
    tf.qconfig = tf[0].qconfig = ttq.default_qat_qconfig     # (torch reads the conv's)
    ff.qconfig = tq.default_qat_qconfig
    tq_, fq_ = tniqat.ConvReLU1d.from_float(tf), nniqat.ConvReLU1d.from_float(ff)
    assert sorted(fq_.state_dict()) == sorted(tq_.state_dict())
    assert fq_.dilation == (2,) and fq_.kernel_size == (3,)
    x = np.random.default_rng(4).standard_normal((2, 2, 9)).astype(np.float32)
    to, fo = tq_(torch.tensor(x)), fq_(fiamma.tensor(x))
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert (fo.detach().numpy() >= 0).all()
    back = fq_.to_float()
    assert type(back) is nni.ConvReLU1d and type(back[0]) is nn.Conv1d
    np.testing.assert_array_equal(back[0].weight.detach().numpy(),
                                  tf[0].weight.detach().numpy())


def test_qat_conv_relu_family_exists_and_needs_a_qconfig():
    for name in ("ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "ConvBn1d", "ConvBnReLU1d"):
        assert name in nniqat.__all__ and isinstance(getattr(nniqat, name), type)
    m = nniqat.ConvReLU1d(2, 3, 3, qconfig=tq.default_qat_qconfig)
    assert isinstance(m, nn.Conv1d) and m.weight_fake_quant is not None
    assert m(fiamma.randn(1, 2, 5)).shape == (1, 3, 3)
    with pytest.raises((ValueError, AssertionError, TypeError), match="qconfig"):
        nniqat.ConvReLU1d(2, 3, 3)
    assert tq.get_default_static_quant_module_mappings()[nniqat.ConvReLU1d] is nniq.ConvReLU1d
    assert nni.ConvReLU1d not in tq.get_default_qat_module_mappings()
