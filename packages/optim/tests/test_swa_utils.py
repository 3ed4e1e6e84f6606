"""swa_utils: averaging functions, AveragedModel, update_bn and SWALR."""

import numpy as np
import pytest

import fiamma
from fiamma import optim
from fiamma.optim import swa_utils as SW

try:
    import torch
except ImportError:
    torch = None


class FakeBN:
    """The BatchNorm interface update_bn relies on (running stats with cumulative averaging
    when momentum is None)."""

    def __init__(self):
        self.running_mean = fiamma.zeros(2)
        self.momentum = 0.1
        self.training = True
        self.seen = 0

    def reset_running_stats(self):
        self.running_mean.zero_()
        self.seen = 0

    def __call__(self, x):
        if self.training:
            mean = x.mean(0)
            self.seen += 1
            m = self.momentum if self.momentum is not None else 1.0 / self.seen
            self.running_mean.mul_(1 - m).add_(mean * m)
        return x


class Net:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.w = fiamma.tensor(rng.standard_normal((3, 2)))
        self.b = fiamma.tensor(rng.standard_normal(2))
        self.bn = FakeBN()
        self.training = True

    def parameters(self):
        return iter([self.w, self.b])

    def buffers(self):
        return iter([self.bn.running_mean])

    def modules(self):
        return iter([self, self.bn])

    def train(self, mode=True):
        self.training = self.bn.training = mode
        return self

    def state_dict(self):
        return {"w": self.w, "b": self.b, "bn.running_mean": self.bn.running_mean}

    def __call__(self, x):
        return self.bn(x @ self.w + self.b)


def _models(n):
    return [Net(seed) for seed in range(n)]


def test_swa_average_equals_mean():
    models = _models(4)
    swa = SW.AveragedModel(models[0])
    for m in models:
        swa.update_parameters(m)
    assert swa.n_averaged.item() == 4
    np.testing.assert_allclose(swa.module.w.numpy(), np.mean([m.w.numpy() for m in models], 0),
                               rtol=1e-12)
    # buffers follow the last model unless use_buffers
    np.testing.assert_array_equal(swa.module.bn.running_mean.numpy(),
                                  models[-1].bn.running_mean.numpy())
    assert swa.module.w is not models[0].w  # a deep copy


@pytest.mark.parametrize("multi", [False, True])
def test_ema(multi):
    models = _models(3)
    decay = 0.9
    kw = ({"multi_avg_fn": SW.get_ema_multi_avg_fn(decay)} if multi
          else {"avg_fn": SW.get_ema_avg_fn(decay)})
    ema = SW.AveragedModel(models[0], use_buffers=True, **kw)
    ref = models[0].w.numpy().copy()
    for i, m in enumerate(models):
        ema.update_parameters(m)
        if i:
            ref = decay * ref + (1 - decay) * m.w.numpy()
    np.testing.assert_allclose(ema.module.w.numpy(), ref, rtol=1e-12)


def test_swa_multi_avg_fn_matches_avg_fn():
    models = _models(5)
    a = SW.AveragedModel(models[0])
    b = SW.AveragedModel(models[0], multi_avg_fn=SW.get_swa_multi_avg_fn())
    for m in models:
        a.update_parameters(m)
        b.update_parameters(m)
    # the multi form lerps by 1 / (n + 1) computed in float32 (PyTorch's), hence 1e-7
    np.testing.assert_allclose(a.module.b.numpy(), b.module.b.numpy(), rtol=1e-7)


def test_state_dict_keys_and_forward():
    m = Net()
    swa = SW.AveragedModel(m)
    swa.update_parameters(m)
    assert set(swa.state_dict()) == {"n_averaged", "module.w", "module.b",
                                     "module.bn.running_mean"}
    x = fiamma.ones(4, 3, dtype=fiamma.float64)
    np.testing.assert_allclose(swa(x).numpy(), m(x).numpy())
    with pytest.raises(ValueError, match="tensors to average"):
        class Other(Net):
            def parameters(self):
                return iter([self.w])
        swa.update_parameters(Other())


def test_update_bn_recomputes_running_stats():
    m = Net()
    data = [fiamma.tensor(np.full((4, 3), float(i))) for i in range(1, 4)]
    m.train(False)
    SW.update_bn(data, m)
    outs = [(d @ m.w + m.b).numpy().mean(0) for d in data]
    np.testing.assert_allclose(m.bn.running_mean.numpy(), np.mean(outs, 0), rtol=1e-6)
    assert m.bn.momentum == 0.1 and m.training is False


