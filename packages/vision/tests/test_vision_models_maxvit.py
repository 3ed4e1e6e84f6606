"""MaxViT: the builder and parameter count against the weights' meta, window/grid partitions and
the relative position index by hand, attention against a float64 NumPy reference, shapes and
gradients of a small model, local checkpoints, and (marked ``parity``) torchvision: eval logits
of maxvit_t with its weights loaded by key, train-mode loss and every gradient (float64)."""
import numpy as np
import pytest
from _torch_parity import assert_eval_matches, assert_train_grads_match, load_from_torch

import fiamma
from fiamma.vision import models
from fiamma.vision.models import maxvit as M

SMALL = dict(input_size=(32, 32), stem_channels=8, partition_size=2, block_channels=[16, 32],
             block_layers=[1, 2], head_dim=8, stochastic_depth_prob=0.0, num_classes=5)


def _x(*shape, seed=0, dtype=np.float32):
    return fiamma.from_numpy(np.random.RandomState(seed).rand(*shape).astype(dtype))


def test_maxvit_t_params_and_registry():
    assert "maxvit_t" in models.list_models()
    m = models.maxvit_t()
    assert sum(p.numel() for p in m.parameters()) == \
        M.MaxVit_T_Weights.DEFAULT.meta["num_params"]
    assert [len(b.layers) for b in m.blocks] == [2, 2, 5, 2]
    assert [b.grid_size for b in m.blocks] == [(56, 56), (28, 28), (14, 14), (7, 7)]
    rates = [layer.layers.MBconv.stochastic_depth for b in m.blocks for layer in b.layers]
    assert isinstance(rates[0], fiamma.nn.Identity)
    np.testing.assert_allclose([r.p for r in rates[1:]], np.linspace(0, 0.2, 11)[1:])
    with pytest.raises(ValueError, match="not divisible by partition size 7"):
        models.maxvit_t(input_size=(200, 200))
    with pytest.raises(ValueError, match="input_size"):
        models.maxvit_t(weights="DEFAULT", input_size=(448, 448))


def test_relative_position_index_by_hand():
    idx = M._relative_position_index(2, 2)
    # tokens (0,0),(0,1),(1,0),(1,1); index = (dy + 1) * 3 + (dx + 1)
    assert idx.tolist() == [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]


def test_window_and_grid_partitions_by_hand():
    x = fiamma.arange(2 * 3 * 4 * 4).reshape(2, 3, 4, 4)
    w = M.WindowPartition()(x, 2)
    assert tuple(w.shape) == (2, 4, 4, 3)
    # window 1 is the top-right 2x2 block; channel c of token (i, j) is x[b, c, i, 2 + j]
    np.testing.assert_array_equal(w[1, 1].numpy(), x[1, :, 0:2, 2:4].reshape(3, 4).T.numpy())
    np.testing.assert_array_equal(M.WindowDepartition()(w, 2, 2, 2).numpy(), x.numpy())
    # grid: partitions of p = 4 / 2 = 2, swapped, so group g holds every other pixel
    layer = M.PartitionAttentionLayer(8, 4, 2, "grid", (4, 4), 2, fiamma.nn.GELU,
                                      fiamma.nn.LayerNorm, 0.0, 0.0, 0.0)
    g = layer.partition_swap(layer.partition_op(x, layer.p))
    np.testing.assert_array_equal(g[0, 0].numpy(), x[0, :, 0::2, 0::2].reshape(3, 4).T.numpy())
    with pytest.raises(ValueError, match="partition_type"):
        M.PartitionAttentionLayer(8, 4, 2, "rows", (4, 4), 2, fiamma.nn.GELU,
                                  fiamma.nn.LayerNorm, 0.0, 0.0, 0.0)


def test_attention_vs_numpy():
    fiamma.manual_seed(0)
    a = M.RelativePositionalMultiHeadAttention(8, 4, 4).double()
    x = np.random.RandomState(0).randn(2, 3, 4, 8)
    with fiamma.no_grad():
        got = a(fiamma.from_numpy(x)).numpy()
        bias = a.get_relative_positional_bias().numpy()
    p = {k: v.detach().numpy() for k, v in a.named_parameters()}
    qkv = x @ p["to_qkv.weight"].T + p["to_qkv.bias"]
    q, k, v = (t.reshape(2, 3, 4, 2, 4).transpose(0, 1, 3, 2, 4) for t in np.split(qkv, 3, -1))
    logits = q @ (k * 8 ** -0.5).swapaxes(-1, -2) + bias
    att = np.exp(logits - logits.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    out = (att @ v).transpose(0, 1, 3, 2, 4).reshape(2, 3, 4, 8)
    want = out @ p["merge.weight"].T + p["merge.bias"]
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert bias.shape == (1, 2, 4, 4)


def test_small_model_shapes_backward_and_local_weights(tmp_path):
    m = M.MaxVit(**SMALL).train()
    out = m(_x(2, 3, 32, 32))
    assert tuple(out.shape) == (2, 5)
    out.square().sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    path = tmp_path / "maxvit.pth"
    fiamma.save(m.state_dict(), str(path))
    m2 = M.MaxVit(**SMALL)
    m2.load_state_dict(models.load_weights(path))
    with fiamma.no_grad():
        np.testing.assert_array_equal(m2.eval()(_x(1, 3, 32, 32)).numpy(),
                                      m.eval()(_x(1, 3, 32, 32)).numpy())
        with pytest.raises(ValueError, match=r"built for \(8, 8\) feature maps got \(9, 9\)"):
            m(_x(1, 3, 36, 36))


def test_maxvit_t_weights_from_a_local_file(tmp_path):
    src = models.maxvit_t(num_classes=3)
    path = tmp_path / "maxvit_t.pth"
    fiamma.save(src.state_dict(), str(path))
    for w in (str(path), src.state_dict()):
        m = models.maxvit_t(weights=w, num_classes=3)
        for (k, a), b in zip(m.state_dict().items(), src.state_dict().values()):
            assert fiamma.equal(a, b), k


@pytest.mark.parity
def test_maxvit_t_eval_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvm = pytest.importorskip("torchvision.models")
    torch.manual_seed(0)
    tm = tvm.maxvit_t().eval()
    fm = load_from_torch(models.maxvit_t(), tm, strict_keys=True)
    x = np.random.RandomState(0).rand(1, 3, 224, 224).astype(np.float32)
    assert_eval_matches(fm, tm, x)


@pytest.mark.parity
def test_small_maxvit_train_gradients_match_torchvision():
    torch = pytest.importorskip("torch")
    tvx = pytest.importorskip("torchvision.models.maxvit")
    torch.manual_seed(0)
    cfg = dict(SMALL, stochastic_depth_prob=0.0)
    tm = tvx.MaxVit(**cfg).double().train()
    fm = load_from_torch(M.MaxVit(**cfg), tm).double().train()
    x = np.random.RandomState(1).rand(3, 3, 32, 32)
    y = np.array([1, 4, 0])
    assert_train_grads_match(fm, tm, x, y)


@pytest.mark.parity
def test_weights_meta_match_torchvision():
    tvx = pytest.importorskip("torchvision.models.maxvit")
    ours, theirs = M.MaxVit_T_Weights.IMAGENET1K_V1, tvx.MaxVit_T_Weights.IMAGENET1K_V1
    assert ours.url == theirs.url
    assert ours.meta == theirs.meta
    for key in ("crop_size", "resize_size"):
        assert ours.transforms.keywords[key] == theirs.transforms.keywords[key]
    assert ours.transforms.keywords["interpolation"].value == \
        theirs.transforms.keywords["interpolation"].value
