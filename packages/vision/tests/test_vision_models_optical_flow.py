"""RAFT (raft_small, raft_large): builders and parameter counts against the weights' meta, the
coordinate grid, convex and bilinear flow upsampling, the correlation volume and its pyramid
lookup against NumPy, shapes and gradients, input errors, local checkpoints, the OpticalFlow
preset, and (marked ``parity``) torchvision: every flow estimate with its weights loaded by
key, and the training loss and gradients of raft_small."""
import numpy as np
import pytest

import fiamma
from fiamma.vision import models
from fiamma.vision.models import optical_flow as O
from fiamma.vision.models.optical_flow import _utils as U, raft as R
from fiamma.vision.transforms._presets import OpticalFlow


def _pair(h=128, w=136, seed=0, dtype=np.float32):
    rs = np.random.RandomState(seed)
    a = (rs.rand(1, 3, h, w) * 2 - 1).astype(dtype)
    b = (np.roll(a, 3, axis=-1) + 0.05 * rs.randn(*a.shape)).astype(dtype)
    return a, b


@pytest.mark.parametrize("name", ["raft_small", "raft_large"])
def test_builders_and_params(name):
    assert name in models.list_models(module=O)
    m = getattr(O, name)()
    assert sum(p.numel() for p in m.parameters()) == \
        models.get_model_weights(name).DEFAULT.meta["num_params"]
    assert (m.mask_predictor is None) == (name == "raft_small")


def test_coords_grid_by_hand():
    g = U.make_coords_grid(2, 2, 3)
    assert tuple(g.shape) == (2, 2, 2, 3) and g.dtype == fiamma.float32
    assert g[1, 0].tolist() == [[0, 1, 2], [0, 1, 2]]
    assert g[1, 1].tolist() == [[0, 0, 0], [1, 1, 1]]


def test_upsample_flow_convex_and_bilinear():
    rs = np.random.RandomState(0)
    flow = rs.randn(1, 2, 3, 4)
    f = fiamma.from_numpy(flow)
    # equal weights: every fine pixel is 8 x the mean of the zero-padded 3x3 coarse neighbourhood
    up = U.upsample_flow(f, fiamma.zeros(1, 9 * 64, 3, 4, dtype=fiamma.float64)).numpy()
    pad = np.pad(flow, ((0, 0), (0, 0), (1, 1), (1, 1)))
    mean = sum(pad[:, :, i:i + 3, j:j + 4] for i in range(3) for j in range(3)) / 9
    np.testing.assert_allclose(up, 8 * np.repeat(np.repeat(mean, 8, 2), 8, 3), atol=1e-12)
    # all weight on the centre (index 4): nearest-neighbour upsampling
    mask = np.zeros((1, 9, 64, 3, 4))
    mask[:, 4] = 50.0
    up = U.upsample_flow(f, fiamma.from_numpy(mask.reshape(1, 576, 3, 4))).numpy()
    np.testing.assert_allclose(up, 8 * np.repeat(np.repeat(flow, 8, 2), 8, 3), atol=1e-12)
    lin = U.upsample_flow(f).numpy()
    assert lin.shape == (1, 2, 24, 32)
    np.testing.assert_allclose(lin[..., 0, 0], 8 * flow[..., 0, 0])
    np.testing.assert_allclose(lin[..., -1, -1], 8 * flow[..., -1, -1])


def test_corr_volume_and_lookup_vs_numpy():
    rs = np.random.RandomState(1)
    f1, f2 = rs.randn(2, 1, 5, 8, 8)
    c = R.CorrBlock(num_levels=2, radius=1)
    c.build_pyramid(fiamma.from_numpy(f1), fiamma.from_numpy(f2))
    corr = np.einsum("bcij,bckl->bijkl", f1, f2) / np.sqrt(5)
    np.testing.assert_allclose(c.corr_pyramid[0].numpy().reshape(1, 8, 8, 8, 8), corr,
                               atol=1e-12)
    pooled = corr.reshape(1, 8, 8, 4, 2, 4, 2).mean(axis=(4, 6))
    np.testing.assert_allclose(c.corr_pyramid[1].numpy().reshape(1, 8, 8, 4, 4), pooled,
                               atol=1e-12)
    # lookups at integer centres: channel a * 3 + b holds corr at x + (a - 1), y + (b - 1)
    coords = U.make_coords_grid(1, 8, 8).double()
    coords[:, 0] += 2  # look 2 pixels to the right
    out = c.index_pyramid(coords).numpy()
    assert out.shape == (1, 18, 8, 8)
    for i, j in [(0, 0), (3, 4), (7, 5)]:
        for a in range(3):
            for b in range(3):
                x, y = j + 2 + (a - 1), i + (b - 1)
                want = corr[0, i, j, y, x] if 0 <= x < 8 and 0 <= y < 8 else 0.0
                np.testing.assert_allclose(out[0, a * 3 + b, i, j], want, atol=1e-12)
    with pytest.raises(ValueError, match="at least 4"):
        c.build_pyramid(fiamma.zeros(1, 5, 3, 8), fiamma.zeros(1, 5, 3, 8))


def test_raft_small_forward_backward():
    m = O.raft_small().train()
    a, b = _pair(128, 128)
    flows = m(fiamma.from_numpy(a), fiamma.from_numpy(b), num_flow_updates=2)
    assert len(flows) == 2 and all(tuple(f.shape) == (1, 2, 128, 128) for f in flows)
    (flows[0].abs().mean() + flows[1].abs().mean()).backward()
    missing = [n for n, p in m.named_parameters() if p.grad is None]
    assert not missing


