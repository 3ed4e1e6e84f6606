"""Lazy modules (nn.LazyLinear, LazyConvNd, LazyConvTransposeNd, LazyBatchNormNd,
LazyInstanceNormNd): shapes read from the first input, the placeholders' behaviour before it,
state dicts both ways, copies, casts, and PyTorch parity of the reprs and shapes."""

import copy
import io
import pickle

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy


def test_lazy_linear_becomes_linear_with_the_eager_initialisation():
    x = fiamma.randn(5, 3)
    fiamma.manual_seed(7)
    lazy = nn.LazyLinear(4)
    assert lazy.has_uninitialized_params() and is_lazy(lazy.weight)
    assert repr(lazy) == "LazyLinear(in_features=0, out_features=4, bias=True)"
    y = lazy(x)
    fiamma.manual_seed(7)
    eager = nn.Linear(3, 4)
    assert type(lazy) is nn.Linear and not is_lazy(lazy.weight)
    assert isinstance(lazy.weight, nn.Parameter) and lazy.weight.requires_grad
    assert lazy.in_features == 3 and tuple(lazy.weight.shape) == (4, 3)
    np.testing.assert_array_equal(lazy.weight.detach().numpy(), eager.weight.detach().numpy())
    np.testing.assert_array_equal(lazy.bias.detach().numpy(), eager.bias.detach().numpy())
    np.testing.assert_allclose(y.detach().numpy(), eager(x).detach().numpy(), rtol=1e-6)
    assert not lazy._forward_pre_hooks and not lazy._load_state_dict_pre_hooks


@pytest.mark.parametrize("cls,kw,x,wshape,out", [
    (nn.LazyConv1d, dict(out_channels=4, kernel_size=3, groups=2), (2, 6, 9), (4, 3, 3),
     (2, 4, 7)),
    (nn.LazyConv2d, dict(out_channels=8, kernel_size=3, padding=1), (3, 5, 5), (8, 3, 3, 3),
     (8, 5, 5)),
    (nn.LazyConv3d, dict(out_channels=2, kernel_size=1, bias=False), (1, 2, 3, 3, 3),
     (2, 2, 1, 1, 1), (1, 2, 3, 3, 3)),
    (nn.LazyConvTranspose1d, dict(out_channels=4, kernel_size=3, stride=2, output_padding=1),
     (2, 6, 9), (6, 4, 3), (2, 4, 20)),
    (nn.LazyConvTranspose2d, dict(out_channels=8, kernel_size=3, groups=2), (1, 4, 5, 5),
     (4, 4, 3, 3), (1, 8, 7, 7)),
    (nn.LazyConvTranspose3d, dict(out_channels=2, kernel_size=1), (2, 3, 3, 3),
     (2, 2, 1, 1, 1), (2, 3, 3, 3)),
])
def test_lazy_convolutions(cls, kw, x, wshape, out):
    m = cls(**kw)
    assert m.in_channels == 0 and m.has_uninitialized_params()
    y = m(fiamma.randn(*x))
    assert type(m).__name__ == cls.__name__[4:]
    assert tuple(m.weight.shape) == wshape and tuple(y.shape) == out
    assert (m.bias is None) == (kw.get("bias") is False)
    if m.bias is not None:
        assert tuple(m.bias.shape) == (kw["out_channels"],)
    y.sum().backward()
    assert m.weight.grad is not None and tuple(m.weight.grad.shape) == wshape


@pytest.mark.parametrize("cls,x", [
    (nn.LazyBatchNorm1d, (4, 3)), (nn.LazyBatchNorm2d, (2, 3, 4, 4)),
    (nn.LazyBatchNorm3d, (2, 3, 2, 2, 2)), (nn.LazyInstanceNorm1d, (2, 3, 10)),
    (nn.LazyInstanceNorm2d, (2, 3, 4, 4)), (nn.LazyInstanceNorm3d, (1, 3, 2, 2, 2)),
])
def test_lazy_norms(cls, x):
    m = cls()  # affine and tracking by default, the lazy instance norms too (as PyTorch)
    assert isinstance(m.running_mean, UninitializedBuffer)
    assert int(m.num_batches_tracked) == 0
    data = fiamma.randn(*x) * 3 + 1
    y = m(data)
    assert type(m).__name__ == cls.__name__[4:] and m.num_features == 3
    assert type(m.running_mean) is fiamma.Tensor and tuple(m.running_mean.shape) == (3,)
    assert tuple(m.weight.shape) == (3,) and tuple(y.shape) == x
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(3))
    # batch norm counts its batches; instance norm does not (as PyTorch)
    assert int(m.num_batches_tracked) == (1 if "Batch" in cls.__name__ else 0)
    # the running mean moved from its zero start toward the batch mean
    dims = (0,) + tuple(range(2, len(x)))
    mean = data.numpy().mean(axis=dims)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.1 * mean, rtol=1e-5)


def test_lazy_norm_options_and_unbatched_instance_norm():
    m = nn.LazyBatchNorm2d(affine=False, track_running_stats=False)
    assert not m.has_uninitialized_params()  # nothing to infer: num_features stays 0
    m(fiamma.randn(2, 3, 4, 4))
    assert m.weight is None and m.running_mean is None
    b = nn.LazyBatchNorm1d(bias=False)
    b(fiamma.randn(4, 5))
    assert b.bias is None and tuple(b.weight.shape) == (5,)
    # an unbatched (C, L) input: the channels are dim 0 (PyTorch 2.13 reads dim 1 here and
    # then rejects its own choice)
    i = nn.LazyInstanceNorm1d()
    assert tuple(i(fiamma.randn(6, 10)).shape) == (6, 10) and i.num_features == 6


