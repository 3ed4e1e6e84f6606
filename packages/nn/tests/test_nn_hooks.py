"""Module hooks: full backward hooks and pre-hooks (per module and global), state-dict hooks,
and (parity) the same grad_input / grad_output as torch for a small model."""

import warnings

import numpy as np
import pytest

import fiamma
from fiamma import nn

try:
    import torch
except ImportError:
    torch = None


class Scale(nn.Module):
    """out = (2 x, x * y): two tensor inputs, a non-tensor argument, two outputs."""

    def forward(self, x, flag, y):
        return 2 * x, x * y


def _np(gs):
    return [None if g is None else g.detach().numpy().copy() for g in gs]


def test_full_backward_hook_sees_and_replaces_grad_input():
    m = Scale()
    seen = []

    def hook(mod, grad_input, grad_output):
        seen.append((mod, _np(grad_input), _np(grad_output)))
        return (grad_input[0] * 10, None, grad_input[2])

    h = m.register_full_backward_hook(hook)
    x = fiamma.tensor([1.0, 2.0], requires_grad=True)
    y = fiamma.tensor([3.0, 4.0], requires_grad=True)
    a, b = m(x, "flag", y)
    (a.sum() + (b * fiamma.tensor([1.0, -1.0])).sum()).backward()
    assert len(seen) == 1 and seen[0][0] is m
    gi, go = seen[0][1], seen[0][2]
    assert gi[1] is None  # the non-tensor argument
    np.testing.assert_allclose(gi[0], [2 + 3, 2 - 4])
    np.testing.assert_allclose(gi[2], [1, -2])
    np.testing.assert_allclose(go[0], [1, 1])
    np.testing.assert_allclose(go[1], [1, -1])
    np.testing.assert_allclose(x.grad.numpy(), [50, -20])  # replaced
    np.testing.assert_allclose(y.grad.numpy(), [1, -2])
    h.remove()
    x.grad = None
    m(x, 0, y)[0].sum().backward()
    assert len(seen) == 1 and x.grad.tolist() == [2.0, 2.0]