def test_input_errors_and_local_weights(tmp_path):
    m = O.raft_small().eval()
    with pytest.raises(ValueError, match="divisible by 8"):
        m(fiamma.zeros(1, 3, 128, 130), fiamma.zeros(1, 3, 128, 130))
    with pytest.raises(ValueError, match="same shape"):
        m(fiamma.zeros(1, 3, 128, 128), fiamma.zeros(1, 3, 128, 136))
    with pytest.raises(ValueError, match="at least 8 \\* 16 = 128"):
        m(fiamma.zeros(1, 3, 64, 128), fiamma.zeros(1, 3, 64, 128))
    path = tmp_path / "raft.pth"
    fiamma.save(m.state_dict(), str(path))
    a, b = _pair(128, 128)
    with fiamma.no_grad():
        want = m(fiamma.from_numpy(a), fiamma.from_numpy(b), num_flow_updates=1)[0].numpy()
        for w in (str(path), m.state_dict()):
            m2 = O.raft_small(weights=w).eval()
            got = m2(fiamma.from_numpy(a), fiamma.from_numpy(b), num_flow_updates=1)[0]
            np.testing.assert_array_equal(got.numpy(), want)
    assert O.Raft_Large_Weights.DEFAULT is O.Raft_Large_Weights.C_T_SKHT_V2
    with pytest.raises(ValueError, match="Raft_Small_Weights"):
        O.raft_small(weights="C_T_SKHT_V2")


def test_optical_flow_preset():
    tf = O.Raft_Small_Weights.DEFAULT.transforms()
    assert isinstance(tf, OpticalFlow)
    img = fiamma.from_numpy(np.array([[[0, 51, 255]]] * 3, dtype=np.uint8))
    a, b = tf(img, img.float() / 255)
    want = np.array([-1.0, 51 / 255 * 2 - 1, 1.0])
    np.testing.assert_allclose(a.numpy()[0, 0], want, rtol=1e-6)
    np.testing.assert_allclose(b.numpy()[0, 0], want, rtol=1e-6)


def _torch_pair(name):
    torch = pytest.importorskip("torch")
    tv = pytest.importorskip("torchvision.models.optical_flow")
    torch.manual_seed(0)
    tm, fm = getattr(tv, name)(), getattr(O, name)()
    assert list(fm.state_dict()) == list(tm.state_dict())
    fm.load_state_dict({k: fiamma.from_numpy(v.numpy().copy())
                        for k, v in tm.state_dict().items()})
    return torch, tm, fm


@pytest.mark.parity
@pytest.mark.parametrize("name", ["raft_small", "raft_large"])
def test_eval_flows_match_torchvision(name):
    torch, tm, fm = _torch_pair(name)
    a, b = _pair()
    with torch.no_grad():
        want = tm.eval()(torch.from_numpy(a), torch.from_numpy(b), num_flow_updates=3)
    with fiamma.no_grad():
        got = fm.eval()(fiamma.from_numpy(a), fiamma.from_numpy(b), num_flow_updates=3)
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-4)


@pytest.mark.parity
def test_raft_small_train_gradients_match_torchvision():
    torch, tm, fm = _torch_pair("raft_small")
    # float32: torchvision's coordinate grid is float32 and its grid_sample mixes no dtypes
    tm, fm = tm.train(), fm.train()
    a, b = _pair(128, 128, seed=3)
    tf = tm(torch.from_numpy(a), torch.from_numpy(b), num_flow_updates=2)
    ff = fm(fiamma.from_numpy(a), fiamma.from_numpy(b), num_flow_updates=2)
    tl = tf[0].abs().mean() * 0.8 + tf[1].abs().mean()
    fl = ff[0].abs().mean() * 0.8 + ff[1].abs().mean()
    np.testing.assert_allclose(fl.item(), tl.item(), rtol=1e-5)
    tl.backward()
    fl.backward()
    scale = max(np.abs(p.grad.numpy()).max() for p in tm.parameters())
    fg = dict(fm.named_parameters())
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(fg[n].grad.numpy(), p.grad.numpy(), atol=1e-5 * scale,
                                   err_msg=n)


@pytest.mark.parity
def test_weights_meta_match_torchvision():
    tv = pytest.importorskip("torchvision.models.optical_flow")
    for name in ["Raft_Large_Weights", "Raft_Small_Weights"]:
        ours, theirs = getattr(O, name), getattr(tv, name)
        assert list(ours.__members__) == list(theirs.__members__)
        for key in ours.__members__:
            assert ours[key].url == theirs[key].url
            drop = {"_docs"}  # written in our own words
            assert {k: v for k, v in ours[key].meta.items() if k not in drop} == \
                {k: v for k, v in theirs[key].meta.items() if k not in drop}, (name, key)


@pytest.mark.parity
def test_optical_flow_preset_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvo = pytest.importorskip("torchvision.models.optical_flow")
    img = np.random.RandomState(0).randint(0, 256, (2, 3, 16, 24)).astype(np.uint8)
    want = tvo.Raft_Small_Weights.DEFAULT.transforms()(torch.from_numpy(img),
                                                       torch.from_numpy(img))
    got = O.Raft_Small_Weights.DEFAULT.transforms()(fiamma.from_numpy(img),
                                                    fiamma.from_numpy(img))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-6)
