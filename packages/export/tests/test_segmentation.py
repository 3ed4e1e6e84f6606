"""fiamma.vision's segmentation models in ONNX Runtime (random init, small images): the file is
traced at one batch and image size and run at another (batch, height and width dynamic)."""

import io

import numpy as np
import pytest

import fiamma

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
S = pytest.importorskip("fiamma.vision.models.segmentation")
import fiamma.onnx  # noqa: E402

DYN = {"image": {0: "batch", 2: "height", 3: "width"}}
FAST = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large"]
SLOW = ["fcn_resnet50", "deeplabv3_resnet50"]


def _check(name, aux_loss=False):
    fiamma.manual_seed(0)
    m = getattr(S, name)(num_classes=3, weights_backbone=None,
                         **({"aux_loss": True} if aux_loss else {})).eval()
    outs = ["out", "aux"] if aux_loss else ["out"]
    dyn = dict(DYN, **{o: {0: "batch", 2: "height", 3: "width"} for o in outs})
    buf = io.BytesIO()
    fiamma.onnx.export(m, (fiamma.rand(1, 3, 64, 64),), buf, input_names=["image"],
                       dynamic_axes=dyn)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == outs  # the result dict's keys
    for shape in [(1, 3, 64, 64), (2, 3, 80, 96)]:
        fiamma.manual_seed(sum(shape))
        x = fiamma.rand(*shape)
        with fiamma.no_grad():
            want = m(x)
        got = sess.run(None, {"image": x.numpy()})
        assert list(want) == outs
        for g, w in zip(got, want.values()):
            w = w.numpy()
            assert g.shape == w.shape == (shape[0], 3) + shape[2:]
            assert np.abs(g - w).max() <= 1e-4 * (np.abs(w).max() + 1e-12)


@pytest.mark.parametrize("name", FAST)
def test_segmentation_models(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_segmentation_models_resnet(name):
    _check(name, aux_loss=True)
