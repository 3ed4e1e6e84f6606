"""Video classification models (R3D-18, MC3-18, R(2+1)D-18, S3D): builders, parameter counts
against the weights' meta, shapes and gradients on small clips, local checkpoints through
``weights=``, the VideoClassification preset by hand, and (marked ``parity``) torchvision: eval
logits with its weights loaded by key, train-mode losses and gradients, weights meta."""
import numpy as np
import pytest
from _torch_parity import assert_eval_matches, assert_train_grads_match, load_from_torch

import fiamma
from fiamma.vision import models
from fiamma.vision.models import video
from fiamma.vision.transforms._presets import VideoClassification

RESNETS = ["r3d_18", "mc3_18", "r2plus1d_18"]


def _clip(*shape, seed=0):
    return fiamma.from_numpy(np.random.RandomState(seed).rand(*shape).astype(np.float32))


@pytest.mark.parametrize("name", RESNETS)
def test_resnet_builders_params_shapes_and_backward(name):
    assert name in models.list_models(module=video)
    m = getattr(video, name)(num_classes=7).train()
    # the weights' count with a 400-way classifier, less the difference of the 7-way one
    n = models.get_model_weights(name).DEFAULT.meta["num_params"] - 393 * 513
    assert sum(p.numel() for p in m.parameters()) == n
    out = m(_clip(2, 3, 4, 20, 24))
    assert tuple(out.shape) == (2, 7)
    out.square().sum().backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in m.parameters())
    with fiamma.no_grad():
        assert tuple(m.eval()(_clip(1, 3, 1, 9, 9)).shape) == (1, 7)


def test_resnet_structure_by_hand():
    m = video.r2plus1d_18()
    # (2+1)D width: 64*64*27 // (64*9 + 3*64) = 144; stage 2's first block 64->128 gives 230
    assert m.layer1[0].conv1[0][0].out_channels == 144
    assert m.layer2[0].conv1[0][0].out_channels == 230
    assert m.layer2[0].downsample[0].stride == (2, 2, 2)
    mc3 = video.mc3_18()
    assert mc3.layer1[0].conv1[0].kernel_size == (3, 3, 3)
    assert mc3.layer2[0].conv1[0].kernel_size == (1, 3, 3)
    assert mc3.layer2[0].downsample[0].stride == (1, 2, 2)
    # MC3 keeps the time axis: 5 frames stay 5 after every stage
    x = mc3.stem(_clip(1, 3, 5, 16, 16))
    assert x.shape[2] == 5 and mc3.layer4(mc3.layer3(mc3.layer2(x))).shape[2] == 5


def test_bottleneck_video_resnet_and_zero_init():
    m = video.VideoResNet(video.Bottleneck, [video.Conv3DSimple] * 4, [1, 1, 1, 1],
                          video.BasicStem, num_classes=3, zero_init_residual=True)
    assert m.fc.in_features == 2048
    assert all((b.conv3[1].weight == 0).all() for b in m.modules()
               if isinstance(b, video.Bottleneck))
    assert tuple(m(_clip(2, 3, 2, 16, 16)).shape) == (2, 3)


def test_weights_from_a_local_file_and_errors(tmp_path):
    src = video.mc3_18(num_classes=5).eval()
    path = tmp_path / "mc3.pth"
    fiamma.save(src.state_dict(), str(path))
    m = video.mc3_18(weights=str(path), num_classes=5).eval()
    x = _clip(1, 3, 2, 12, 12)
    from_dict = video.mc3_18(weights=src.state_dict(), num_classes=5).eval()
    with fiamma.no_grad():
        np.testing.assert_array_equal(m(x).numpy(), src(x).numpy())
        np.testing.assert_array_equal(from_dict(x).numpy(), src(x).numpy())
    with pytest.raises(ValueError, match="R3D_18_Weights"):
        video.r3d_18(weights="IMAGENET1K_V1")
    with pytest.raises(ValueError, match=r"VideoResNet: expected a clip"):
        m(fiamma.zeros(1, 3, 8, 8))
    w = video.R3D_18_Weights.DEFAULT
    assert w is video.R3D_18_Weights.KINETICS400_V1
    assert len(w.meta["categories"]) == 400 and w.meta["categories"][0] == "abseiling"


def test_s3d_blocks_and_params():
    m = video.s3d()
    assert sum(p.numel() for p in m.parameters()) == \
        video.S3D_Weights.DEFAULT.meta["num_params"]
    bn = m.features[0][0][1]
    assert (bn.eps, bn.momentum) == (0.001, 0.001)
    block = m.features[5].train()
    x = _clip(2, 192, 3, 5, 6)
    y = block(x)
    assert tuple(y.shape) == (2, 256, 3, 5, 6)
    y.sum().backward()
    assert all(p.grad is not None for p in block.parameters())
    with pytest.raises(ValueError, match="S3D: the clip"):
        with fiamma.no_grad():
            m.eval()(fiamma.zeros(1, 3, 12, 209, 209))


@pytest.mark.slow
def test_s3d_forward_backward_smallest_clip():
    m = video.s3d(num_classes=4).train()
    out = m(_clip(1, 3, 13, 209, 209))
    assert tuple(out.shape) == (1, 4)
    out.sum().backward()
    assert m.classifier[1].weight.grad is not None


