"""MViT (mvit_v1_b, mvit_v2_s): builders and parameter counts against the weights' meta, the
relative position term against a NumPy reference, shapes and gradients of a small model,
size errors, local checkpoints, and (marked ``parity``) torchvision: small V1/V2 models'
float64 training losses and gradients (odd grids: interpolated relative positions), and
mvit_v2_s eval logits with its weights loaded by key."""
import numpy as np
import pytest
from _torch_parity import assert_eval_matches, assert_train_grads_match, load_from_torch

import fiamma
from fiamma.vision import models
from fiamma.vision.models import video
from fiamma.vision.models.video import mvit as M


def _setting(cls):
    return [cls(1, 16, 16, [3, 3, 3], [3, 3, 3], [1, 1, 1], [1, 2, 2]),
            cls(2, 16, 32, [3, 3, 3], [3, 3, 3], [1, 2, 2], [1, 2, 2]),
            cls(2, 32, 32, [], [3, 3, 3], [], [1, 1, 1])]


V1 = dict(residual_pool=False, residual_with_cls_embed=False, rel_pos_embed=False,
          proj_after_attn=False)
V2 = dict(residual_pool=True, residual_with_cls_embed=False, rel_pos_embed=True,
          proj_after_attn=True)
# 36x44 pixels: a 9x11 patch grid, pooled to 5x6 (odd sizes, interpolated relative positions)
SIZE = dict(spatial_size=(36, 44), temporal_size=4, num_classes=5, dropout=0.0)


def test_builders_and_params():
    assert {"mvit_v1_b", "mvit_v2_s"} <= set(models.list_models(module=video))
    m = video.mvit_v2_s()
    assert sum(p.numel() for p in m.parameters()) == \
        video.MViT_V2_S_Weights.DEFAULT.meta["num_params"]
    assert m.pos_encoding.spatial_pos is None and m.blocks[0].attn.rel_pos_h is not None
    with pytest.raises(ValueError, match="spatial_size"):
        video.mvit_v2_s(weights="DEFAULT", spatial_size=(112, 112))


@pytest.mark.slow
def test_mvit_v1_b_params_and_state_dict_weights():
    m = video.mvit_v1_b()
    assert sum(p.numel() for p in m.parameters()) == \
        video.MViT_V1_B_Weights.DEFAULT.meta["num_params"]
    assert m.pos_encoding.spatial_pos is not None and m.blocks[0].attn.rel_pos_h is None
    t = video.mvit_v1_b(weights=m.state_dict())
    assert fiamma.equal(t.head[1].weight, m.head[1].weight)


def test_rel_pos_term_vs_numpy():
    rs = np.random.RandomState(0)
    q = rs.randn(1, 2, 1 + 2 * 3 * 3, 4)
    rel_h, rel_w, rel_t = rs.randn(5, 4), rs.randn(5, 4), rs.randn(3, 4)
    attn = rs.randn(1, 2, 19, 1 + 2 * 3 * 3)
    got = M._add_rel_pos(fiamma.from_numpy(attn), fiamma.from_numpy(q), (2, 3, 3), (2, 3, 3),
                         fiamma.from_numpy(rel_h), fiamma.from_numpy(rel_w),
                         fiamma.from_numpy(rel_t)).numpy()
    want = attn.copy()
    grid = [(t, h, w) for t in range(2) for h in range(3) for w in range(3)]
    for head in range(2):
        for i, (qt, qh, qw) in enumerate(grid):
            for j, (kt, kh, kw) in enumerate(grid):
                qv = q[0, head, 1 + i]
                want[0, head, 1 + i, 1 + j] += (qv @ rel_h[qh - kh + 2] + qv @ rel_w[qw - kw + 2]
                                                + qv @ rel_t[qt - kt + 1])
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_small_models_forward_backward_and_weights(tmp_path):
    for opts in (V1, V2):
        m = M.MViT(block_setting=_setting(M.MSBlockConfig), **SIZE, **opts).train()
        out = m(fiamma.rand(2, 3, 4, 36, 44))
        assert tuple(out.shape) == (2, 5)
        out.square().sum().backward()
        assert all(p.grad is not None for p in m.parameters())
    with pytest.raises(ValueError, match=r"built for \(2, 9, 11\) patches"):
        m(fiamma.rand(1, 3, 4, 32, 32))
    path = tmp_path / "mvit.pth"
    fiamma.save(m.state_dict(), str(path))
    m2 = M.MViT(block_setting=_setting(M.MSBlockConfig), **SIZE, **V2)
    m2.load_state_dict(models.load_weights(path))
    x = fiamma.rand(1, 3, 4, 36, 44)
    with fiamma.no_grad():
        np.testing.assert_array_equal(m2.eval()(x).numpy(), m.eval()(x).numpy())


@pytest.mark.parity
@pytest.mark.parametrize("version", ["v1", "v2", "v2-cls"])
def test_small_models_train_gradients_match_torchvision(version):
    torch = pytest.importorskip("torch")
    tvm = pytest.importorskip("torchvision.models.video.mvit")
    opts = dict(V1 if version == "v1" else V2)
    if version == "v2-cls":
        opts["residual_with_cls_embed"] = True
    torch.manual_seed(0)
    tm = tvm.MViT(block_setting=_setting(tvm.MSBlockConfig), **SIZE, **opts).double().train()
    fm = M.MViT(block_setting=_setting(M.MSBlockConfig), **SIZE, **opts)
    fm = load_from_torch(fm, tm, strict_keys=True).double().train()
    x = np.random.RandomState(1).rand(2, 3, 4, 36, 44)
    y = np.array([1, 4])
    assert_train_grads_match(fm, tm, x, y)


@pytest.mark.parity
@pytest.mark.slow
def test_mvit_v2_s_eval_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvv = pytest.importorskip("torchvision.models.video")
    torch.manual_seed(0)
    tm = tvv.mvit_v2_s().eval()
    fm = load_from_torch(video.mvit_v2_s(), tm, strict_keys=True)
    x = np.random.RandomState(0).rand(1, 3, 16, 224, 224).astype(np.float32)
    assert_eval_matches(fm, tm, x)


@pytest.mark.parity
def test_weights_meta_match_torchvision():
    tvm = pytest.importorskip("torchvision.models.video.mvit")
    for name in ["MViT_V1_B_Weights", "MViT_V2_S_Weights"]:
        ours, theirs = getattr(M, name).KINETICS400_V1, getattr(tvm, name).KINETICS400_V1
        assert ours.url == theirs.url
        assert ours.meta == theirs.meta, name
        for k in ("crop_size", "resize_size", "mean", "std"):
            assert ours.transforms.keywords[k] == theirs.transforms.keywords[k]


def test_clip_too_small_for_rel_pos_is_refused():
    # 16 x 16 pixels: a 4 x 4 token grid, pooled to nothing by V2's third stride; V1 (no
    # relative position embeddings: its pooling convolutions keep one token) builds
    with pytest.raises(ValueError, match="MViT: the relative position embeddings"):
        video.mvit_v2_s(spatial_size=(16, 16), temporal_size=2)
    m = video.mvit_v1_b(num_classes=3, spatial_size=(16, 16), temporal_size=2).eval()
    with fiamma.no_grad():
        assert tuple(m(fiamma.zeros(1, 3, 2, 16, 16)).shape) == (1, 3)
    assert tuple(video.mvit_v2_s(spatial_size=(32, 32), temporal_size=2).pos_encoding
                 .spatial_size) == (8, 8)
