"""nn.utils.prune: masks, reparametrization (``<name>_orig`` / ``<name>_mask`` / the
forward pre-hook), iterative pruning through PruningContainer, global pruning, remove, and
the deterministic methods' masks against torch (parity)."""

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn.utils import prune


def _linear(w):
    lin = nn.Linear(w.shape[1], w.shape[0])
    with fiamma.no_grad():
        lin.weight.copy_(fiamma.tensor(w))
    return lin


def test_l1_unstructured_reparametrizes():
    sign = np.where(np.arange(12) % 2, -1, 1).reshape(3, 4)
    w = np.arange(1, 13, dtype=np.float32).reshape(3, 4) * sign
    lin = _linear(w)
    prune.l1_unstructured(lin, "weight", amount=0.25)  # the 3 smallest |w|: 1, 2, 3
    names = [n for n, _ in lin.named_parameters()]
    assert "weight_orig" in names and "weight" not in names
    assert [n for n, _ in lin.named_buffers()] == ["weight_mask"]
    expected = np.ones(12, np.float32)
    expected[:3] = 0
    np.testing.assert_array_equal(lin.weight_mask.numpy().ravel(), expected)
    np.testing.assert_array_equal(lin.weight.detach().numpy(), w * expected.reshape(3, 4))
    assert prune.is_pruned(lin)
    # the hook recomputes the weight from weight_orig before every forward
    with fiamma.no_grad():
        lin.weight_orig.fill_(2.0)
    out = lin(fiamma.ones(1, 4))
    want = (2.0 * expected.reshape(3, 4)).sum(1)[None] + lin.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), want)
    # gradients reach weight_orig through the mask
    out.sum().backward()
    np.testing.assert_array_equal(lin.weight_orig.grad.numpy(), np.tile(expected.reshape(3, 4), 1))


def test_iterative_pruning_uses_container_and_remove():
    w = np.arange(1, 25, dtype=np.float32).reshape(6, 4)
    lin = _linear(w)
    prune.l1_unstructured(lin, "weight", amount=2)
    prune.ln_structured(lin, "weight", amount=0.5, n=2, dim=0)
    hooks = list(lin._forward_pre_hooks.values())
    assert len(hooks) == 1 and isinstance(hooks[0], prune.PruningContainer)
    assert [type(m).__name__ for m in hooks[0]] == ["L1Unstructured", "LnStructured"]
    mask = lin.weight_mask.numpy()
    # rows 0-2 have the smallest L2 norms: pruned; entries 1, 2 were already pruned
    assert mask[:3].sum() == 0 and mask[3:].sum() == 12
    prune.remove(lin, "weight")
    assert not prune.is_pruned(lin)
    assert [n for n, _ in lin.named_parameters()] == ["bias", "weight"]
    assert list(lin.named_buffers()) == []
    assert isinstance(lin.weight, nn.Parameter)
    np.testing.assert_array_equal(lin.weight.detach().numpy(), w * mask)
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(lin, "weight")


def test_custom_method_and_bad_amounts():
    class EveryOther(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.flatten()[::2] = 0
            return mask

    lin = nn.Linear(3, 5)
    EveryOther.apply(lin, "bias")
    np.testing.assert_array_equal(lin.bias_mask.numpy(), [0, 1, 0, 1, 0])
    with pytest.raises(ValueError, match="amount=1.5"):
        prune.l1_unstructured(nn.Linear(2, 2), "weight", amount=1.5)
    with pytest.raises(ValueError, match="amount=5"):
        prune.l1_unstructured(nn.Linear(2, 2), "weight", amount=5)
    with pytest.raises(TypeError, match="amount"):
        prune.l1_unstructured(nn.Linear(2, 2), "weight", amount="half")
    # a failed first pruning leaves the module as it was
    lin = nn.Linear(2, 2)
    with pytest.raises(ValueError):
        prune.l1_unstructured(lin, "weight", amount=5)
    assert sorted(n for n, _ in lin.named_parameters()) == ["bias", "weight"]
    with pytest.raises(ValueError, match="structured pruning"):
        prune.ln_structured(nn.Linear(2, 2), "bias", amount=1, n=1, dim=0)


def test_random_methods_counts():
    fiamma.manual_seed(0)
    conv = nn.Conv2d(2, 8, 3)
    prune.random_unstructured(conv, "weight", amount=0.3)
    assert int((conv.weight_mask == 0).sum()) == round(0.3 * 144)
    prune.random_structured(conv, "weight", amount=3, dim=0)
    m = conv.weight_mask.numpy()
    assert (m.reshape(8, -1).sum(1) == 0).sum() >= 3


@pytest.mark.parity
def test_prune_parity():
    torch = pytest.importorskip("torch")
    tprune = pytest.importorskip("torch.nn.utils.prune")
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal(s).astype(np.float32) for s in [(6, 1, 3, 3), (10, 20), (4, 10)]]

    def build(lib, nnlib):
        mods = [nnlib.Conv2d(1, 6, 3), nnlib.Linear(20, 10), nnlib.Linear(10, 4)]
        for m, w in zip(mods, ws):
            with lib.no_grad():
                m.weight.copy_(lib.tensor(w))
        return mods

    results = []
    for lib, nnlib, P in [(fiamma, nn, prune), (torch, torch.nn, tprune)]:
        conv, fc1, fc2 = build(lib, nnlib)
        P.l1_unstructured(conv, "weight", amount=0.3)
        P.ln_structured(conv, "weight", amount=0.5, n=2, dim=0)
        P.ln_structured(fc1, "weight", amount=3, n=1, dim=1)
        P.global_unstructured([(fc1, "weight"), (fc2, "weight")],
                              pruning_method=P.L1Unstructured, amount=0.4)
        P.custom_from_mask(fc2, "bias", mask=lib.tensor([1.0, 0.0, 1.0, 0.0]))
        P.remove(conv, "weight")
        results.append([conv.weight.detach().numpy(), fc1.weight_mask.numpy(),
                        fc2.weight_mask.numpy(), fc2.bias_mask.numpy(),
                        sorted(k for k in fc1.state_dict())])
    for a, b in zip(*results):
        if isinstance(a, list):
            assert a == b
        else:
            np.testing.assert_array_equal(a, b)
