"""MobileNetV3-Large quantization-aware training and ``quantize=True`` against torchvision:
the QAT-prepared models have the same state (keys, dtypes, shapes); with torchvision's QAT
state loaded, train-mode outputs and gradients agree, the int8 models after convert agree
within a quantum, and a torch-saved QAT checkpoint loads into fiamma's ``quantize=True``
builder from a local path."""
import warnings

import numpy as np
import pytest
from _tv_import import tv_import

import fiamma
import fiamma.ao.quantization as tq
from fiamma.vision.models import quantization as Q

pytestmark = pytest.mark.parity


def _tv():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    TQ = tv_import("torchvision.models.quantization")
    if TQ is None:
        pytest.skip("torchvision is not installed (or cannot be imported)")
    return torch, TQ

def _f(t):
    return fiamma.tensor(t.detach().numpy())


def _randomise_bn(model, torch):
    g = torch.Generator().manual_seed(5)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)


def _prepared_pair(torch, TQ, num_classes=10):
    import torch.ao.quantization as ttq
    torch.manual_seed(0)
    tm = TQ.mobilenet_v3_large(quantize=False, num_classes=num_classes)
    _randomise_bn(tm, torch)
    fm = Q.mobilenet_v3_large(quantize=False, num_classes=num_classes)
    fm.load_state_dict({k: _f(v) for k, v in tm.state_dict().items()})
    tm.train()
    fm.train()
    tm.fuse_model(is_qat=True)
    fm.fuse_model(is_qat=True)
    tm.qconfig = ttq.get_default_qat_qconfig("qnnpack")
    fm.qconfig = tq.get_default_qat_qconfig("qnnpack")
    ttq.prepare_qat(tm, inplace=True)
    tq.prepare_qat(fm, inplace=True)
    tm.classifier[2].p = 0.0  # dropout draws differ between the libraries
    fm.classifier[2].p = 0.0
    return tm, fm


def _int8_blocks_match(torch, tq_, fq_, x):
    """Each int8 block of fiamma's model, fed torch's quantized block input, gives torch's
    int8 output up to a rounding step or two on a few values: fiamma requantizes in float,
    qnnpack in fixed point, and its Hardswish/Hardsigmoid use lookup tables. End to end these
    add up to a few output quanta, so the whole model is compared by the mean."""
    seen = {}
    names = [f"features.{i}" for i in range(len(tq_.features))] + ["classifier"]
    hooks = [tq_.get_submodule(n).register_forward_hook(
        lambda m, i, o, n=n: seen.__setitem__(n, (i[0], o))) for n in names]
    to = tq_(torch.from_numpy(x)).numpy()
    for h in hooks:
        h.remove()
    for n in names:
        ti, tout = seen[n]
        fi = fiamma.quantize_per_tensor(fiamma.tensor(ti.dequantize().numpy()),
                                        float(ti.q_scale()), int(ti.q_zero_point()),
                                        fiamma.quint8)
        fout = fq_.get_submodule(n)(fi)
        assert fout.q_scale() == pytest.approx(float(tout.q_scale()), rel=1e-6), n
        d = np.abs(fout.int_repr().numpy().astype(int) - tout.int_repr().numpy())
        assert d.max() <= 2 and (d > 0).mean() <= 0.02, (n, d.max(), (d > 0).mean())
    fo = fq_(fiamma.tensor(x)).numpy()
    d = np.abs(to - fo) / float(tq_.classifier[3].scale)
    assert d.mean() <= 2.5 and d.max() <= 8, (d.mean(), d.max())
    return fo


