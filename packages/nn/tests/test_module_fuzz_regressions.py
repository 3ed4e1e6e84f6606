"""Differences from torch.nn found by differential fuzzing of module classes (constructor
arguments, inputs, outputs, gradients, repr and module trees), kept fixed here with known
values; the parity tests at the end compare with PyTorch where it is installed."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F


def test_module_list_repr_collapses_runs_of_identical_children():
    m = nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.ReLU(), nn.Tanh(), nn.ReLU()])
    assert repr(m) == ("ModuleList(\n  (0-2): 3 x ReLU()\n  (3): Tanh()\n  (4): ReLU()\n)")
    assert repr(nn.ModuleList()) == "ModuleList()"
    inner = nn.Sequential(nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)]))
    assert repr(inner) == ("Sequential(\n  (0): ModuleList(\n    (0-1): 2 x Linear(in_features=2, "
                           "out_features=2, bias=True)\n  )\n)")


def test_triplet_with_distance_default_is_a_pairwise_distance_child():
    m = nn.TripletMarginWithDistanceLoss()
    assert isinstance(m.distance_function, nn.PairwiseDistance)
    assert [n for n, _ in m.named_modules()] == ["", "distance_function"]
    assert repr(m) == "TripletMarginWithDistanceLoss(\n  (distance_function): PairwiseDistance()\n)"
    a = fiamma.tensor([[0.0, 0.0]], dtype=fiamma.float64)
    p = fiamma.tensor([[3.0, 4.0]], dtype=fiamma.float64)
    n = fiamma.tensor([[1.0, 0.0]], dtype=fiamma.float64)
    # max(d(a, p) - d(a, n) + margin, 0) with PairwiseDistance's ||x1 - x2 + eps||
    want = max(np.hypot(-3 + 1e-6, -4 + 1e-6) - np.hypot(-1 + 1e-6, 1e-6) + 1.0, 0.0)
    assert m(a, p, n).item() == pytest.approx(want, rel=1e-9)


def test_prelu_keeps_a_0d_input_0d():
    x = fiamma.tensor(-2.0, dtype=fiamma.float64)
    y = nn.PReLU(init=0.25)(x)
    assert y.shape == ()
    assert y.item() == -0.5
    assert F.prelu(x, fiamma.tensor([0.5], dtype=fiamma.float64)).shape == ()


def test_cross_entropy_probabilities_refuse_a_class_ignore_index():
    x = fiamma.zeros(2, 3)
    t = fiamma.full((2, 3), 1 / 3)
    with pytest.raises(RuntimeError, match="ignore_index"):
        F.cross_entropy(x, t, ignore_index=1)
    with pytest.raises(RuntimeError, match="ignore_index"):
        nn.CrossEntropyLoss(ignore_index=0)(x, t)
    # a negative ignore_index (PyTorch's -100 default and any other) is accepted
    want = np.log(3)
    assert F.cross_entropy(x, t, ignore_index=-5).item() == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("weighted", [False, True])
def test_nll_mean_with_every_target_ignored_has_zero_gradient(weighted):
    """The loss is 0/0 = nan (as PyTorch's); its gradient is 0, not nan."""
    x = fiamma.tensor(np.linspace(-1, 1, 8).reshape(2, 2, 2), requires_grad=True)
    t = fiamma.tensor([[1, 1], [1, 1]])
    w = fiamma.tensor([0.5, 2.0], dtype=fiamma.float64) if weighted else None
    loss = F.nll_loss(x, t, weight=w, ignore_index=1)
    assert np.isnan(loss.item())
    loss.backward()
    assert x.grad.tolist() == np.zeros((2, 2, 2)).tolist()
    # a partly ignored batch keeps its mean gradient
    x.grad = None
    F.nll_loss(x, fiamma.tensor([[0, 1], [1, 1]]), weight=w, ignore_index=1).backward()
    g = np.zeros((2, 2, 2))
    g[0, 0, 0] = -1.0
    np.testing.assert_allclose(x.grad.numpy(), g)


@pytest.mark.parity
def test_module_repr_and_trees_equal_pytorch():
    torch = pytest.importorskip("torch")
    pairs = [(nn.Transformer(d_model=4, nhead=2, num_encoder_layers=2, num_decoder_layers=3,
                             dim_feedforward=4),
              torch.nn.Transformer(d_model=4, nhead=2, num_encoder_layers=2,
                                   num_decoder_layers=3, dim_feedforward=4)),
             (nn.TripletMarginWithDistanceLoss(margin=0.5),
              torch.nn.TripletMarginWithDistanceLoss(margin=0.5))]
    for f, t in pairs:
        assert repr(f) == repr(t)
        assert [n for n, _ in f.named_modules()] == [n for n, _ in t.named_modules()]
        assert list(f.state_dict()) == list(t.state_dict())


def test_prelu_integer_init_makes_a_float_weight():
    m = nn.PReLU(num_parameters=2, init=0)
    assert m.weight.dtype == fiamma.get_default_dtype() and m.weight.requires_grad
    assert m.weight.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("make, match", [
    (lambda: nn.Hardtanh(min_val=0.5, max_val=0.5), "greater than min_val"),
    (lambda: nn.LSTM(0, 2), "input_size must be greater than zero"),
    (lambda: nn.GRU(0, 2), "input_size must be greater than zero"),
])
def test_constructors_refuse_what_pytorch_refuses(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_functionals_refuse_what_pytorch_refuses():
    x = fiamma.ones(2, 3, 4)
    with pytest.raises(ValueError, match="eps must be positive during training"):
        F.batch_norm(x, None, None, training=True, eps=0.0)
    with pytest.raises(ValueError, match="eps must be non-negative"):
        F.batch_norm(x, fiamma.zeros(3), fiamma.ones(3), training=False, eps=-1.0)
    with pytest.raises(ValueError, match="eps must be positive"):
        nn.BatchNorm1d(3, eps=0.0)(x)
    # eps 0 is fine in eval
    assert F.batch_norm(x, fiamma.zeros(3), fiamma.ones(3), eps=0.0).tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="Lower bound"):
        F.rrelu(x, lower=0.5, upper=0.1)
    with pytest.raises(RuntimeError, match="Lower bound"):
        nn.RReLU(0.5, 0.1).eval()(x)
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        nn.RMSNorm(())(x)
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        nn.LayerNorm([])(x)
    with pytest.raises(RuntimeError, match="eps must be non-negative"):
        nn.CosineSimilarity(eps=-1.0)(x, x)


def test_embedding_of_width_0_has_a_gradient():
    for kw in ({}, {"max_norm": 0.5}):
        e = nn.Embedding(7, 0, **kw)
        y = e(fiamma.tensor([[1, 2, 2]]))
        assert tuple(y.shape) == (1, 3, 0)
        y.sum().backward()
        assert tuple(e.weight.grad.shape) == (7, 0)


def test_parameter_containers_print_and_order_as_pytorch():
    m = nn.Module()
    m.pl = nn.ParameterList([nn.Parameter(fiamma.zeros(2)),
                             fiamma.zeros(1, 3, dtype=fiamma.float64)])
    # a plain dict is taken in sorted key order (an OrderedDict in its own order)
    m.pd = nn.ParameterDict({"z": nn.Parameter(fiamma.zeros(1)), "y": fiamma.ones(2, 2)})
    assert list(m.pd.keys()) == ["y", "z"]
    assert [n for n, _ in m.named_parameters()] == ["pl.0", "pl.1", "pd.y", "pd.z"]
    from collections import OrderedDict
    assert list(nn.ParameterDict(OrderedDict(b=fiamma.zeros(1), a=fiamma.zeros(1)))) == ["b", "a"]
    assert repr(m) == (
        "Module(\n"
        "  (pl): ParameterList(\n"
        "      (0): Parameter containing: [fiamma.float32 of size 2]\n"
        "      (1): Parameter containing: [fiamma.float64 of size 1x3]\n"
        "  )\n"
        "  (pd): ParameterDict(\n"
        "      (y): Parameter containing: [fiamma.FloatTensor of size 2x2]\n"
        "      (z): Parameter containing: [fiamma.FloatTensor of size 1]\n"
        "  )\n"
        ")")


@pytest.mark.parity
def test_parameter_container_repr_equals_pytorch_up_to_the_module_name():
    torch = pytest.importorskip("torch")
    reprs = []
    for lib, tnn in ((fiamma, nn), (torch, torch.nn)):
        m = tnn.Module()
        m.pl = tnn.ParameterList([tnn.Parameter(lib.zeros(2)), lib.zeros(1, 3)])
        m.pd = tnn.ParameterDict({"z": lib.zeros(1), "y": lib.ones(2, 2)})
        reprs.append(repr(m).replace("fiamma.", "torch."))
    assert reprs[0] == reprs[1]


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_lp_pool_infinite_norm_is_the_largest_or_smallest_magnitude(nd):
    x = fiamma.tensor(np.arange(-8.0, 8.0).reshape((1, 1) + ((16,), (4, 4), (2, 2, 4))[nd - 1]))
    pool = getattr(F, f"lp_pool{nd}d")
    mx = getattr(F, f"max_pool{nd}d")
    np.testing.assert_array_equal(pool(x, float("inf"), 2).numpy(), mx(x.abs(), 2).numpy())
    np.testing.assert_array_equal(pool(x, -float("inf"), 2).numpy(), (-mx(-x.abs(), 2)).numpy())
    m = getattr(nn, f"LPPool{nd}d")(float("inf"), 2)
    np.testing.assert_array_equal(m(x).numpy(), mx(x.abs(), 2).numpy())


def test_nan_activation_parameters():
    x = fiamma.tensor([-2.0, 0.5, 3.0])
    nan = float("nan")
    assert np.isnan(F.hardtanh(x, nan, 1.0).numpy()).all()
    assert np.isnan(F.hardtanh(x, 0.0, nan).numpy()).all()
    with pytest.raises(RuntimeError, match="lambda must be greater or equal to 0"):
        F.softshrink(x, nan)
    with pytest.raises(ValueError):
        nn.Hardtanh(0.0, nan)


def test_clip_grad_norm_with_a_nan_norm_scales_every_gradient_to_nan():
    a = fiamma.zeros(2, requires_grad=True)
    b = fiamma.zeros(3, requires_grad=True)
    a.grad = fiamma.tensor([float("nan"), 1.0])
    b.grad = fiamma.tensor([1.0, 2.0, 3.0])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=100.0)
    assert np.isnan(total.item())
    assert np.isnan(a.grad.numpy()).all() and np.isnan(b.grad.numpy()).all()
    # a finite norm under max_norm leaves the gradients alone
    b.grad = fiamma.tensor([1.0, 2.0, 3.0])
    nn.utils.clip_grad_norm_([b], max_norm=100.0)
    assert b.grad.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("s1, s2, bias, match", [
    ((5, 3), (5, 4), (3,), "input1 size does not match weight size: got 3 but expected 1"),
    ((5, 1), (5, 1), (3,), "input2 size does not match weight size: got 1 but expected 4"),
    ((5, 1), (1, 4), (3,), "batch dimensions do not match at dim 0: got 5 and 1"),
    ((2, 5, 1), (5, 4), (3,), "input dimensions do not match: got 3 and 2"),
    ((5, 1), (5, 4), (1,), "bias size does not match weight size: got 1 but expected 3"),
])
def test_bilinear_refuses_shapes_einsum_would_broadcast(s1, s2, bias, match):
    """A size-1 in_features (or batch) dim used to broadcast silently."""
    w = fiamma.ones(3, 1, 4)
    with pytest.raises(RuntimeError, match=match):
        F.bilinear(fiamma.ones(*s1), fiamma.ones(*s2), w, fiamma.ones(*bias))
    m = nn.Bilinear(1, 4, 3)
    assert tuple(m(fiamma.ones(5, 1), fiamma.ones(5, 4)).shape) == (5, 3)
    assert tuple(m(fiamma.ones(1), fiamma.ones(4)).shape) == (3,)