def test_video_classification_preset_by_hand():
    tf = video.R3D_18_Weights.DEFAULT.transforms()
    assert isinstance(tf, VideoClassification)
    assert (tf.crop_size, tf.resize_size) == ([112, 112], [128, 171])
    vid = fiamma.full((4, 3, 128, 171), 255, dtype=fiamma.uint8)
    out = tf(vid)
    assert tuple(out.shape) == (3, 4, 112, 112) and out.dtype == fiamma.float32
    want = (1.0 - np.array(tf.mean)) / np.array(tf.std)
    np.testing.assert_allclose(out.numpy()[:, 0, 0, 0], want, rtol=1e-6)
    assert tuple(tf(fiamma.zeros(2, 4, 3, 130, 180, dtype=fiamma.uint8)).shape) == \
        (2, 3, 4, 112, 112)
    with pytest.raises(ValueError, match="VideoClassification"):
        tf(fiamma.zeros(3, 8, 8))


def _torch_pair(name, **kw):
    torch = pytest.importorskip("torch")
    tv = pytest.importorskip("torchvision.models.video")
    torch.manual_seed(0)
    tm = getattr(tv, name)(**kw)
    fm = load_from_torch(getattr(video, name)(**kw), tm, strict_keys=True)
    return torch, tm, fm


@pytest.mark.parity
@pytest.mark.parametrize("name", RESNETS)
def test_resnet_eval_matches_torchvision(name):
    torch, tm, fm = _torch_pair(name)
    # random running statistics, so eval-mode batch norm is not the identity
    rs = np.random.RandomState(1)
    sd = {k: (torch.from_numpy(rs.uniform(-0.1, 0.1, v.shape).astype(np.float32))
              if k.endswith("running_mean") else
              torch.from_numpy(rs.uniform(0.5, 1.5, v.shape).astype(np.float32))
              if k.endswith("running_var") else v)
          for k, v in tm.state_dict().items()}
    tm.load_state_dict(sd)
    fm.load_state_dict({k: fiamma.from_numpy(v.numpy().copy()) for k, v in sd.items()})
    x = np.random.RandomState(0).rand(2, 3, 4, 24, 24).astype(np.float32)
    assert_eval_matches(fm, tm, x, atol=1e-5, rtol=1e-4)


@pytest.mark.parity
def test_r2plus1d_train_gradients_match_torchvision():
    torch, tm, fm = _torch_pair("r2plus1d_18", num_classes=5)
    tm, fm = tm.double().train(), fm.double().train()
    # layer4 sees 2x1x2x2 values per channel: batch norm is well conditioned
    x = np.random.RandomState(2).rand(2, 3, 2, 24, 24)
    y = np.array([1, 4])
    assert_train_grads_match(fm, tm, x, y)
    fb = fm.state_dict()
    for k, v in tm.state_dict().items():
        if "running" in k:
            np.testing.assert_allclose(fb[k].numpy(), v.numpy(), atol=1e-12, err_msg=k)


@pytest.mark.parity
@pytest.mark.slow
def test_s3d_matches_torchvision():
    torch, tm, fm = _torch_pair("s3d", dropout=0.0)
    x = np.random.RandomState(0).rand(1, 3, 13, 209, 209).astype(np.float32)
    # train mode: batch statistics keep activations from vanishing at random initialisation
    want = tm.train()(torch.from_numpy(x)).detach().numpy()
    got = fm.train()(fiamma.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert_eval_matches(fm, tm, x)


@pytest.mark.parity
def test_weights_meta_match_torchvision():
    tv = pytest.importorskip("torchvision.models.video")
    for name in ["R3D_18_Weights", "MC3_18_Weights", "R2Plus1D_18_Weights", "S3D_Weights"]:
        ours, theirs = getattr(video, name).KINETICS400_V1, getattr(tv, name).KINETICS400_V1
        assert ours.url == theirs.url
        assert ours.meta == theirs.meta, name
        for key in ("crop_size", "resize_size"):
            assert ours.transforms.keywords[key] == theirs.transforms.keywords[key]


@pytest.mark.parity
def test_video_preset_matches_torchvision():
    torch = pytest.importorskip("torch")
    tvw = pytest.importorskip("torchvision.models.video")
    frames = np.random.RandomState(0).randint(0, 256, (2, 3, 3, 130, 180)).astype(np.uint8)
    want = tvw.R3D_18_Weights.DEFAULT.transforms()(torch.from_numpy(frames)).numpy()
    got = video.R3D_18_Weights.DEFAULT.transforms()(fiamma.from_numpy(frames)).numpy()
    assert got.shape == want.shape == (2, 3, 3, 112, 112)
    # uint8 resizing rounds to integers: a tie may land one level apart (1/255/std after
    # normalising)
    level = 1 / 255 / min(video.R3D_18_Weights.DEFAULT.transforms().std)
    np.testing.assert_allclose(got, want, atol=level + 1e-5)
    assert (np.abs(got - want) > 1e-5).mean() < 1e-3
    floats = frames.astype(np.float32) / 255
    want = tvw.R3D_18_Weights.DEFAULT.transforms()(torch.from_numpy(floats)).numpy()
    got = video.R3D_18_Weights.DEFAULT.transforms()(fiamma.from_numpy(floats)).numpy()
    np.testing.assert_allclose(got, want, atol=1e-4)
