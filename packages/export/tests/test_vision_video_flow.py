"""The vision models added last (video classification, MaxViT, Swin V1/V2, video Swin, MViT,
optical flow) in ONNX Runtime: random init, outputs equal eager within 1e-4 of their scale; the
small ones with another batch size through a dynamic batch axis."""

import io
import warnings

import numpy as np
import pytest
from test_onnx import BATCH, _check

import fiamma

M = pytest.importorskip("fiamma.vision.models")
V = pytest.importorskip("fiamma.vision.models.video")
OF = pytest.importorskip("fiamma.vision.models.optical_flow")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


VIDEO_RESNETS = ["r3d_18", "mc3_18", "r2plus1d_18"]
MVITS = {"mvit_v2_s": (2, 32, 32), "mvit_v1_b": (2, 16, 16)}  # (frames, height, width)
RAFTS = ["raft_small", "raft_large"]
# every builder this file exports (test_coverage.py checks the zoo against it)
EXPORTED = [*VIDEO_RESNETS, "swin_t", "swin_v2_t", "swin3d_t", *MVITS, "maxvit_t", "s3d",
            *RAFTS]


@pytest.mark.parametrize("name", VIDEO_RESNETS)
def test_video_resnets(name):
    fiamma.manual_seed(0)
    m = getattr(V, name)(num_classes=5)
    _check(m, fiamma.randn(1, 3, 4, 32, 32), runs=[(fiamma.randn(2, 3, 4, 32, 32),)],
           dynamic_axes=BATCH)


def test_swin_t():
    fiamma.manual_seed(0)
    _check(M.swin_t(num_classes=5), fiamma.randn(2, 3, 64, 64),
           runs=[(fiamma.randn(2, 3, 64, 64),)])


def test_swin_t_dynamic_batch():
    # traced with a batch of 1: the select of q, k, v from a permuted view whose batch dim has
    # size 1 is recorded as itself (its strides alone were ambiguous and replayed wrong)
    fiamma.manual_seed(0)
    _check(M.swin_t(num_classes=5), fiamma.randn(1, 3, 64, 64),
           runs=[(fiamma.randn(2, 3, 64, 64),)], dynamic_axes=BATCH)


def test_swin_v2_t_dynamic_batch():
    # cosine attention (normalised q, k), the logit scale clamped then exponentiated, the
    # continuous position bias MLP (16 * sigmoid of a table computed from constants) and no key
    # bias (a constant mask); traced with a batch of 1, run with 2
    fiamma.manual_seed(0)
    _check(M.swin_v2_t(num_classes=5), fiamma.randn(1, 3, 64, 64),
           runs=[(fiamma.randn(2, 3, 64, 64),)], dynamic_axes=BATCH)


def test_swin3d_t_dynamic_batch():
    # 3D windows (8 x 7 x 7, clipped to the token grid) over 2 frames of 32 x 32: an 8 x 8 token
    # grid, padded to 14 x 14 and shifted in the first stage
    fiamma.manual_seed(0)
    _check(V.swin3d_t(num_classes=5), fiamma.randn(1, 3, 2, 32, 32),
           runs=[(fiamma.randn(2, 3, 2, 32, 32),)], dynamic_axes=BATCH)


@pytest.mark.slow
@pytest.mark.parametrize("name", MVITS)
def test_mvit(name):
    # pooling attention (q, k, v pooled by depthwise Conv3d; V2: decomposed relative position
    # embeddings and residual pooling), built for the smallest clip it accepts: the clip size
    # is a constructor argument (its position embeddings are sized for it)
    t, h, w = MVITS[name]
    fiamma.manual_seed(0)
    m = getattr(V, name)(num_classes=5, spatial_size=(h, w), temporal_size=t)
    _check(m, fiamma.randn(1, 3, t, h, w), runs=[(fiamma.randn(2, 3, t, h, w),)],
           dynamic_axes=BATCH)


@pytest.mark.slow
def test_maxvit_t():
    fiamma.manual_seed(0)
    _check(M.maxvit_t(num_classes=5), fiamma.randn(1, 3, 224, 224))


@pytest.mark.slow
def test_s3d():
    fiamma.manual_seed(0)
    _check(V.s3d(num_classes=5), fiamma.randn(1, 3, 13, 209, 209))


@pytest.mark.slow
@pytest.mark.parametrize("name", RAFTS)
def test_raft(name):
    # every one of the 12 flow updates is an output; the image size is baked into the trace,
    # and the trace says so
    fiamma.manual_seed(0)
    m = getattr(OF, name)().eval()
    args = (fiamma.randn(1, 3, 128, 128), fiamma.randn(1, 3, 128, 128))
    buf = io.BytesIO()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fiamma.onnx.export(m, args, buf)
    assert any(issubclass(w.category, fiamma.jit.TracerWarning) for w in caught)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for a in (args, (fiamma.randn(1, 3, 128, 128), fiamma.randn(1, 3, 128, 128))):
        with fiamma.no_grad():
            want = [t.numpy() for t in m(*a)]
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, a)})
        assert len(got) == len(want) == 12
        for g, w in zip(got, want):
            assert np.abs(g - w).max() <= 1e-4 * (np.abs(w).max() + 1e-12)
