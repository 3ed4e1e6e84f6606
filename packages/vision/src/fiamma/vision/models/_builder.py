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
        # torchvision's two warnings, word for word
        warnings.warn("The parameter 'pretrained' is deprecated since 0.13 and may be removed "
                      "in the future, please use 'weights' instead.", UserWarning, stacklevel=3)
        default = enum_cls.IMAGENET1K_V1 if pretrained else None
        msg = ("Arguments other than a weight enum or `None` for 'weights' are deprecated since "
               "0.13 and may be removed in the future. The current behavior is equivalent to "
               f"passing `weights={default}`.")
        if pretrained:
            msg += (f" You can also use `weights={enum_cls.__name__}.DEFAULT` to get the most "
                    "up-to-date weights.")
        warnings.warn(msg, UserWarning, stacklevel=3)
        if pretrained and weights is None:
            weights = default
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
