"""Helpers shared by the builders of the mobile/efficient/transformer models: the lazily
imported ImageClassification preset, torchvision's ``_make_divisible`` and the weights step
of a builder."""
import functools
from collections.abc import Mapping

from fiamma.vision.models._api import WeightsEnum, load_weights, register_model, resolve_weights

__all__ = ["classification_preset", "make_divisible", "overwrite_named_param", "build",
           "init_weights", "registered_builder"]


def _image_classification(*args, **kwargs):
    from fiamma.vision.transforms._presets import ImageClassification
    return ImageClassification(*args, **kwargs)


def classification_preset(**kwargs):
    """``functools.partial(ImageClassification, **kwargs)``, importing the preset only when the
    weights' ``transforms()`` is called."""
    return functools.partial(_image_classification, **kwargs)


def make_divisible(v, divisor, min_value=None):
    """Round ``v`` to a multiple of ``divisor``, never below ``min_value`` nor 10% below ``v``
    (the channel rounding of the MobileNet/EfficientNet papers)."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def overwrite_named_param(kwargs, name, value):
    if name in kwargs and kwargs[name] != value:
        raise ValueError(f"The parameter '{name}' expected value {value} but got {kwargs[name]} "
                         f"instead.")
    kwargs[name] = value


def build(enum_cls, weights, progress, kwargs, make):
    """Resolve ``weights``, fix ``num_classes`` from its categories, call ``make(**kwargs)``
    and load the weights (strict) into the model. ``weights`` may also be a state dict
    (a mapping of names to tensors), loaded as it is."""
    if isinstance(weights, Mapping):
        model = make(**kwargs)
        model.load_state_dict(weights)
        return model
    weights = resolve_weights(enum_cls, weights)
    if isinstance(weights, WeightsEnum):
        overwrite_named_param(kwargs, "num_classes", len(weights.meta["categories"]))
    model = make(**kwargs)
    if weights is not None:
        sd = (weights.get_state_dict(progress=progress) if isinstance(weights, WeightsEnum)
              else load_weights(weights))
        model.load_state_dict(sd)
    return model


def registered_builder(builder, name, enum_cls, title):
    """``builder`` named ``name``, documented as ``title`` (torchvision's ``name``) taking a
    ``weights`` of ``enum_cls``, and registered under that name with its weights enum."""
    builder.__name__ = builder.__qualname__ = name
    builder.__doc__ = (f"{title} (torchvision's ``{name}``). ``weights``: a "
                       f":class:`{enum_cls.__name__}` member or name, ``\"DEFAULT\"``, None, or "
                       f"a checkpoint path.")
    return register_model(weights=enum_cls)(builder)


def init_weights(model, init_linear):
    """torchvision's initialisation of the mobile/efficient families: convolutions Kaiming
    normal (fan_out) with zero bias, batch/group norms weight 1 and bias 0, and
    ``init_linear(m)`` for every Linear layer."""
    from fiamma import nn
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            init_linear(m)


def normal_linear(m):
    """Linear weight N(0, 0.01), bias 0 (MobileNet's classifier)."""
    from fiamma import nn
    nn.init.normal_(m.weight, 0, 0.01)
    nn.init.zeros_(m.bias)
