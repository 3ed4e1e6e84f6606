"""Shared meta of the quantized weights enums."""
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.models._weights_util import classification_preset

_PTQ_DOCS = ("These weights were produced by doing Post Training Quantization (eager mode) on "
             "top of the unquantized weights listed below.")
_QAT_DOCS = ("These weights were produced by doing Quantization Aware Training (eager mode) on "
             "top of the unquantized weights listed below.")
_PTQ_RECIPE = ("https://github.com/pytorch/vision/tree/main/references/classification"
               "#post-training-quantized-models")


def qweights(file, num_params, unquantized, acc1, acc5, ops, size, crop=224, resize=None,
             backend="fbgemm", recipe=_PTQ_RECIPE, docs=_PTQ_DOCS, min_size=(1, 1)):
    from fiamma.vision.models._api import Weights
    preset = (classification_preset(crop_size=crop) if resize is None
              else classification_preset(crop_size=crop, resize_size=resize))
    return Weights(
        url=f"https://download.pytorch.org/models/quantized/{file}",
        transforms=preset,
        meta={"min_size": min_size, "categories": imagenet_categories(), "backend": backend,
              "recipe": recipe, "_docs": docs, "num_params": num_params,
              "unquantized": unquantized,
              "_metrics": {"ImageNet-1K": {"acc@1": acc1, "acc@5": acc5}},
              "_ops": ops, "_file_size": size})
