"""CelebA from its published folder layout (``torchvision.datasets.CelebA``): the aligned
images and the whitespace-separated annotation lists, read from a local copy."""
import os

import numpy as np
from PIL import Image

import fiamma
from fiamma.vision.datasets.vision import VisionDataset

__all__ = ["CelebA"]

_SPLITS = {"train": 0, "valid": 1, "test": 2, "all": None}
_TYPES = ("attr", "identity", "bbox", "landmarks")


def _load_list(path, header):
    """(row names, column names or None, int64 array) of one annotation list; with
    ``header`` the line at that index names the columns and the data starts after it."""
    with open(path) as f:
        rows = [line.split() for line in f if line.strip()]
    names = None
    if header is not None:
        names = rows[header]
        rows = rows[header + 1:]
    try:
        data = np.array([[int(v) for v in r[1:]] for r in rows], dtype=np.int64)
    except ValueError as e:
        raise RuntimeError(f"CelebA: {path} is not a CelebA annotation list ({e})") from None
    return [r[0] for r in rows], names, data.reshape(len(rows), -1)


class CelebA(VisionDataset):
    """Samples ``(PIL RGB image, target)`` where ``target`` follows ``target_type`` ("attr":
    40 binary attributes as 0/1, "identity", "bbox" (x, y, w, h), "landmarks"; a list gives
    a tuple; an empty list gives None). Files live under ``root/celeba``:
    ``img_align_celeba/``, ``list_eval_partition.txt``, ``identity_CelebA.txt``,
    ``list_attr_celeba.txt``, ``list_bbox_celeba.txt``, ``list_landmarks_align_celeba.txt``.

        >>> # ds = CelebA("data", split="valid", target_type=["attr", "bbox"])
    """

    base_folder = "celeba"

    def __init__(self, root, split="train", target_type="attr", transform=None,
                 target_transform=None, download=False):
        super().__init__(root, transform=transform, target_transform=target_transform)
        if split not in _SPLITS:
            raise ValueError(f"CelebA: split should be one of {list(_SPLITS)}, got {split!r}")
        self.split = split
        self.target_type = [target_type] if isinstance(target_type, str) else list(target_type)
        bad = [t for t in self.target_type if t not in _TYPES]
        if bad:
            raise ValueError(f"CelebA: target_type should be among {list(_TYPES)}, got {bad}")
        if not self.target_type and target_transform is not None:
            raise RuntimeError("CelebA: target_transform is given but target_type is empty")
        if download:
            raise RuntimeError("CelebA: download is not supported (the dataset is shared "
                               "through Google Drive); place the files under "
                               f"{os.path.join(str(root), self.base_folder)}")
        base = os.path.join(self.root, self.base_folder)
        need = ["list_eval_partition.txt", "identity_CelebA.txt", "list_attr_celeba.txt",
                "list_bbox_celeba.txt", "list_landmarks_align_celeba.txt", "img_align_celeba"]
        missing = [n for n in need if not os.path.exists(os.path.join(base, n))]
        if missing:
            raise RuntimeError(f"CelebA: dataset not found or incomplete at {base} "
                               f"(missing {missing})")
        names, _, part = _load_list(os.path.join(base, "list_eval_partition.txt"), None)
        _, _, ident = _load_list(os.path.join(base, "identity_CelebA.txt"), None)
        _, self.attr_names, attr = _load_list(os.path.join(base, "list_attr_celeba.txt"), 1)
        _, _, bbox = _load_list(os.path.join(base, "list_bbox_celeba.txt"), 1)
        _, _, lms = _load_list(os.path.join(base, "list_landmarks_align_celeba.txt"), 1)
        code = _SPLITS[split]
        keep = np.ones(len(names), bool) if code is None else part[:, 0] == code
        idx = np.nonzero(keep)[0]
        self.filename = [names[i] for i in idx]
        self.identity = fiamma.from_numpy(ident[idx].copy())
        self.bbox = fiamma.from_numpy(bbox[idx].copy())
        self.landmarks_align = fiamma.from_numpy(lms[idx].copy())
        self.attr = fiamma.from_numpy(((attr[idx] + 1) // 2).copy())   # {-1, 1} -> {0, 1}

    def __getitem__(self, index):
        path = os.path.join(self.root, self.base_folder, "img_align_celeba",
                            self.filename[index])
        with Image.open(path) as img:
            x = img.convert("RGB")
        target = []
        for t in self.target_type:
            if t == "attr":
                target.append(self.attr[index, :])
            elif t == "identity":
                target.append(self.identity[index, 0])
            elif t == "bbox":
                target.append(self.bbox[index, :])
            else:
                target.append(self.landmarks_align[index, :])
        if self.transform is not None:
            x = self.transform(x)
        if target:
            target = tuple(target) if len(target) > 1 else target[0]
            if self.target_transform is not None:
                target = self.target_transform(target)
        else:
            target = None
        return x, target

    def __len__(self):
        return len(self.filename)

    def extra_repr(self):
        return f"Target type: {self.target_type}\nSplit: {self.split}"
