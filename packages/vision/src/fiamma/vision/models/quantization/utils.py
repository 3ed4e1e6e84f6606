"""What the quantizable models share: ReLU replacement, ``fuse_model``'s choice between
post-training and QAT fusion, ``quantize_model`` (torchvision's post-training int8
conversion), ``build_qat_quantized`` (the QAT route of MobileNetV3) and the int8 weights
enums."""
from collections.abc import Mapping
from pathlib import Path

import fiamma
from fiamma import nn
from fiamma.ao.quantization import fuse_modules, fuse_modules_qat
from fiamma.vision.models._api import WeightsEnum, load_weights, resolve_weights

__all__ = ["QuantizedWeightsEnum", "replace_relu", "fuse", "check_float_request",
           "quantize_model", "build_quantized", "build_qat_quantized"]


class QuantizedWeightsEnum(WeightsEnum):
    """A ``*_QuantizedWeights`` enum: names, URLs, ``meta`` and ``transforms`` as
    torchvision's. Their checkpoints hold int8 tensors: load them into a model built with
    ``quantize=True`` (the float weights are ``meta["unquantized"]``)."""


def quantize_model(model, backend):
    """torchvision's ``quantize_model``: eval, the engine's qconfig (min/max activations,
    per-channel weights for fbgemm, per-tensor for qnnpack), ``fuse_model``, ``prepare``,
    one calibration pass on a random (1, 3, 299, 299) batch, ``convert``; in place."""
    import fiamma.ao.quantization as tq
    if backend not in fiamma.backends.quantized.supported_engines:
        raise RuntimeError(f"Quantized backend not supported: {backend!r}")
    fiamma.backends.quantized.engine = backend
    model.eval()
    weight = (tq.default_per_channel_weight_observer if backend == "fbgemm"
              else tq.default_weight_observer)
    if backend in ("fbgemm", "qnnpack"):
        model.qconfig = tq.QConfig(activation=tq.default_observer, weight=weight)
    model.fuse_model()
    tq.prepare(model, inplace=True)
    with fiamma.no_grad():
        model(fiamma.rand(1, 3, 299, 299))
    tq.convert(model, inplace=True)
    return model


def build_quantized(make, q_enum, weights, progress, kwargs, backend):
    """``quantize=True``: build the float quantizable model, convert it to int8 for
    ``backend`` (default fbgemm), then load ``weights`` (a ``q_enum`` member or name, or a
    local checkpoint file) into the int8 model."""
    weights = resolve_weights(q_enum, weights)
    if weights is not None and not isinstance(weights, Path):
        cats = weights.meta.get("categories")
        if cats is not None:
            kwargs.setdefault("num_classes", len(cats))
            if kwargs["num_classes"] != len(cats):
                raise ValueError(f"The parameter 'num_classes' expected value {len(cats)} but "
                                 f"got {kwargs['num_classes']} instead.")
        backend = backend or weights.meta.get("backend")
    model = make(**kwargs)
    quantize_model(model, backend or "fbgemm")
    if weights is not None:
        state = (load_weights(weights) if isinstance(weights, Path)
                 else weights.get_state_dict(progress=progress, check_hash=True))
        model.load_state_dict(state)
    return model


def build_qat_quantized(make, q_enum, weights, progress, kwargs, backend):
    """``quantize=True`` for the models torchvision quantizes through QAT (MobileNetV3): build
    the float quantizable model, ``fuse_model(is_qat=True)``, the backend's
    ``get_default_qat_qconfig``, ``prepare_qat``, load ``weights`` (a ``q_enum`` member or
    name, a local checkpoint file of the QAT model, or such a state dict), then ``convert``
    to int8 and ``eval()``. The default backend is qnnpack (the weights' backend when given;
    another one raises ValueError, as torchvision)."""
    import fiamma.ao.quantization as tq
    state = None
    if isinstance(weights, Mapping):
        state, weights = weights, None
    else:
        weights = resolve_weights(q_enum, weights)
    if isinstance(weights, WeightsEnum):
        cats = weights.meta.get("categories")
        if cats is not None:
            kwargs.setdefault("num_classes", len(cats))
            if kwargs["num_classes"] != len(cats):
                raise ValueError(f"The parameter 'num_classes' expected value {len(cats)} but "
                                 f"got {kwargs['num_classes']} instead.")
        want = weights.meta.get("backend")
        if backend is not None and want is not None and backend != want:
            raise ValueError(f"The parameter 'backend' expected value {want} but got "
                             f"{backend} instead.")
        backend = backend or want
    backend = backend or "qnnpack"
    model = make(**kwargs)
    model.fuse_model(is_qat=True)
    model.qconfig = tq.get_default_qat_qconfig(backend)
    tq.prepare_qat(model, inplace=True)
    if isinstance(weights, Path):
        state = load_weights(weights)
    elif weights is not None:
        state = weights.get_state_dict(progress=progress, check_hash=True)
    if state is not None:
        model.load_state_dict(state)
    tq.convert(model, inplace=True)
    return model.eval()


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
    """For a float build: int8 weights need ``quantize=True`` (a ValueError, as torchvision's
    weights check)."""
    if isinstance(weights, quantized_enum) or (
            isinstance(weights, str) and (weights.startswith(quantized_enum.__name__ + ".")
                                          or weights in quantized_enum.__members__)
            and weights != "DEFAULT"):
        raise ValueError(f"{builder}: {weights!s} are int8 weights: pass quantize=True to "
                         "build the int8 model they load into")


def pop_backend(kwargs):
    """torchvision's ``backend`` keyword (fbgemm/qnnpack) only matters with quantize=True."""
    backend = kwargs.pop("backend", None)
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"backend: expected a string such as 'fbgemm' or 'qnnpack', got "
                        f"{type(backend).__name__}")
    return backend
