"""COCO detection and captions from a local annotation JSON and image folder
(``torchvision.datasets.CocoDetection``/``CocoCaptions``), parsed without pycocotools, and the
COCO mask decoders (polygons, uncompressed and compressed RLE)."""
import json
import os
from collections import defaultdict

import numpy as np
from PIL import Image, ImageDraw

from fiamma.vision.datasets.vision import VisionDataset

__all__ = ["CocoDetection", "CocoCaptions", "coco_ann_to_mask", "rle_decode"]


class CocoDetection(VisionDataset):
    """Samples ``(PIL RGB image, list of annotation dicts)`` in increasing image id order; the
    annotations of an image keep the file's order (as pycocotools' ``loadAnns``).

    ``root``: the image folder; ``annFile``: the instances JSON.

        >>> # ds = CocoDetection("val2017", "annotations/instances_val2017.json")
    """

    def __init__(self, root, annFile, transform=None, target_transform=None, transforms=None):
        super().__init__(root, transforms, transform, target_transform)
        try:
            with open(annFile, encoding="utf-8") as f:
                data = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{type(self).__name__}: {annFile} is not valid JSON ({e})") from None
        if not isinstance(data, dict) or "images" not in data:
            raise ValueError(f"{type(self).__name__}: {annFile} has no 'images' list (not a "
                             "COCO annotation file)")
        self.imgs = {img["id"]: img for img in data["images"]}
        self.cats = {c["id"]: c for c in data.get("categories", [])}
        self.img_to_anns = defaultdict(list)
        for ann in data.get("annotations", []):
            if ann.get("image_id") not in self.imgs:
                raise ValueError(f"{type(self).__name__}: annotation {ann.get('id')} refers to "
                                 f"unknown image id {ann.get('image_id')}")
            self.img_to_anns[ann["image_id"]].append(ann)
        self.ids = sorted(self.imgs)

    def _load_image(self, id):
        path = os.path.join(self.root, self.imgs[id]["file_name"])
        with Image.open(path) as img:
            return img.convert("RGB")

    def _load_target(self, id):
        return [dict(a) for a in self.img_to_anns.get(id, [])]

    def __getitem__(self, index):
        if not isinstance(index, int):
            raise ValueError(f"Index must be of type integer, got {type(index)} instead.")
        id = self.ids[index]
        return self._apply(self._load_image(id), self._load_target(id))

    def __len__(self):
        return len(self.ids)


class CocoCaptions(CocoDetection):
    """Samples ``(PIL RGB image, list of caption strings)``."""

    def _load_target(self, id):
        return [a["caption"] for a in super()._load_target(id)]


def rle_decode(counts, height, width):
    """A (height, width) uint8 mask from COCO RLE ``counts`` (list of run lengths, or the
    compressed string form), runs alternating 0 and 1 in column-major order."""
    if isinstance(counts, (str, bytes)):
        counts = _rle_from_string(counts.decode() if isinstance(counts, bytes) else counts)
    flat = np.zeros(height * width, np.uint8)
    pos, val = 0, 0
    for c in counts:
        if c < 0 or pos + c > flat.size:
            raise ValueError(f"rle_decode: run lengths do not fit a {height}x{width} mask")
        flat[pos:pos + c] = val
        pos += c
        val ^= 1
    return flat.reshape(width, height).T.copy()


def _rle_from_string(s):
    # COCO's compressed RLE: 5 bits per character (+48), a continuation bit, sign-extended,
    # and from the third count on each value is stored as a difference to the one two back
    counts, p = [], 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            if p >= len(s):
                raise ValueError("rle_decode: truncated compressed RLE string")
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def coco_ann_to_mask(ann, height, width):
    """The (height, width) uint8 mask of one annotation's ``segmentation`` (polygons or RLE)."""
    seg = ann["segmentation"]
    if isinstance(seg, list):
        img = Image.new("L", (width, height), 0)
        draw = ImageDraw.Draw(img)
        for poly in seg:
            if len(poly) >= 6:
                draw.polygon([(float(x), float(y)) for x, y in zip(poly[0::2], poly[1::2])],
                             outline=1, fill=1)
        return np.asarray(img, dtype=np.uint8)
    if isinstance(seg, dict) and "counts" in seg:
        h, w = seg.get("size", (height, width))
        return rle_decode(seg["counts"], int(h), int(w))
    raise ValueError(f"coco_ann_to_mask: unsupported segmentation {type(seg).__name__}")
