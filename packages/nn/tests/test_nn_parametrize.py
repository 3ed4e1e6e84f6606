"""nn.utils.parametrize, parametrizations (weight_norm, spectral_norm, orthogonal) and the
older hook-based weight_norm / spectral_norm: values against NumPy, gradients by gradcheck,
state_dict keys and outputs against torch (parity)."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.autograd import gradcheck
from fiamma.nn.utils import parametrizations as P, parametrize

try:
    import torch
except ImportError:
    torch = None


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT

    def right_inverse(self, a):
        return a.triu()


class Scale(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k

    def right_inverse(self, y):
        return y / self.k


class Split(nn.Module):
    def forward(self, a, b):
        return a + b

    def right_inverse(self, x):
        return x * 0.25, x * 0.75


def test_register_remove_and_state_dict():
    lin = nn.Linear(3, 3).double()
    w0 = lin.weight.detach().numpy().copy()
    orig = lin.weight
    parametrize.register_parametrization(lin, "weight", Symmetric())
    assert type(lin).__name__ == "ParametrizedLinear" and isinstance(lin, nn.Linear)
    assert parametrize.is_parametrized(lin) and parametrize.is_parametrized(lin, "weight")
    assert not parametrize.is_parametrized(lin, "bias")
    assert parametrize.type_before_parametrizations(lin) is nn.Linear
    assert lin.parametrizations.weight.original is orig  # same Parameter object
    w = lin.weight.detach().numpy()
    np.testing.assert_allclose(w, np.triu(w0) + np.triu(w0, 1).T)
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in lin.named_parameters()] == ["bias",
                                                      "parametrizations.weight.original"]
    # gradients flow to the original
    lin(fiamma.ones(2, 3, dtype=fiamma.float64)).sum().backward()
    g = np.tile(np.full(3, 2.0), (3, 1))
    # d/dW of W_sym: the diagonal once, each upper entry for itself and its mirror
    np.testing.assert_allclose(orig.grad.numpy(), np.triu(g) + np.triu(g.T, 1), rtol=1e-12)
    # assignment goes through right_inverse
    target = np.arange(9.0).reshape(3, 3)
    target = target + target.T
    lin.weight = fiamma.tensor(target)
    np.testing.assert_allclose(lin.weight.detach().numpy(), target)
    # chaining a second parametrization
    parametrize.register_parametrization(lin, "weight", Scale(2.0))
    np.testing.assert_allclose(lin.weight.detach().numpy(), 2 * target)
    assert len(lin.parametrizations.weight) == 2
    twin = copy.deepcopy(lin)
    assert type(twin) is type(lin) and twin.parametrizations.weight.original is not orig
    np.testing.assert_allclose(twin.weight.detach().numpy(), lin.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="state_dict"):
        pickle.dumps(lin)
    with parametrize.cached():
        assert lin.weight is lin.weight
    assert lin.weight is not lin.weight
    parametrize.remove_parametrizations(lin, "weight", leave_parametrized=True)
    assert type(lin) is nn.Linear and not hasattr(lin, "parametrizations")
    assert lin.weight is orig
    np.testing.assert_allclose(lin.weight.detach().numpy(), 2 * target)
    assert list(lin.state_dict()) == ["bias", "weight"]


def test_remove_without_leaving_and_multi_originals():
    lin = nn.Linear(2, 2).double()
    w0 = lin.weight.detach().numpy().copy()
    parametrize.register_parametrization(lin, "weight", Scale(3.0))
    np.testing.assert_allclose(lin.weight.detach().numpy(), w0, rtol=1e-12)  # via right_inverse
    parametrize.remove_parametrizations(lin, "weight", leave_parametrized=False)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w0 / 3, rtol=1e-12)
    parametrize.register_parametrization(lin, "weight", Split())
    sd = lin.state_dict()
    assert list(sd) == ["bias", "parametrizations.weight.original0",
                        "parametrizations.weight.original1"]
    np.testing.assert_allclose(sd["parametrizations.weight.original0"].numpy(), w0 / 12)
    with pytest.raises(ValueError, match="sequence of tensors"):
        parametrize.remove_parametrizations(lin, "weight", leave_parametrized=False)
    parametrize.remove_parametrizations(lin, "weight")
    np.testing.assert_allclose(lin.weight.detach().numpy(), w0 / 3, rtol=1e-12)


def test_transfer_parametrizations():
    src = nn.Linear(3, 3).double()
    parametrize.register_parametrization(src, "weight", Symmetric())
    dst = nn.Linear(3, 3).double()
    parametrize.transfer_parametrizations_and_params(src, dst)
    assert parametrize.is_parametrized(dst, "weight")
    np.testing.assert_allclose(dst.weight.detach().numpy(), src.weight.detach().numpy())
    assert list(dst.state_dict()) == list(src.state_dict())


def test_parametrize_errors_and_buffers():
    lin = nn.Linear(2, 3)

    class Bad(nn.Module):
        def forward(self, x):
            return x[:1]

    with pytest.raises(ValueError, match="may not change the shape"):
        parametrize.register_parametrization(lin, "weight", Bad())
    assert type(lin) is nn.Linear and "weight" in lin._parameters
    parametrize.register_parametrization(lin, "weight", Bad(), unsafe=True)
    assert tuple(lin.weight.shape) == (1, 2)
    with pytest.raises(ValueError, match="does not have a parameter"):
        parametrize.register_parametrization(lin, "nothing", Symmetric())
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        lin.weight = fiamma.ones(1, 2)
    with pytest.raises(ValueError, match="does not have a parametrization"):
        parametrize.remove_parametrizations(lin, "bias")
    m = nn.Module()
    m.register_buffer("buf", fiamma.ones(2, 2))
    parametrize.register_parametrization(m, "buf", Scale(2.0))
    assert list(m.state_dict()) == ["parametrizations.buf.original"]
    assert m.buf.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert list(m.parameters()) == []


def test_weight_norm_values_and_grads():
    rng = np.random.default_rng(0)
    for dim in (0, 1, None, -1):
        conv_like = nn.Linear(4, 3).double()
        w = conv_like.weight.detach().numpy().copy()
        P.weight_norm(conv_like, dim=dim)
        g = conv_like.parametrizations.weight.original0.detach().numpy()
        if dim in (None, -1):
            assert g.shape == () and np.isclose(g, np.linalg.norm(w))
        else:
            axes = 1 - dim
            np.testing.assert_allclose(g, np.linalg.norm(w, axis=axes, keepdims=True))
        np.testing.assert_allclose(conv_like.weight.detach().numpy(), w, rtol=1e-12)
    v = fiamma.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    g = fiamma.tensor(rng.random((3, 1)) + 0.5, requires_grad=True)
    assert gradcheck(lambda a, b: P._WeightNorm(0)(a, b), (g, v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = nn.utils.weight_norm(nn.Linear(4, 3).double(), dim=1)
    assert list(old.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert tuple(old.weight_g.shape) == (1, 4)
    with fiamma.no_grad():
        old.weight_g.mul_(2)
    x = fiamma.ones(1, 4, dtype=fiamma.float64)
    v = old.weight_v.detach().numpy()
    ref = 2 * v  # g was ||v|| per column, doubled
    np.testing.assert_allclose(old(x).detach().numpy(),
                               ref.sum(1)[None] + old.bias.detach().numpy(), rtol=1e-12)
    nn.utils.remove_weight_norm(old)
    assert list(old.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(old.weight.detach().numpy(), ref, rtol=1e-12)
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_weight_norm(old)


def test_weight_norm_parametrization_loads_older_g_v_keys():
    """As PyTorch: a state dict saved with the hook-based weight_norm (``weight_g``,
    ``weight_v``) loads into the parametrized module, also nested under a prefix."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = nn.utils.weight_norm(nn.Conv1d(4, 4, 3, groups=2).double(), dim=2)
    new = nn.Sequential(P.weight_norm(nn.Conv1d(4, 4, 3, groups=2).double(), dim=2))
    new.load_state_dict({f"0.{k}": v for k, v in old.state_dict().items()})
    assert list(new.state_dict()) == ["0.bias", "0.parametrizations.weight.original0",
                                      "0.parametrizations.weight.original1"]
    x = fiamma.randn(1, 4, 6, dtype=fiamma.float64)
    np.testing.assert_allclose(new(x).detach().numpy(), old(x).detach().numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Missing key"):   # g without v is not converted
        new.load_state_dict({"0.bias": old.bias, "0.weight_g": old.weight_g})


def test_spectral_norm_divides_by_the_top_singular_value():
    fiamma.manual_seed(0)
    lin = nn.Linear(6, 5).double()
    w = lin.weight.detach().numpy().copy()
    P.spectral_norm(lin, n_power_iterations=30)
    sd = list(lin.state_dict())
    assert sd == ["bias", "parametrizations.weight.original", "parametrizations.weight.0._u",
                  "parametrizations.weight.0._v"]
    s = np.linalg.svd(w, compute_uv=False)[0]
    np.testing.assert_allclose(lin.weight.detach().numpy(), w / s, rtol=1e-8)
    lin.eval()
    u0 = lin.parametrizations.weight[0]._u.clone()
    lin(fiamma.ones(1, 6, dtype=fiamma.float64))
    assert (lin.parametrizations.weight[0]._u == u0).all()  # no power step in eval
    parametrize.remove_parametrizations(lin, "weight")
    np.testing.assert_allclose(lin.weight.detach().numpy(), w / s, rtol=1e-8)
    old = nn.utils.spectral_norm(nn.Linear(6, 5).double(), n_power_iterations=50)
    assert list(old.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    w = old.weight_orig.detach().numpy()
    old(fiamma.ones(1, 6, dtype=fiamma.float64))
    np.testing.assert_allclose(old.weight.detach().numpy(),
                               w / np.linalg.svd(w, compute_uv=False)[0], rtol=1e-8)
    nn.utils.remove_spectral_norm(old)
    assert list(old.state_dict()) == ["bias", "weight"]
    # 1-D weights are normalised; dim picks the output dimension
    m = nn.Module()
    m.weight = nn.Parameter(fiamma.tensor([3.0, 4.0]))
    P.spectral_norm(m)
    np.testing.assert_allclose(m.weight.detach().numpy(), [0.6, 0.8], rtol=1e-6)
    with pytest.raises(ValueError, match="n_power_iterations"):
        P.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_orthogonal(orth_map, shape):
    lin = nn.Linear(shape[1], shape[0]).double()
    P.orthogonal(lin, orthogonal_map=orth_map)
    q = lin.weight.detach().numpy()
    k = min(shape)
    gram = q.T @ q if shape[0] >= shape[1] else q @ q.T
    np.testing.assert_allclose(gram, np.eye(k), atol=1e-10)
    assert "parametrizations.weight.0.base" in lin.state_dict()
    # assigning an orthogonal matrix reproduces it
    rng = np.random.default_rng(1)
    z, _ = np.linalg.qr(rng.standard_normal((max(shape), max(shape))))
    z = z[:shape[0], :shape[1]]
    lin.weight = fiamma.tensor(z)
    np.testing.assert_allclose(lin.weight.detach().numpy(), z, atol=1e-10)
    # gradients flow and the result stays orthogonal after a step
    lin(fiamma.ones(2, shape[1], dtype=fiamma.float64)).pow(2).sum().backward()
    orig = lin.parametrizations.weight.original
    assert orig.grad is not None and np.isfinite(orig.grad.numpy()).all()
    with fiamma.no_grad():
        orig.sub_(0.1 * orig.grad)
    q = lin.weight.detach().numpy()
    gram = q.T @ q if shape[0] >= shape[1] else q @ q.T
    np.testing.assert_allclose(gram, np.eye(k), atol=1e-9)


def test_orthogonal_without_trivialization_and_errors():
    lin = nn.Linear(3, 3).double()
    P.orthogonal(lin, orthogonal_map="cayley", use_trivialization=False)
    assert list(lin.state_dict()) == ["bias", "parametrizations.weight.original"]
    q = lin.weight.detach().numpy()
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-10)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        lin.weight = fiamma.eye(3, dtype=fiamma.float64)
    for shape in ((5, 3), (3, 5), (4, 4)):
        hh = nn.Linear(shape[1], shape[0]).double()
        w = hh.weight.detach().numpy().copy()
        P.orthogonal(hh, orthogonal_map="householder", use_trivialization=False)
        q = hh.weight.detach().numpy()
        # the Q of w's QR factorisation (R's diagonal made positive)
        tall = w if shape[0] >= shape[1] else w.T
        qr_q, qr_r = np.linalg.qr(tall)
        qr_q = qr_q * np.sign(np.diag(qr_r))
        np.testing.assert_allclose(q if shape[0] >= shape[1] else q.T, qr_q, atol=1e-10)
        z, _ = np.linalg.qr(np.random.default_rng(2).standard_normal((max(shape),) * 2))
        z = z[:shape[0], :shape[1]]
        hh.weight = fiamma.tensor(z)
        np.testing.assert_allclose(hh.weight.detach().numpy(), z, atol=1e-10)
    with pytest.raises(ValueError, match="orthogonal_map"):
        P.orthogonal(nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match="matrix or batch"):
        m = nn.Module()
        m.weight = nn.Parameter(fiamma.ones(3))
        P.orthogonal(m)
    a = fiamma.tensor(np.random.default_rng(0).standard_normal((3, 3)) * 2)
    np.testing.assert_allclose(P._matrix_exp(a).numpy(), _expm(a.numpy()), rtol=1e-10,
                               atol=1e-12)
    x = fiamma.tensor(np.random.default_rng(1).standard_normal((3, 3)), requires_grad=True)
    assert gradcheck(lambda t: P._matrix_exp(t - t.mT), (x,))
    assert gradcheck(lambda t: P._Orthogonal(t, "householder", use_trivialization=False)(t),
                     (x,))


def _expm(a):
    w, v = np.linalg.eig(a)
    return (v @ np.diag(np.exp(w)) @ np.linalg.inv(v)).real


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("kind", ["pw0", "pw1", "pwNone", "old_w", "old_w1", "sn", "old_sn",
                                  "orth_exp", "orth_cayley", "orth_householder",
                                  "orth_exp_notriv", "orth_householder_notriv"])
@pytest.mark.parametrize("train", [True, False])
def test_parity_parametrizations(kind, train):
    rng = np.random.default_rng(0)
    torch.manual_seed(0)  # the layers' initial weights
    square = kind.startswith("orth_exp") or kind == "orth_cayley"
    n_in, n_out = (4, 4) if square else (5, 4)

    def apply(mod):
        u = mod.utils
        if kind.startswith("pw"):
            dim = {"pw0": 0, "pw1": 1, "pwNone": None}[kind]
            return lambda m: u.parametrizations.weight_norm(m, dim=dim)
        if kind.startswith("old_w"):
            return lambda m: u.weight_norm(m, dim=1 if kind == "old_w1" else 0)
        if kind == "sn":
            return lambda m: u.parametrizations.spectral_norm(m, n_power_iterations=2)
        if kind == "old_sn":
            return lambda m: u.spectral_norm(m, n_power_iterations=2)
        orth_map = kind.split("_")[1].replace("exp", "matrix_exp")
        return lambda m: u.parametrizations.orthogonal(
            m, orthogonal_map=orth_map, use_trivialization=not kind.endswith("notriv"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mt = torch.nn.Linear(n_in, n_out)
        mf = nn.Linear(n_in, n_out)
        mf.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in mt.state_dict().items()})
        apply(torch.nn)(mt)
        apply(nn)(mf)
    if kind not in ("sn", "old_sn", "orth_householder"):  # no random initial state
        # float32 matrix exponentials by different series: a few ulps of 0.3 (5e-6 seen)
        np.testing.assert_allclose(mf.weight.detach().numpy(), mt.weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-5 if kind.startswith("orth") else 1e-6)
    sdt = mt.state_dict()
    assert list(sdt) == list(mf.state_dict())
    assert [tuple(v.shape) for v in sdt.values()] == \
        [tuple(v.shape) for v in mf.state_dict().values()]
    mf.load_state_dict({k: fiamma.tensor(v.numpy()) for k, v in sdt.items()})
    mt.train(train)
    mf.train(train)
    x = rng.standard_normal((3, n_in)).astype(np.float32)
    for _ in range(2):  # twice: the power iteration updates its buffers in training
        yt = mt(torch.tensor(x))
        yf = mf(fiamma.tensor(x))
        np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    yt.pow(2).sum().backward()
    yf.pow(2).sum().backward()
    for (nt, pt), (nf, pf) in zip(mt.named_parameters(), mf.named_parameters()):
        assert nt == nf
        np.testing.assert_allclose(pf.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (nt, bt), (nf, bf) in zip(mt.named_buffers(), mf.named_buffers()):
        assert nt == nf
        np.testing.assert_allclose(bf.numpy(), bt.numpy(), rtol=1e-5, atol=1e-6)


def test_weight_norm_built_on_the_meta_device_keeps_g_and_v():
    # transformers builds models on the meta device before loading weights (wav2vec2's
    # positional convolution is weight-normed): the parametrization must still split the
    # weight into original0 (g) and original1 (v), not fall back to one tensor
    with fiamma.device("meta"):
        c = nn.Conv1d(4, 4, 3, groups=2)
        c = nn.utils.parametrizations.weight_norm(c, name="weight", dim=2)
    plist = c.parametrizations.weight
    assert not plist.is_tensor and plist.ntensors == 2
    assert plist.original0.shape == (1, 1, 3) and plist.original1.shape == (4, 2, 3)
    assert c.weight.device.type == "meta" and c.weight.shape == (4, 2, 3)