def test_mobilenet_v3_qat_train_step_and_int8_match_torchvision():
    torch, TQ = _tv()
    import torch.ao.quantization as ttq
    tm, fm = _prepared_pair(torch, TQ)
    ts, fs = tm.state_dict(), fm.state_dict()
    assert sorted(ts) == sorted(fs)
    for k, v in ts.items():
        assert str(fs[k].dtype).split(".")[-1] == str(v.dtype).split(".")[-1], k
        assert tuple(fs[k].shape) == tuple(v.shape), k
    rng = np.random.default_rng(0)
    x = rng.random((4, 3, 64, 64), dtype=np.float32)
    # 1. everything fake-quantized: a value within float noise of a rounding boundary may
    # round the other way, and in training mode the batch statistics carry one such flip to
    # every later value, so the comparison is per block, each fed torch's block input: its
    # output agrees within a flipped quantum before a Hardswish (slope <= 1.5) and one after
    # it (2.5 of the block's largest fake-quantizer scale), and most blocks agree exactly
    seen = {}
    names = [f"features.{i}" for i in range(len(tm.features))] + ["classifier"]

    def keep(n):
        def hook(mod, inp, out):
            seen[n] = (inp[0].detach().numpy().copy(), out.detach().numpy().copy())
        return hook
    hooks = [tm.get_submodule(n).register_forward_hook(keep(n)) for n in names]
    tm(torch.from_numpy(x))
    for h in hooks:
        h.remove()
    exact = 0
    for n in names:
        tin, tout = seen[n]
        fout = fm.get_submodule(n)(fiamma.tensor(tin)).detach().numpy()
        fqs = [m for k, m in tm.get_submodule(n).named_modules()
               if k.endswith("activation_post_process") and hasattr(m, "scale")]
        d = np.abs(fout - tout)
        bound = 2.5 * max(float(m.scale.max()) for m in fqs)
        assert d.max() <= bound, (n, d.max() / bound)
        exact += int(d.max() <= 1e-5)
    assert exact >= len(names) // 2, exact
    # 2. weights fake-quantized, activations observed only: float noise cannot flip a
    # rounding, so outputs, every gradient and the observed state agree closely
    for lib, m in ((ttq, tm), (tq, fm)):
        for n, mod in m.named_modules():
            if n.endswith("activation_post_process") and hasattr(mod, "disable_fake_quant"):
                mod.disable_fake_quant()
    # (the same observed state in both: torch's loaded into fiamma, by key)
    fm.load_state_dict({k: _f(v) for k, v in tm.state_dict().items()})
    tm.zero_grad()
    fm.zero_grad()
    to = tm(torch.from_numpy(x))
    fo = fm(fiamma.tensor(x))
    # (a folded weight within float noise of a rounding boundary still may flip: 1e-3 of the
    # output range)
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), rtol=1e-4,
                               atol=1e-3 * np.abs(to.detach().numpy()).max())
    to.square().sum().backward()
    fo.square().sum().backward()
    fp = dict(fm.named_parameters())
    # (a batch norm's bias feeding an unpadded conv and another training-mode batch norm
    # has a gradient of pure rounding noise: errors are measured against the largest
    # gradient entry of the model)
    scale = max(float(np.abs(p.grad.numpy()).max()) for p in tm.parameters())
    worst = {k: float(np.abs(fp[k].grad.numpy() - p.grad.numpy()).max()) / scale
             for k, p in tm.named_parameters()}
    assert max(worst.values()) < 1e-3, sorted(worst.items(), key=lambda kv: -kv[1])[:3]
    assert np.median(list(worst.values())) < 1e-5
    fs = fm.state_dict()
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(fs[k].numpy().astype(np.float64),
                                   v.numpy().astype(np.float64), rtol=2e-3, atol=1e-4,
                                   err_msg=k)
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    try:
        tq_ = ttq.convert(tm.eval())
        fq_ = tq.convert(fm.eval())
        x = rng.random((2, 3, 64, 64), dtype=np.float32)
        ts, fs = tq_.state_dict(), fq_.state_dict()
        assert sorted(ts) == sorted(fs)
        flips = total = 0
        for k, v in ts.items():  # the converted int8 weights and qparams are torch's
            if k.endswith("scale"):
                np.testing.assert_allclose(float(fs[k]), float(v), rtol=1e-5, err_msg=k)
            elif k.endswith("zero_point"):
                assert int(fs[k]) == int(v), k
            elif k.endswith("weight") and hasattr(v, "int_repr"):
                d = np.abs(fs[k].int_repr().numpy().astype(int) - v.int_repr().numpy())
                assert d.max() <= 1, k  # a folded weight on a rounding boundary
                flips += int((d > 0).sum())
                total += d.size
        assert flips <= 1e-4 * total, (flips, total)
        _int8_blocks_match(torch, tq_, fq_, x)
    finally:
        torch.backends.quantized.engine = old


def test_torch_saved_qat_checkpoint_loads_into_quantize_true(tmp_path):
    torch, TQ = _tv()
    import torch.ao.quantization as ttq
    tm, _ = _prepared_pair(torch, TQ)
    rng = np.random.default_rng(1)
    tm(torch.from_numpy(rng.random((4, 3, 64, 64), dtype=np.float32)))
    path = tmp_path / "mobilenet_v3_qat.pth"
    torch.save(tm.state_dict(), path)
    fm = Q.mobilenet_v3_large(weights=str(path), quantize=True, num_classes=10)
    fm2 = Q.mobilenet_v3_large(weights=fiamma.load(str(path)), quantize=True, num_classes=10)
    assert not fm.training and type(fm.quant).__name__ == "Quantize"
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    try:
        tq_ = ttq.convert(tm)  # torchvision's quantize=True: convert in train mode, then eval
        tq_.eval()
        x = rng.random((2, 3, 64, 64), dtype=np.float32)
        fo = _int8_blocks_match(torch, tq_, fm, x)
        np.testing.assert_array_equal(fm2(fiamma.tensor(x)).numpy(), fo)
    finally:
        torch.backends.quantized.engine = old
    with pytest.raises(ValueError, match="backend"):
        Q.mobilenet_v3_large(weights=Q.MobileNet_V3_Large_QuantizedWeights.DEFAULT,
                             quantize=True, backend="fbgemm")
