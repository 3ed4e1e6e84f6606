"""Swin Transformer V1/V2: builders and parameter counts against the weights' meta, the
relative position index and shift mask by hand, window attention against a float64 NumPy
reference, and (marked ``parity``) torchvision: eval logits with its weights loaded by key,
losses and every gradient in training (float64), weights meta."""
import numpy as np
import pytest

import fiamma
from fiamma.vision import models
from fiamma.vision.models import swin_transformer as S

SMALL = ["swin_t", "swin_v2_t"]


def test_builders_registered_and_small_ones_run():
    for name in ["swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b"]:
        assert name in models.list_models()
    for name in SMALL:
        m = getattr(models, name)().eval()
        assert m.__class__ is S.SwinTransformer
        n = models.get_model_weights(name).DEFAULT.meta["num_params"]
        assert sum(p.numel() for p in m.parameters()) == n
        with fiamma.no_grad():
            # 70x90: patches 17x22, not whole windows, odd merges (padding paths)
            assert tuple(m(fiamma.rand(1, 3, 70, 90)).shape) == (1, 1000)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["swin_s", "swin_b", "swin_v2_s", "swin_v2_b"])
def test_num_params_equal_meta_large(name):
    enum = models.get_model_weights(name)
    m = getattr(models, name)()
    assert sum(p.numel() for p in m.parameters()) == enum.DEFAULT.meta["num_params"]


