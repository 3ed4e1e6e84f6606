"""Video Swin Transformer (swin3d_t/s/b): builders and parameter counts against the weights'
meta, the 3D relative position index and shift mask by hand, 3D window attention against a
float64 NumPy reference, shapes and gradients of a small model, and (marked ``parity``)
torchvision: swin3d_t eval logits with its weights loaded by key (window shrinking, padding and
shifted windows), a small model's float64 training loss and gradients, weights meta."""
import numpy as np
import pytest
from _torch_parity import assert_eval_matches, assert_train_grads_match, load_from_torch

import fiamma
from fiamma.vision import models
from fiamma.vision.models import video
from fiamma.vision.models.video import swin_transformer as S

SMALL = dict(patch_size=[2, 4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
             window_size=[2, 3, 3], stochastic_depth_prob=0.0, num_classes=5)


def test_swin3d_t_params_and_registry():
    for name in ["swin3d_t", "swin3d_s", "swin3d_b"]:
        assert name in models.list_models(module=video)
    m = video.swin3d_t()
    assert sum(p.numel() for p in m.parameters()) == \
        video.Swin3D_T_Weights.DEFAULT.meta["num_params"]
    blocks = [b for stage in m.features[::2] for b in stage]
    assert [b.attn.shift_size for b in blocks[:2]] == [[0, 0, 0], [4, 3, 3]]
    np.testing.assert_allclose([b.stochastic_depth.p for b in blocks],
                               np.linspace(0, 0.1, 12))
    assert list(video.Swin3D_B_Weights.__members__) == \
        ["KINETICS400_V1", "KINETICS400_IMAGENET22K_V1", "DEFAULT"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["swin3d_s"])  # swin3d_b: the same code, wider
def test_num_params_equal_meta_large(name):
    m = getattr(video, name)()
    assert sum(p.numel() for p in m.parameters()) == \
        models.get_model_weights(name).DEFAULT.meta["num_params"]


def test_relative_position_index_and_shift_mask_by_hand():
    a = S.ShiftedWindowAttention3d(8, [2, 1, 2], [0, 0, 0], 2)
    # tokens (t, x) = (0,0),(0,1),(1,0),(1,1); index = (dt + 1) * 1 * 3 + (dx + 1)
    want = [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
    assert a.relative_position_index.tolist() == want
    assert tuple(a.relative_position_bias_table.shape) == (9, 2)
    m = S._attention_mask_3d((2, 4, 4), (1, 2, 2), (0, 1, 1))
    assert m.shape == (8, 4, 4)
    assert (m[0] == 0).all()               # the first window holds one region
    # the last window of each time slice gathers 4 regions: only the diagonal is unmasked
    np.testing.assert_array_equal(m[3], np.where(np.eye(4), 0.0, -100.0))


def _ref_attention(x, wqkv, bqkv, wproj, bproj, bias, ws, heads):
    B, T, H, W, C = x.shape
    n = [T // ws[0], H // ws[1], W // ws[2]]
    win = x.reshape(B, n[0], ws[0], n[1], ws[1], n[2], ws[2], C)
    win = win.transpose(0, 1, 3, 5, 2, 4, 6, 7).reshape(-1, int(np.prod(ws)), C)
    qkv = (win @ wqkv.T + bqkv).reshape(win.shape[0], -1, 3, heads, C // heads)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    att = (q * (C // heads) ** -0.5) @ k.transpose(0, 1, 3, 2) + bias
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(win.shape[0], -1, C) @ wproj.T + bproj
    out = out.reshape(B, n[0], n[1], n[2], ws[0], ws[1], ws[2], C)
    return out.transpose(0, 1, 4, 2, 5, 3, 6, 7).reshape(B, T, H, W, C)


def test_window_attention_vs_numpy():
    fiamma.manual_seed(0)
    a = S.ShiftedWindowAttention3d(8, [2, 2, 2], [0, 0, 0], 2).double().eval()
    x = np.random.RandomState(0).randn(2, 4, 4, 6, 8)
    with fiamma.no_grad():
        a.relative_position_bias_table.normal_()
        got = a(fiamma.from_numpy(x)).numpy()
        bias = a.get_relative_position_bias([2, 2, 2]).numpy()
    p = {k: v.detach().numpy() for k, v in a.named_parameters()}
    want = _ref_attention(x, p["qkv.weight"], p["qkv.bias"], p["proj.weight"], p["proj.bias"],
                          bias, [2, 2, 2], 2)
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_small_model_shapes_backward_and_local_weights(tmp_path):
    m = S.SwinTransformer3d(**SMALL).train()
    # 5 frames and 30x38 pixels: patches 3x8x10, padded windows, shifted windows
    out = m(fiamma.rand(2, 3, 5, 30, 38))
    assert tuple(out.shape) == (2, 5)
    out.square().sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    path = tmp_path / "swin3d.pth"
    fiamma.save(m.state_dict(), str(path))
    m2 = S.SwinTransformer3d(**SMALL)
    m2.load_state_dict(models.load_weights(path))
    x = fiamma.rand(1, 3, 4, 16, 16)
    with fiamma.no_grad():
        np.testing.assert_array_equal(m2.eval()(x).numpy(), m.eval()(x).numpy())
    t = video.swin3d_t(weights=video.swin3d_t(num_classes=2).state_dict(), num_classes=2)
    assert tuple(t.head.weight.shape) == (2, 768)
    with pytest.raises(ValueError, match="SwinTransformer3d: expected a clip"):
        m(fiamma.zeros(1, 3, 16, 16))


@pytest.mark.parity
def test_swin3d_t_eval_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvv = pytest.importorskip("torchvision.models.video")
    torch.manual_seed(0)
    tm = tvv.swin3d_t().eval()
    fm = load_from_torch(video.swin3d_t(), tm, strict_keys=True)
    # 5 frames: the time window shrinks to the 3 patches; 60x76: padded, shifted 7x7 windows
    x = np.random.RandomState(0).rand(1, 3, 5, 60, 76).astype(np.float32)
    assert_eval_matches(fm, tm, x)


@pytest.mark.parity
def test_small_model_train_gradients_match_torchvision():
    torch = pytest.importorskip("torch")
    tvs = pytest.importorskip("torchvision.models.video.swin_transformer")
    torch.manual_seed(0)
    tm = tvs.SwinTransformer3d(**SMALL).double().train()
    fm = load_from_torch(S.SwinTransformer3d(**SMALL), tm).double().train()
    x = np.random.RandomState(1).rand(2, 3, 5, 30, 38)
    y = np.array([1, 4])
    assert_train_grads_match(fm, tm, x, y)


@pytest.mark.parity
def test_weights_meta_match_torchvision():
    tvs = pytest.importorskip("torchvision.models.video.swin_transformer")
    for name in ["Swin3D_T_Weights", "Swin3D_S_Weights", "Swin3D_B_Weights"]:
        ours, theirs = getattr(S, name), getattr(tvs, name)
        assert list(ours.__members__) == list(theirs.__members__)
        for key in ours.__members__:
            assert ours[key].url == theirs[key].url
            assert ours[key].meta == theirs[key].meta, (name, key)
            for k in ("crop_size", "resize_size", "mean", "std"):
                assert ours[key].transforms.keywords[k] == theirs[key].transforms.keywords[k]
