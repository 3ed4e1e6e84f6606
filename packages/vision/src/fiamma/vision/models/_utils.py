"""IntermediateLayerGetter: run a model's children in order and return chosen outputs by name
(torchvision.models._utils; used by the segmentation and detection backbones)."""
from collections import OrderedDict

from fiamma import nn

__all__ = ["IntermediateLayerGetter"]


class IntermediateLayerGetter(nn.ModuleDict):
    """Keep ``model``'s direct children up to the last one named in ``return_layers`` and
    return an ``OrderedDict`` ``{new_name: output}`` of the outputs of the named children.

    Only direct children can be returned, and they must be called in registration order in the
    original ``forward`` (true of ResNet and MobileNet feature stacks).

        >>> import fiamma
        >>> from fiamma.vision.models import resnet18
        >>> body = IntermediateLayerGetter(resnet18(), {"layer2": "feat"})
        >>> tuple(body(fiamma.zeros(1, 3, 64, 64))["feat"].shape)
        (1, 128, 8, 8)
    """

    def __init__(self, model, return_layers):
        names = [name for name, _ in model.named_children()]
        if not set(return_layers).issubset(names):
            missing = sorted(set(return_layers) - set(names))
            raise ValueError(f"IntermediateLayerGetter: return_layers {missing} are not direct "
                             f"children of the model (children: {names})")
        orig = {str(k): str(v) for k, v in return_layers.items()}
        wanted = dict(orig)
        layers = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            wanted.pop(name, None)
            if not wanted:
                break
        super().__init__(layers)
        self.return_layers = orig

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out