def test_relative_position_index_and_shift_mask_by_hand():
    a = S.ShiftedWindowAttention(8, [2, 2], [0, 0], 2)
    # tokens (0,0),(0,1),(1,0),(1,1); index = (dy + 1) * 3 + (dx + 1)
    want = [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
    assert a.relative_position_index.reshape(4, 4).tolist() == want
    m = S._shift_mask(4, 4, [2, 2], [1, 1])
    assert m.shape == (4, 4, 4)
    assert (m[0] == 0).all()               # the top-left window holds one region
    # bottom-right window: tokens from 4 regions, so only the diagonal is unmasked
    np.testing.assert_array_equal(m[3], np.where(np.eye(4), 0.0, -100.0))


def _ref_attention(x, wqkv, bqkv, wproj, bproj, bias, ws, heads, shift):
    B, H, W, C = x.shape
    x = np.roll(x, (-shift, -shift), axis=(1, 2)) if shift else x
    nh, nw = H // ws, W // ws
    win = x.reshape(B, nh, ws, nw, ws, C).transpose(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)
    qkv = (win @ wqkv.T + bqkv).reshape(win.shape[0], ws * ws, 3, heads, C // heads)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    att = (q * (C // heads) ** -0.5) @ k.transpose(0, 1, 3, 2) + bias
    if shift:
        att = att.reshape(B, nh * nw, heads, ws * ws, ws * ws)
        att = att + S._shift_mask(H, W, [ws, ws], [shift, shift])[None, :, None]
        att = att.reshape(-1, heads, ws * ws, ws * ws)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(-1, ws * ws, C) @ wproj.T + bproj
    out = out.reshape(B, nh, nw, ws, ws, C).transpose(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
    return np.roll(out, (shift, shift), axis=(1, 2)) if shift else out


@pytest.mark.parametrize("shift", [0, 2])
def test_window_attention_vs_numpy(shift):
    fiamma.manual_seed(0)
    a = S.ShiftedWindowAttention(8, [4, 4], [shift, shift], 2).double().eval()
    with fiamma.no_grad():
        a.relative_position_bias_table.normal_()
    x = np.random.RandomState(0).randn(2, 8, 8, 8)
    with fiamma.no_grad():
        got = a(fiamma.from_numpy(x)).numpy()
        bias = a.get_relative_position_bias().numpy()
    p = {k: v.detach().numpy() for k, v in a.named_parameters()}
    want = _ref_attention(x, p["qkv.weight"], p["qkv.bias"], p["proj.weight"], p["proj.bias"],
                          bias, 4, 2, shift)
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_v2_bias_and_key_bias_zero():
    a = S.ShiftedWindowAttentionV2(8, [4, 4], [0, 0], 2)
    assert a.qkv.bias[8:16].abs().max().item() == 0.0
    b = a.get_relative_position_bias()
    assert tuple(b.shape) == (1, 2, 16, 16)
    assert 0.0 <= b.min().item() and b.max().item() <= 16.0
    t = a.relative_coords_table.numpy()
    # log-spaced coordinates: the corners (+-(w-1)) map to sign * log2(9) / 3
    np.testing.assert_allclose(abs(t[0, 0, 0, 0]), np.log2(9.0) / 3, rtol=1e-6)


@pytest.mark.parity
@pytest.mark.parametrize("name", SMALL)
def test_eval_logits_match_torchvision(name):
    torch = pytest.importorskip("torch")
    tvm = pytest.importorskip("torchvision.models")
    torch.manual_seed(0)
    tm = getattr(tvm, name)().eval()
    fm = getattr(models, name)().eval()
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict({k: fiamma.from_numpy(v.numpy().copy())
                        for k, v in tm.state_dict().items()})
    x = np.random.RandomState(0).rand(2, 3, 72, 88).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x)).numpy()
    with fiamma.no_grad():
        got = fm(fiamma.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, atol=2e-5)


@pytest.mark.parity
@pytest.mark.parametrize("v2", [False, True])
def test_train_gradients_match_torchvision(v2):
    torch = pytest.importorskip("torch")
    tvs = pytest.importorskip("torchvision.models.swin_transformer")
    cfg = dict(patch_size=[2, 2], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
               window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=5)
    tkw = dict(block=tvs.SwinTransformerBlockV2, downsample_layer=tvs.PatchMergingV2) if v2 \
        else {}
    fkw = dict(block=S.SwinTransformerBlockV2, downsample_layer=S.PatchMergingV2) if v2 else {}
    torch.manual_seed(0)
    tm = tvs.SwinTransformer(**cfg, **tkw).double().train()
    fm = S.SwinTransformer(**cfg, **fkw)
    fm.load_state_dict({k: fiamma.from_numpy(v.numpy().copy())
                        for k, v in tm.state_dict().items()})
    fm = fm.double().train()
    x = np.random.RandomState(1).rand(2, 3, 20, 28)
    y = np.array([1, 4])
    tl = torch.nn.functional.cross_entropy(tm(torch.from_numpy(x)), torch.from_numpy(y))
    fl = fiamma.nn.functional.cross_entropy(fm(fiamma.from_numpy(x)), fiamma.from_numpy(y))
    np.testing.assert_allclose(fl.item(), tl.item(), rtol=1e-10)
    tl.backward()
    fl.backward()
    fg = dict(fm.named_parameters())
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(fg[n].grad.numpy(), p.grad.numpy(), atol=1e-10, err_msg=n)


@pytest.mark.parity
def test_weights_meta_match_torchvision():
    tvs = pytest.importorskip("torchvision.models.swin_transformer")
    for name in ["Swin_T_Weights", "Swin_S_Weights", "Swin_B_Weights", "Swin_V2_T_Weights",
                 "Swin_V2_S_Weights", "Swin_V2_B_Weights"]:
        ours, theirs = getattr(S, name).IMAGENET1K_V1, getattr(tvs, name).IMAGENET1K_V1
        assert ours.url == theirs.url
        for key in ("num_params", "min_size", "recipe", "_metrics", "_ops", "_file_size",
                    "_docs"):
            assert ours.meta[key] == theirs.meta[key], (name, key)
        assert ours.meta["categories"] == theirs.meta["categories"]
        for key in ("crop_size", "resize_size"):
            assert ours.transforms.keywords[key] == theirs.transforms.keywords[key]
