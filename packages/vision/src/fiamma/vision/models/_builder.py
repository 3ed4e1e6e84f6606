"""What every classification builder does with its ``weights`` argument (shared by the
resnet/vgg/alexnet/squeezenet/densenet builders)."""
import warnings
from pathlib import Path

from fiamma.vision.models._api import load_weights, resolve_weights

__all__ = ["build_with_weights", "override_param"]


def override_param(kwargs, name, value):
    """Set ``kwargs[name]`` to what the weights need; a conflicting user value is an error."""
    if name in kwargs and kwargs[name] != value:
        raise ValueError(f"The parameter '{name}' expected value {value} but got "
                         f"{kwargs[name]} instead.")
    kwargs[name] = value


def build_with_weights(ctor, enum_cls, weights, progress, kwargs, fix_state_dict=None,
                       before_load=None):
    """Resolve ``weights`` (member, name, "DEFAULT", None or a local file), build ``ctor(**kwargs)``
    (``num_classes`` set from the weights' categories) and load the weights by key."""
    if "pretrained" in kwargs:          # torchvision's deprecated boolean interface
        pretrained = kwargs.pop("pretrained")
        warnings.warn("The parameter 'pretrained' is deprecated, please use 'weights' instead.",
                      UserWarning, stacklevel=3)
        if pretrained and weights is None:
            weights = enum_cls.IMAGENET1K_V1
    weights = resolve_weights(enum_cls, weights)
    if weights is None:
        return ctor(**kwargs)
    if isinstance(weights, Path):
        state_dict = load_weights(weights)
    else:
        cats = weights.meta.get("categories")
        if cats is not None:
            override_param(kwargs, "num_classes", len(cats))
        if before_load is not None:
            before_load(kwargs)
        state_dict = weights.get_state_dict(progress=progress, check_hash=True)
    model = ctor(**kwargs)
    if fix_state_dict is not None:
        state_dict = fix_state_dict(state_dict, model)
    model.load_state_dict(state_dict)
    return model
