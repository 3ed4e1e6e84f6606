"""Datasets (``torchvision.datasets``): fiamma.data Datasets of images on disk or downloaded.

>>> from fiamma.vision.datasets import FakeData
>>> len(FakeData(size=10))
10
"""

from fiamma.vision.datasets.celeba import CelebA
from fiamma.vision.datasets.cifar import CIFAR10, CIFAR100
from fiamma.vision.datasets.coco import CocoCaptions, CocoDetection
from fiamma.vision.datasets.fakedata import FakeData
from fiamma.vision.datasets.folder import DatasetFolder, ImageFolder
from fiamma.vision.datasets.mnist import KMNIST, MNIST, FashionMNIST
from fiamma.vision.datasets.vision import StandardTransform, VisionDataset
from fiamma.vision.datasets.voc import VOCDetection, VOCSegmentation
from fiamma.vision.datasets.wrap import wrap_dataset_for_transforms_v2

__all__ = ["VisionDataset", "StandardTransform", "DatasetFolder", "ImageFolder", "MNIST",
           "FashionMNIST", "KMNIST", "CIFAR10", "CIFAR100", "FakeData",
           "CocoDetection", "CocoCaptions", "VOCDetection", "VOCSegmentation", "CelebA",
           "wrap_dataset_for_transforms_v2"]
