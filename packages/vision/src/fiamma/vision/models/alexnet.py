"""AlexNet (torchvision.models.alexnet, the "one weird trick" variant).

    >>> import fiamma
    >>> from fiamma.vision.models import alexnet
    >>> tuple(alexnet().eval()(fiamma.randn(1, 3, 224, 224)).shape)
    (1, 1000)
"""
from functools import partial

import fiamma
from fiamma import nn
from fiamma.vision.models._api import Weights, WeightsEnum, register_model
from fiamma.vision.models._builder import build_with_weights
from fiamma.vision.models._meta import imagenet_categories
from fiamma.vision.transforms._presets import ImageClassification

__all__ = ["AlexNet", "AlexNet_Weights", "alexnet"]


class AlexNet(nn.Module):
    """Five convolutions, a 6x6 adaptive average pool and a 3-layer classifier (default
    PyTorch layer initialisation, as torchvision's)."""

    def __init__(self, num_classes=1000, dropout=0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(fiamma.flatten(x, 1))


class AlexNet_Weights(WeightsEnum):
    IMAGENET1K_V1 = Weights(
        url="https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
        transforms=partial(ImageClassification, crop_size=224),
        meta={"num_params": 61100840, "min_size": (63, 63), "categories": imagenet_categories(),
              "recipe": "https://github.com/pytorch/vision/tree/main/references/classification"
                        "#alexnet-and-vgg",
              "_metrics": {"ImageNet-1K": {"acc@1": 56.522, "acc@5": 79.066}},
              "_docs": "These weights reproduce closely the results of the paper using a "
                       "simplified training recipe."})
    DEFAULT = IMAGENET1K_V1


@register_model(weights=AlexNet_Weights)
def alexnet(*, weights=None, progress=True, **kwargs):
    """AlexNet (Krizhevsky, One weird trick for parallelizing convolutional neural networks).

    Args:
        weights: a member of :class:`AlexNet_Weights`, its name, "DEFAULT", a local checkpoint
            path or None (random initialisation, the default).
        progress: show a progress bar while downloading.
        **kwargs: passed to :class:`AlexNet` (``num_classes``, ``dropout``).
    """
    return build_with_weights(AlexNet, AlexNet_Weights, weights, progress, kwargs)
