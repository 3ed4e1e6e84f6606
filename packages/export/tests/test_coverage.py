"""Every fiamma.vision model builder is exported by a test here, or shares its family's code
with one that is (a size variant: more blocks, wider layers, the same layer types). A builder
added without either fails this test; it builds no model (cheap)."""

import pytest
import test_detection
import test_segmentation
import test_vision
import test_vision_video_flow

M = pytest.importorskip("fiamma.vision.models")

EXPORTED = {*test_vision.FAST, *test_vision.SLOW, *test_segmentation.FAST,
            *test_segmentation.SLOW, *test_detection.EXPORTED, *test_vision_video_flow.EXPORTED}

# size variant -> the exported member of its family whose code (builder module and layer
# types) it shares
SHARED = {
    # models.quantization in float: the same networks with identity Quant/DeQuant stubs and
    # FloatFunctional adds (quantize=False, the default), so each exports as its float family
    "quantized_googlenet": "googlenet", "quantized_inception_v3": "inception_v3",
    "quantized_mobilenet_v2": "mobilenet_v2",
    "quantized_mobilenet_v3_large": "mobilenet_v3_large",
    "quantized_resnet18": "resnet18", "quantized_resnet50": "resnet50",
    "quantized_resnext101_32x8d": "resnet50", "quantized_resnext101_64x4d": "resnet50",
    "quantized_shufflenet_v2_x0_5": "shufflenet_v2_x1_0",
    "quantized_shufflenet_v2_x1_0": "shufflenet_v2_x1_0",
    "quantized_shufflenet_v2_x1_5": "shufflenet_v2_x1_0",
    "quantized_shufflenet_v2_x2_0": "shufflenet_v2_x1_0",
    "convnext_small": "convnext_tiny", "convnext_base": "convnext_tiny",
    "convnext_large": "convnext_tiny",
    "densenet161": "densenet121", "densenet169": "densenet121", "densenet201": "densenet121",
    **{f"efficientnet_b{i}": "efficientnet_b0" for i in range(1, 8)},
    "efficientnet_v2_m": "efficientnet_v2_s", "efficientnet_v2_l": "efficientnet_v2_s",
    "mnasnet0_75": "mnasnet0_5", "mnasnet1_0": "mnasnet0_5", "mnasnet1_3": "mnasnet0_5",
    **{f"regnet_x_{s}": "regnet_x_400mf" for s in ("800mf", "1_6gf", "3_2gf", "8gf", "16gf",
                                                    "32gf")},
    **{f"regnet_y_{s}": "regnet_y_400mf" for s in ("800mf", "1_6gf", "3_2gf", "8gf", "16gf",
                                                    "32gf", "128gf")},
    "resnet34": "resnet18",  # BasicBlock
    "resnet101": "resnet50", "resnet152": "resnet50",  # Bottleneck
    "resnext101_32x8d": "resnext50_32x4d", "resnext101_64x4d": "resnext50_32x4d",
    "wide_resnet101_2": "wide_resnet50_2",
    "shufflenet_v2_x1_5": "shufflenet_v2_x1_0", "shufflenet_v2_x2_0": "shufflenet_v2_x1_0",
    "swin_s": "swin_t", "swin_b": "swin_t",
    "swin_v2_s": "swin_v2_t", "swin_v2_b": "swin_v2_t",
    "swin3d_s": "swin3d_t", "swin3d_b": "swin3d_t",
    # the plain VGGs are the _bn ones without BatchNorm (no op of their own)
    **{f"vgg{d}{bn}": "vgg11_bn" for d in (11, 13, 16, 19) for bn in ("", "_bn")
       if f"vgg{d}{bn}" != "vgg11_bn"},
    "vit_b_16": "vit_b_32", "vit_l_16": "vit_b_32", "vit_l_32": "vit_b_32",
    "vit_h_14": "vit_b_32",
    "fcn_resnet101": "fcn_resnet50", "deeplabv3_resnet101": "deeplabv3_resnet50",
}


def test_every_builder_is_exported_or_shares_an_exported_family():
    names = set(M.list_models())
    missing = sorted(names - EXPORTED - set(SHARED))
    assert not missing, f"builders with no export test and no entry in SHARED: {missing}"


def test_tables_are_current():
    names = set(M.list_models())
    assert not EXPORTED - names, f"exported names that are no builder: {EXPORTED - names}"
    assert not set(SHARED) - names, f"stale SHARED entries: {set(SHARED) - names}"
    assert not set(SHARED) & EXPORTED, "exported builders need no SHARED entry"
    for name, member in SHARED.items():
        assert member in EXPORTED, (name, member)
        # the same builder module: the variant is the family's code at another size
        a, b = M.get_model_builder(name), M.get_model_builder(member)
        # (a quantizable float model: the family's module under models.quantization)
        mod_a = a.__module__.replace(".models.quantization.", ".models.")
        assert mod_a == b.__module__, (name, a.__module__, member, b.__module__)
