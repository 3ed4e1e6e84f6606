"""What the quantizable models share: ReLU replacement, ``fuse_model``'s choice between
post-training and QAT fusion, the ``quantize=True`` refusal and the int8 weights enums."""
from fiamma import nn
from fiamma.ao.quantization import fuse_modules, fuse_modules_qat
from fiamma.vision.models._api import WeightsEnum

__all__ = ["QuantizedWeightsEnum", "replace_relu", "fuse", "check_float_request"]


def _int8_missing(what):
    return (f"{what} needs quantized int8 tensors and kernels (torch.ao.quantization's "
            "prepare/convert and the fbgemm/qnnpack engines), which fiamma does not have: "
            "fiamma computes in float16/bfloat16/float32/float64. Use quantize=False for the "
            "float quantizable model (QuantStub/DeQuantStub, FloatFunctional, fuse_model()), "
            "with the float weights of the matching fiamma.vision.models builder")


class QuantizedWeightsEnum(WeightsEnum):
    """A ``*_QuantizedWeights`` enum: names, URLs, ``meta`` and ``transforms`` as
    torchvision's. Their checkpoints hold int8 tensors, so ``get_state_dict`` raises
    NotImplementedError (the float weights are ``meta["unquantized"]``)."""

    def get_state_dict(self, *args, **kwargs):
        raise NotImplementedError(_int8_missing(
            f"{type(self).__name__}.{self.name} (an int8 checkpoint, {self.url})"))


def replace_relu(module):
    """Replace every exact ``nn.ReLU``/``nn.ReLU6`` below ``module`` by ``nn.ReLU()``
    (not in place; ReLU6 clipping is dropped, as torchvision's quantizable models do)."""
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        replace_relu(child)
        if type(child) is nn.ReLU or type(child) is nn.ReLU6:
            module._modules[name] = nn.ReLU(inplace=False)


def fuse(model, modules_to_fuse, is_qat):
    """Fuse in place: QAT fusion when ``is_qat`` (None: ``model.training``), else eval fusion."""
    if is_qat is None:
        is_qat = model.training
    method = fuse_modules_qat if is_qat else fuse_modules
    return method(model, modules_to_fuse, inplace=True)


def check_float_request(builder, quantize, weights, quantized_enum):
    """Refuse ``quantize=True`` and int8 weights with an error naming what is missing."""
    if quantize:
        raise NotImplementedError(_int8_missing(f"{builder}(quantize=True)"))
    if isinstance(weights, quantized_enum) or (
            isinstance(weights, str) and (weights.startswith(quantized_enum.__name__ + ".")
                                          or weights in quantized_enum.__members__)
            and weights != "DEFAULT"):
        raise NotImplementedError(_int8_missing(f"{builder}(weights={weights!s})"))


def pop_backend(kwargs):
    """torchvision's ``backend`` keyword (fbgemm/qnnpack) only matters with quantize=True."""
    backend = kwargs.pop("backend", None)
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend: expected a string such as 'fbgemm' or 'qnnpack', got "
                        f"{type(backend).__name__}")
    return backend