def test_backward_pre_hook_replaces_grad_output_and_order():
    lin = nn.Linear(3, 2)
    calls = []

    def pre(mod, grad_output):
        calls.append("pre")
        return (grad_output[0] * 0 + 1.0,)

    def post(mod, grad_input, grad_output):
        calls.append("post")
        np.testing.assert_allclose(grad_output[0].numpy(), np.ones((4, 2)))

    lin.register_full_backward_pre_hook(pre)
    lin.register_full_backward_hook(post)
    x = fiamma.randn(4, 3, requires_grad=True)
    (lin(x) * 5).sum().backward()
    assert calls == ["pre", "post"]
    np.testing.assert_allclose(x.grad.numpy(), np.ones((4, 2)) @ lin.weight.detach().numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(),  # float32 sums of 4 terms
                               np.ones((2, 4)) @ x.detach().numpy(), rtol=1e-5, atol=1e-6)
    lin.register_full_backward_pre_hook(lambda m, g: (g[0], g[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_output"):
        lin(x).sum().backward()


def test_global_backward_hooks_and_prepend():
    order = []
    a, b = nn.Linear(2, 2), nn.Tanh()
    seq = nn.Sequential(a, b)
    a.register_full_backward_hook(lambda m, gi, go: order.append("a-own"))
    a.register_full_backward_hook(lambda m, gi, go: order.append("a-first"), prepend=True)
    h1 = nn.register_module_full_backward_hook(
        lambda m, gi, go: order.append(type(m).__name__))
    h2 = nn.register_module_full_backward_pre_hook(
        lambda m, go: order.append("pre-" + type(m).__name__))
    try:
        seq(fiamma.ones(1, 2, requires_grad=True)).sum().backward()
    finally:
        h1.remove()
        h2.remove()
    assert order == ["pre-Sequential", "pre-Tanh", "Tanh", "pre-Linear", "Linear", "a-first",
                     "a-own", "Sequential"]
    order.clear()
    seq(fiamma.ones(1, 2, requires_grad=True)).sum().backward()
    assert order == ["a-first", "a-own"]


def test_hook_when_no_input_requires_grad():
    lin = nn.Linear(3, 1)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    with pytest.warns(UserWarning, match="no inputs require gradients"):
        lin(fiamma.ones(2, 3)).sum().backward()
    assert seen == [((None,), fiamma.Size([2, 1]))]
    assert lin.weight.grad is not None
    x = fiamma.ones(2, 3)
    lin.register_full_backward_hook(lambda m, gi, go: (fiamma.ones(2, 3),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="should always return None"):
            lin(x).sum().backward()


def test_input_not_requiring_grad_stays_so():
    m = Scale()
    grads = []
    m.register_full_backward_hook(lambda mod, gi, go: grads.append(_np(gi)))
    x = fiamma.ones(2, requires_grad=True)
    y = fiamma.ones(2)
    seen_y = []
    m.register_forward_pre_hook(lambda mod, args: seen_y.append(args[2].requires_grad))
    m(x, None, y)[1].sum().backward()
    assert seen_y == [False] and grads[0][2] is None and grads[0][0] is not None


def test_no_hook_fast_path_skips_the_hook_machinery(monkeypatch):
    lin = nn.Linear(2, 2)
    called = []
    monkeypatch.setattr(nn.Module, "_call_with_hooks",
                        lambda self, a, k: called.append(1))
    lin(fiamma.ones(1, 2))
    assert called == []
    h = lin.register_full_backward_hook(lambda *a: None)
    lin(fiamma.ones(1, 2))
    assert called == [1]
    h.remove()
    monkeypatch.undo()
    lin(fiamma.ones(1, 2))  # finds no hook left: back to the fast path
    assert lin._hooked is False
    fired = []
    g = nn.register_module_forward_hook(lambda m, a, o: fired.append(type(m).__name__))
    lin(fiamma.ones(1, 2))
    g.remove()
    lin(fiamma.ones(1, 2))
    assert fired == ["Linear"]


def test_state_dict_hooks():
    lin = nn.Linear(2, 3)
    log = []
    lin.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(("pre", prefix)))
    lin.register_state_dict_post_hook(
        lambda m, sd, prefix, meta: sd.__setitem__(prefix + "extra", fiamma.ones(1)))
    seq = nn.Sequential(lin)
    sd = seq.state_dict()
    assert log == [("pre", "0.")] and "0.extra" in sd
    lin.register_state_dict_post_hook(lambda m, sd, prefix, meta: {})
    with pytest.raises(RuntimeError, match="must return None"):
        lin.state_dict()
    lin2 = nn.Linear(2, 3)
    lin2._register_state_dict_hook(lambda m, sd, prefix, meta: {"replaced": fiamma.zeros(1)})
    assert list(lin2.state_dict()) == ["replaced"]

    target = nn.Linear(2, 3)
    seen = []

    def load_pre(module, state_dict, prefix, local_metadata, strict, missing, unexpected,
                 errors):
        seen.append(prefix)
        state_dict[prefix + "bias"] = state_dict.pop(prefix + "b")

    def load_post(module, keys):
        seen.append(("post", list(keys.missing_keys), list(keys.unexpected_keys)))
        keys.unexpected_keys.clear()

    target.register_load_state_dict_pre_hook(load_pre)
    target.register_load_state_dict_post_hook(load_post)
    src = {"weight": fiamma.ones(3, 2), "b": fiamma.full((3,), 7.0), "junk": fiamma.ones(1)}
    res = target.load_state_dict(src)
    assert seen == ["", ("post", [], ["junk"])]
    assert target.bias.tolist() == [7.0, 7.0, 7.0] and res.unexpected_keys == []
    legacy = nn.Linear(2, 3)
    legacy._register_load_state_dict_pre_hook(
        lambda sd, prefix, *rest: sd.update({prefix + "bias": fiamma.zeros(3)}))
    legacy.load_state_dict({"weight": fiamma.ones(3, 2)})
    assert legacy.bias.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_parity_backward_hooks(input_requires_grad):
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((4, 3)).astype(np.float32)
    b1 = rng.standard_normal(4).astype(np.float32)
    w2 = rng.standard_normal((2, 4)).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)

    def build(lib, mod):
        m = mod.Sequential(mod.Linear(3, 4), mod.Tanh(), mod.Linear(4, 2, bias=False))
        with lib.no_grad():
            m[0].weight.copy_(lib.tensor(w1))
            m[0].bias.copy_(lib.tensor(b1))
            m[2].weight.copy_(lib.tensor(w2))
        log = []
        for i, sub in enumerate(list(m) + [m]):
            sub.register_full_backward_pre_hook(
                lambda mod_, go, i=i: log.append(("pre", i, _np(go))))
            sub.register_full_backward_hook(
                lambda mod_, gi, go, i=i: log.append(("post", i, _np(gi), _np(go))))
        # the middle layer's grad_input is replaced by a hook, in both
        m[1].register_full_backward_hook(lambda mod_, gi, go: (gi[0] * 3,))
        return m, log

    mt, lt = build(torch, torch.nn)
    mf, lf = build(fiamma, nn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (mt(torch.tensor(x, requires_grad=input_requires_grad)) ** 2).sum().backward()
        (mf(fiamma.tensor(x, requires_grad=input_requires_grad)) ** 2).sum().backward()
    assert [e[:2] for e in lt] == [e[:2] for e in lf]
    for et, ef in zip(lt, lf):
        for gt, gf in zip(et[2:], ef[2:]):
            assert len(gt) == len(gf)
            for a, b in zip(gt, gf):
                assert (a is None) == (b is None)
                if a is not None:
                    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mf[0].weight.grad.numpy(), mt[0].weight.grad.numpy(),
                               rtol=1e-5, atol=1e-6)


# ---- the deprecated non-full backward hook (register_backward_hook) ----

def test_non_full_backward_hook_sees_the_output_nodes_gradients():
    """As PyTorch's: the hook runs on the node that made the output, so for a convolution
    ``grad_input`` is (input, weight, bias) gradients, with the FutureWarning for a forward
    whose node reads more than the module's inputs; a returned tuple replaces grad_input."""
    import warnings

    conv = nn.Conv2d(2, 3, 3)
    x = fiamma.randn(1, 2, 5, 5, requires_grad=True)
    seen = []

    def hook(mod, gi, go):
        seen.append((mod, [None if g is None else tuple(g.shape) for g in gi],
                     [tuple(g.shape) for g in go]))

    h = conv.register_backward_hook(hook)
    with pytest.warns(FutureWarning, match="forward contains multiple autograd Nodes"):
        y = conv(x * 1.0)
    y.sum().backward()
    assert seen == [(conv, [(1, 2, 5, 5), (3, 2, 3, 3), (3,)], [(1, 3, 3, 3)])]
    # a hook returning new grad_input changes what flows on: zero the input gradient
    x.grad = None
    h.remove()
    conv.register_backward_hook(lambda m, gi, go: (gi[0] * 0, gi[1], gi[2]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        conv(x * 1.0).sum().backward()
    assert float(x.grad.abs().sum()) == 0.0
    with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full"):
        conv.register_full_backward_hook(hook)


def test_non_full_backward_hook_single_node_no_warning():
    import warnings

    relu = nn.ReLU()
    x = fiamma.randn(4, requires_grad=True)
    a = x * 2.0
    got = []
    relu.register_backward_hook(lambda m, gi, go: got.append((len(gi), len(go))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        relu(a).sum().backward()
    assert got == [(1, 1)]


@pytest.mark.parity
def test_parity_non_full_backward_hook_conv():
    torch = pytest.importorskip("torch")
    import warnings

    import numpy as np

    w = np.random.default_rng(0).standard_normal((3, 2, 3, 3)).astype(np.float32)
    xin = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
    res = {}
    for lib, mod in (("torch", torch), ("fiamma", fiamma)):
        conv = (torch.nn if lib == "torch" else nn).Conv2d(2, 3, 3)
        with (torch if lib == "torch" else fiamma).no_grad():
            conv.weight.copy_(mod.tensor(w))
            conv.bias.zero_()
        x = mod.tensor(xin, requires_grad=True)
        out = []
        conv.register_backward_hook(lambda m, gi, go: out.append([g.detach().numpy() for g in gi]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            conv(x * 1.0).square().sum().backward()
        res[lib] = out[0]
    for a, b in zip(res["fiamma"], res["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