def test_placeholders_refuse_shape_questions():
    m = nn.LazyLinear(3)
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        m.weight.shape
    with pytest.raises(ValueError, match="uninitialized parameter in numel"):
        m.weight.numel()
    assert repr(m.weight) == "<UninitializedParameter>"
    assert m.weight.dtype is fiamma.float32 and m.weight.device.type == "cpu"
    with pytest.raises(RuntimeError, match="at least one dimension"):
        m(fiamma.tensor(1.0))
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D"):
        nn.LazyConv2d(3, 3)(fiamma.ones(3, 3))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(fiamma.ones(1, 3, 5, 5))


def test_materialize_in_place():
    p = UninitializedParameter(dtype=fiamma.float64)
    held = p
    p.materialize((2, 3))
    assert held is p and type(p) is nn.Parameter and p.requires_grad
    assert tuple(p.shape) == (2, 3) and p.dtype is fiamma.float64
    b = UninitializedBuffer()
    b.materialize(4)
    assert type(b) is fiamma.Tensor and tuple(b.shape) == (4,) and not b.requires_grad


def test_casts_before_the_first_call():
    m = nn.Sequential(nn.LazyLinear(5), nn.LazyBatchNorm1d()).double()
    assert m[0].weight.dtype is fiamma.float64 and is_lazy(m[0].weight)
    assert m[1].running_mean.dtype is fiamma.float64 and is_lazy(m[1].running_mean)
    m(fiamma.randn(4, 7, dtype=fiamma.float64))
    assert m[0].weight.dtype is fiamma.float64 and m[1].running_var.dtype is fiamma.float64


def test_state_dicts_both_ways():
    trained = nn.Sequential(nn.LazyLinear(5), nn.ReLU(), nn.LazyLinear(2))
    x = fiamma.randn(3, 7)
    want = trained(x)
    # an initialised state dict loads into a fresh lazy model (placeholders take its shapes)
    fresh = nn.Sequential(nn.LazyLinear(5), nn.ReLU(), nn.LazyLinear(2))
    fresh.load_state_dict(trained.state_dict())
    assert tuple(fresh[0].weight.shape) == (5, 7) and not fresh[0].has_uninitialized_params()
    np.testing.assert_array_equal(fresh(x).detach().numpy(), want.detach().numpy())
    assert type(fresh[0]) is nn.Linear
    # an uninitialised model's state dict holds the placeholders and survives save/load
    lazy = nn.Sequential(nn.LazyLinear(5))
    sd = lazy.state_dict()
    assert isinstance(sd["0.weight"], UninitializedParameter)
    buf = io.BytesIO()
    fiamma.save(sd, buf)
    buf.seek(0)
    again = fiamma.load(buf, weights_only=False)
    assert isinstance(again["0.weight"], UninitializedParameter)
    other = nn.Sequential(nn.LazyLinear(5))
    other.load_state_dict(again)
    assert other[0].has_uninitialized_params()


def test_copies_are_independent_lazy_modules():
    m = nn.LazyConv2d(4, 3)
    c = copy.deepcopy(m)
    p = pickle.loads(pickle.dumps(m))
    m(fiamma.randn(1, 2, 5, 5))
    assert c.has_uninitialized_params() and p.has_uninitialized_params()
    c(fiamma.randn(1, 5, 5, 5))
    p(fiamma.randn(1, 6, 5, 5))
    assert (m.in_channels, c.in_channels, p.in_channels) == (2, 5, 6)


def test_custom_lazy_module():
    class LazyScale(nn.modules.lazy.LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = UninitializedParameter()

        def initialize_parameters(self, x):
            self.scale.materialize((x.shape[-1],))
            with fiamma.no_grad():
                self.scale.fill_(2.0)

        def forward(self, x):
            return x * self.scale

    m = LazyScale()
    assert m(fiamma.ones(2, 3)).tolist() == [[2.0] * 3] * 2
    assert type(m) is LazyScale and not m._forward_pre_hooks


@pytest.mark.parity
def test_parity_with_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        out = []
        cases = [
            (lambda: lib.nn.LazyLinear(4), (2, 3)),
            (lambda: lib.nn.LazyConv1d(4, 3, groups=2), (2, 6, 9)),
            (lambda: lib.nn.LazyConv2d(8, 3, padding=1), (3, 5, 5)),
            (lambda: lib.nn.LazyConvTranspose1d(4, 3, stride=2, output_padding=1), (2, 6, 9)),
            (lambda: lib.nn.LazyConvTranspose2d(8, 3, groups=2), (1, 4, 5, 5)),
            (lambda: lib.nn.LazyBatchNorm2d(affine=False), (2, 3, 4, 4)),
            (lambda: lib.nn.LazyBatchNorm3d(track_running_stats=False), (2, 3, 2, 2, 2)),
            (lambda: lib.nn.LazyInstanceNorm1d(), (2, 6, 10)),
        ]
        for make, shape in cases:
            m = make()
            out.append(repr(m))
            out.append([(k, type(v).__name__) for k, v in m.state_dict().items()])
            y = m(lib.ones(*shape))
            out.append((repr(m), type(m).__name__, tuple(y.shape)))
            out.append([(k, tuple(v.shape)) for k, v in m.state_dict().items()])
        return out

    assert run(fiamma) == run(torch)
