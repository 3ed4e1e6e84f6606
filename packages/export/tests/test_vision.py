"""The vision zoo in ONNX Runtime: every builder (random init) equals eager within 1e-4.

The five in FAST and the small ones in MEDIUM run in CI (~30 s); the large ones (HEAVY: 10-100 s
each on 2 cores) only with FIAMMA_EXPORT_ZOO=1 (all pass: see docs/architecture.md)."""

import os

import pytest
from test_onnx import BATCH, _check

import fiamma

M = pytest.importorskip("fiamma.vision.models")

FAST = ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
        "shufflenet_v2_x0_5"]
MEDIUM = ["densenet121", "googlenet", "mnasnet0_5", "mobilenet_v2", "mobilenet_v3_large",
          "efficientnet_lite0", "regnet_x_400mf", "regnet_y_400mf", "shufflenet_v2_x1_0",
          "squeezenet1_0"]
HEAVY = ["alexnet", "vgg11_bn", "resnet50", "resnext50_32x4d", "wide_resnet50_2",
         "inception_v3", "efficientnet_v2_s", "convnext_tiny", "vit_b_32"]
SLOW = MEDIUM + HEAVY


def _size(name):
    return 299 if name == "inception_v3" else 224 if name in ("vit_b_32", "alexnet") else 64


@pytest.mark.parametrize("name", FAST)
def test_vision_models(name):
    s = _size(name)
    fiamma.manual_seed(0)
    m = getattr(M, name)(num_classes=10).eval()
    _check(m, fiamma.randn(2, 3, s, s), runs=[(fiamma.randn(3, 3, s, s),)], dynamic_axes=BATCH)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_vision_models_slow(name):
    if name in HEAVY and os.environ.get("FIAMMA_EXPORT_ZOO") != "1":
        pytest.skip("large model: set FIAMMA_EXPORT_ZOO=1 to run it")
    s = _size(name)
    fiamma.manual_seed(0)
    kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") \
        else {}
    m = getattr(M, name)(num_classes=10, **kw).eval()
    # traced with a batch of 1, run with 2
    _check(m, fiamma.randn(1, 3, s, s), runs=[(fiamma.randn(2, 3, s, s),)], dynamic_axes=BATCH)


def test_vit_tiny():
    fiamma.manual_seed(0)
    vit = M.vision_transformer.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32,
        num_classes=10)
    for p in vit.heads.parameters():
        fiamma.nn.init.normal_(p)
    # its class token is expanded to n = x.shape[0]: followed through the symbolic re-trace
    _check(vit, fiamma.randn(1, 3, 32, 32), runs=[(fiamma.randn(3, 3, 32, 32),)],
           dynamic_axes=BATCH)