def test_swalr_sequence():
    opt = optim.SGD([fiamma.zeros(1)], lr=1.0)
    sched = SW.SWALR(opt, swa_lr=0.1, anneal_epochs=4, anneal_strategy="linear")
    lrs = []
    for _ in range(6):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    # linear: from 1 towards 0.1, reached after the 4 annealing epochs, then held
    assert lrs[0] > lrs[1] > lrs[2] > 0.1
    assert lrs[3:] == pytest.approx([0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="anneal_strategy"):
        SW.SWALR(opt, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs"):
        SW.SWALR(opt, 0.1, anneal_epochs=-1)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("kw", [dict(swa_lr=0.05, anneal_epochs=5),
                                dict(swa_lr=[0.05, 0.2], anneal_epochs=3,
                                     anneal_strategy="linear"),
                                dict(swa_lr=0.3, anneal_epochs=0)])
def test_swalr_equals_pytorch(kw):
    seqs = []
    for lib, mod in (("f", optim), ("t", torch.optim)):
        ps = [fiamma.zeros(1), fiamma.zeros(1)] if lib == "f" else [torch.zeros(1),
                                                                     torch.zeros(1)]
        opt = mod.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5}], lr=1.0)
        sched = (SW if lib == "f" else torch.optim.swa_utils).SWALR(opt, **kw)
        seq = []
        for _ in range(8):
            opt.step()
            sched.step()
            seq.append([float(g["lr"]) for g in opt.param_groups])
        seqs.append(seq)
    np.testing.assert_allclose(seqs[0], seqs[1], rtol=1e-12)


def test_averaged_model_of_an_nn_module_is_an_nn_module():
    nn = pytest.importorskip("fiamma.nn")
    import copy
    import pickle

    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    ema = SW.AveragedModel(net, multi_avg_fn=SW.get_ema_multi_avg_fn(0.5))
    assert isinstance(ema, SW.AveragedModel) and isinstance(ema, nn.Module)
    assert type(ema).__name__ == "AveragedModel" and repr(ema).startswith("AveragedModel(")
    assert list(ema.state_dict())[:2] == ["n_averaged", "module.0.weight"]
    assert len(list(ema.modules())) == 4 and len(list(ema.named_parameters())) == 4
    ema.update_parameters(net)
    with fiamma.no_grad():
        net[0].weight.add_(1.0)
    ema.update_parameters(net)
    np.testing.assert_allclose(ema.module[0].weight.detach().numpy(),
                               net[0].weight.detach().numpy() - 0.5,
                               rtol=1e-6)
    SW.update_bn([fiamma.randn(5, 3) for _ in range(2)], ema)  # walks ema.modules()
    assert int(ema.module[1].num_batches_tracked) == 2
    plain = SW.AveragedModel(net)
    back = pickle.loads(pickle.dumps(plain))
    assert type(back) is type(plain) and int(back.n_averaged) == 0
    assert type(copy.deepcopy(ema)) is type(ema)
    assert ema.eval() is ema and not ema.module.training


def test_multi_ema_with_integer_buffers():
    """use_buffers averages an integer buffer (num_batches_tracked) too: multi_avg_fn is
    called once per dtype, and the EMA of integers is the weighted sum cast back (as in
    PyTorch, where lerp handles only floating tensors)."""
    nn = pytest.importorskip("fiamma.nn")
    net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).double()
    ema = SW.AveragedModel(net, multi_avg_fn=SW.get_ema_multi_avg_fn(0.5), use_buffers=True)
    ema.update_parameters(net)
    for _ in range(3):
        net(fiamma.ones(4, 2, dtype=fiamma.float64))
    w0 = ema.module[0].weight.detach().numpy().copy()
    with fiamma.no_grad():
        net[0].weight.add_(1.0)
    ema.update_parameters(net)
    assert int(ema.module[1].num_batches_tracked) == 1  # int(0 * 0.5 + 3 * 0.5)
    np.testing.assert_allclose(ema.module[0].weight.detach().numpy(),
                               0.5 * w0 + 0.5 * net[0].weight.detach().numpy(), rtol=1e-12)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("kind", ["swa", "ema"])
def test_multi_avg_fns_equal_pytorch(kind):
    """PyTorch's averages to 1e-13 (a float64 weight would differ at 1e-8): the multi SWA
    lerps by 1 / (n + 1) computed in float32 (n is a tensor), the multi EMA handles integer
    buffers."""
    nn = pytest.importorskip("fiamma.nn")
    out = []
    start = None
    for lib, tnn, sw in ((torch, torch.nn, torch.optim.swa_utils), (fiamma, nn, SW)):
        torch.manual_seed(0)
        net = tnn.Sequential(tnn.Linear(3, 2), tnn.BatchNorm1d(2)).double()
        if lib is fiamma:
            net.load_state_dict({k: fiamma.tensor(v) for k, v in start.items()})
        else:
            start = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
        fn = sw.get_swa_multi_avg_fn() if kind == "swa" else sw.get_ema_multi_avg_fn(0.7)
        avg = sw.AveragedModel(net, multi_avg_fn=fn, use_buffers=kind == "ema")
        steps = np.random.default_rng(1).standard_normal((6, 4, 3))
        for x in steps:
            net(lib.tensor(x))
            with lib.no_grad():
                for p in net.parameters():
                    p.mul_(0.9).add_(0.3)
            avg.update_parameters(net)
        out.append([v.detach().numpy() for v in avg.state_dict().values()])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
