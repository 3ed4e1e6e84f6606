"""Pascal VOC detection and segmentation from the VOCdevkit folder layout
(``torchvision.datasets.VOCDetection``/``VOCSegmentation``), with the archive download."""
import os
import xml.etree.ElementTree as ET

from PIL import Image

from fiamma.vision.datasets.utils import download_and_extract_archive
from fiamma.vision.datasets.vision import VisionDataset

__all__ = ["VOCDetection", "VOCSegmentation", "parse_voc_xml"]

_THOR = "https://thor.robots.ox.ac.uk/pascal/VOC/"
DATASET_YEAR_DICT = {
    "2012": (_THOR + "voc2012/VOCtrainval_11-May-2012.tar", "VOCtrainval_11-May-2012.tar",
             "6cd6e144f989b92b3379bac3b3de84fd", "VOCdevkit/VOC2012"),
    "2011": (_THOR + "voc2011/VOCtrainval_25-May-2011.tar", "VOCtrainval_25-May-2011.tar",
             "6c3384ef61512963050cb5d687e5bf1e", "TrainVal/VOCdevkit/VOC2011"),
    "2010": (_THOR + "voc2010/VOCtrainval_03-May-2010.tar", "VOCtrainval_03-May-2010.tar",
             "da459979d0c395079b5c75ee67908abb", "VOCdevkit/VOC2010"),
    "2009": (_THOR + "voc2009/VOCtrainval_11-May-2009.tar", "VOCtrainval_11-May-2009.tar",
             "a3e00b113cfcfebf17e343f59da3caa1", "VOCdevkit/VOC2009"),
    "2008": (_THOR + "voc2008/VOCtrainval_14-Jul-2008.tar", "VOCtrainval_11-May-2012.tar",
             "2629fa636546599198acfcfbfcf1904a", "VOCdevkit/VOC2008"),
    "2007": (_THOR + "voc2007/VOCtrainval_06-Nov-2007.tar", "VOCtrainval_06-Nov-2007.tar",
             "c52e279531787c972589f7e41ab4ae64", "VOCdevkit/VOC2007"),
    "2007-test": (_THOR + "voc2007/VOCtest_06-Nov-2007.tar", "VOCtest_06-Nov-2007.tar",
                  "b6e924de25625d8de591ea690078ad9f", "VOCdevkit/VOC2007"),
}


def parse_voc_xml(node):
    """An annotation XML element as nested dicts: leaves map tag -> stripped text (a leaf
    without text is left out), repeated tags become lists, and the annotation's ``object`` is
    always a list (torchvision's layout)."""
    children = list(node)
    if not children:
        return {node.tag: node.text.strip()} if node.text else {}
    grouped = {}
    for child in children:
        for k, v in parse_voc_xml(child).items():
            grouped.setdefault(k, []).append(v)
    if node.tag == "annotation":
        grouped["object"] = [grouped.get("object", [])]
    return {node.tag: {k: (v[0] if len(v) == 1 else v) for k, v in grouped.items()}}


class _VOCBase(VisionDataset):
    _SPLITS_DIR = _TARGET_DIR = _TARGET_EXT = None

    def __init__(self, root, year="2012", image_set="train", download=False, transform=None,
                 target_transform=None, transforms=None):
        super().__init__(root, transforms, transform, target_transform)
        if year not in DATASET_YEAR_DICT:
            raise ValueError(f"{type(self).__name__}: year should be one of "
                             f"{sorted(DATASET_YEAR_DICT)}, got {year!r}")
        valid = ["train", "trainval", "val"] + (["test"] if year == "2007-test" or
                                                 year == "2007" else [])
        if image_set not in valid:
            raise ValueError(f"{type(self).__name__}: image_set should be one of {valid}, got "
                             f"{image_set!r}")
        self.year = "2007" if year == "2007-test" else year
        self.image_set = image_set
        key = "2007-test" if year == "2007" and image_set == "test" else year
        url, filename, md5, base_dir = DATASET_YEAR_DICT[key]
        voc_root = os.path.join(self.root, base_dir)
        if download:
            download_and_extract_archive(url, self.root, filename=filename, md5=md5)
        if not os.path.isdir(voc_root):
            raise RuntimeError(f"{type(self).__name__}: dataset not found or corrupted at "
                               f"{voc_root}; use download=True to download it")
        split_f = os.path.join(voc_root, "ImageSets", self._SPLITS_DIR, image_set.rstrip("\n")
                               + ".txt")
        if not os.path.isfile(split_f):
            raise RuntimeError(f"{type(self).__name__}: split file {split_f} is missing")
        with open(split_f) as f:
            names = [x.strip() for x in f if x.strip()]
        self.images = [os.path.join(voc_root, "JPEGImages", n + ".jpg") for n in names]
        self.targets = [os.path.join(voc_root, self._TARGET_DIR, n + self._TARGET_EXT)
                        for n in names]

    def __len__(self):
        return len(self.images)


class VOCSegmentation(_VOCBase):
    """Samples ``(PIL RGB image, PIL palette mask)`` from ``SegmentationClass``."""
    _SPLITS_DIR, _TARGET_DIR, _TARGET_EXT = "Segmentation", "SegmentationClass", ".png"

    @property
    def masks(self):
        return self.targets

    def __getitem__(self, index):
        img = Image.open(self.images[index]).convert("RGB")
        target = Image.open(self.masks[index])
        return self._apply(img, target)


class VOCDetection(_VOCBase):
    """Samples ``(PIL RGB image, annotation dict)`` parsed from ``Annotations/*.xml``.

        >>> # ds = VOCDetection("data", year="2012", image_set="val")
        >>> # img, target = ds[0]; target["annotation"]["object"][0]["bndbox"]
    """
    _SPLITS_DIR, _TARGET_DIR, _TARGET_EXT = "Main", "Annotations", ".xml"

    @property
    def annotations(self):
        return self.targets

    def __getitem__(self, index):
        img = Image.open(self.images[index]).convert("RGB")
        target = parse_voc_xml(ET.parse(self.annotations[index]).getroot())
        return self._apply(img, target)
