"""CIFAR-10 and CIFAR-100 from their "python version" batches (pickles read by a restricted
unpickler: loading never runs code from the files)."""

import os

import numpy as np

from fiamma.vision.datasets._safe_pickle import restricted_load
from fiamma.vision.datasets.utils import check_integrity, download_and_extract_archive
from fiamma.vision.datasets.vision import VisionDataset

__all__ = ["CIFAR10", "CIFAR100", "CIFAR10_URLS", "CIFAR100_URLS"]

# the archive URLs tried in order; a user (or a test) may replace their entries
CIFAR10_URLS = ["https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"]
CIFAR100_URLS = ["https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"]


class CIFAR10(VisionDataset):
    """CIFAR-10: 60,000 32x32 colour images in 10 classes (50,000 train, 10,000 test).

    Reads ``root/cifar-10-batches-py/`` (``data_batch_1..5``, ``test_batch``,
    ``batches.meta``); ``download=True`` fetches and unpacks the archive from ``mirrors`` when
    the batches are missing or fail their md5. Samples are ``(PIL RGB image, int label)`` before
    transforms; ``data`` is a uint8 NumPy array ``(N, 32, 32, 3)``, ``targets`` a list of ints.

    >>> # ds = CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
    """

    base_folder = "cifar-10-batches-py"
    mirrors = CIFAR10_URLS
    url = CIFAR10_URLS[0]
    filename = "cifar-10-python.tar.gz"
    tgz_md5 = "c58f30108f718f92721af3b95e74349a"
    train_list = [
        ["data_batch_1", "c99cafc152244af753f735de768cd75f"],
        ["data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"],
        ["data_batch_3", "54ebc095f3ab1f0389bbae665268c751"],
        ["data_batch_4", "634d18415352ddfa80567beed471001a"],
        ["data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb"],
    ]
    test_list = [["test_batch", "40351d587109b95175f43aff81a1287e"]]
    meta = {"filename": "batches.meta", "key": "label_names",
            "md5": "5ff9c542aee3614f3951f8cda6e48888"}
    _label_key = "labels"

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(os.fspath(root), transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        if not self._check_integrity():
            raise RuntimeError(f"{type(self).__name__}: dataset not found or corrupted in "
                               f"{os.path.join(self.root, self.base_folder)}. You can use "
                               "download=True to download it")
        data, self.targets = [], []
        for name, _ in (self.train_list if train else self.test_list):
            path = os.path.join(self.root, self.base_folder, name)
            entry = restricted_load(path)
            labels = entry.get(self._label_key, entry.get("labels"))
            batch = entry.get("data")
            if not isinstance(batch, np.ndarray) or labels is None:
                raise RuntimeError(f"{path}: not a CIFAR batch (expected 'data' and "
                                   f"'{self._label_key}' entries, got {sorted(entry)})")
            batch = np.asarray(batch, dtype=np.uint8)
            if batch.ndim != 2 or batch.shape[1] != 3072 or len(labels) != batch.shape[0]:
                raise RuntimeError(f"{path}: expected data of shape (N, 3072) and N labels, got "
                                   f"{batch.shape} and {len(labels)} labels")
            data.append(batch)
            self.targets.extend(int(t) for t in labels)
        self.data = np.vstack(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy()
        self._load_meta()

    def _load_meta(self):
        path = os.path.join(self.root, self.base_folder, self.meta["filename"])
        meta = restricted_load(path)
        names = meta.get(self.meta["key"])
        if not isinstance(names, list):
            raise RuntimeError(f"{path}: expected a list under '{self.meta['key']}'")
        self.classes = [n.decode() if isinstance(n, bytes) else n for n in names]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def _check_integrity(self):
        for name, md5 in self.train_list + self.test_list + [[self.meta["filename"],
                                                              self.meta["md5"]]]:
            if not check_integrity(os.path.join(self.root, self.base_folder, name), md5):
                return False
        return True

    def download(self):
        """Download and unpack the archive unless the batches are present and intact."""
        if self._check_integrity():
            return
        errors = []
        for url in self.mirrors:
            try:
                download_and_extract_archive(url, self.root, filename=self.filename,
                                             md5=self.tgz_md5)
                return
            except RuntimeError as e:
                errors.append(f"tried {url}, got: {e}")
        raise RuntimeError(f"{type(self).__name__}: error downloading {self.filename}:\n" +
                           "\n".join(errors or ["no mirror is configured"]))

    def __getitem__(self, index):
        from PIL import Image
        img, target = Image.fromarray(self.data[index]), self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self):
        return len(self.data)

    def extra_repr(self):
        return f"Split: {'Train' if self.train else 'Test'}"


class CIFAR100(CIFAR10):
    """CIFAR-100: CIFAR-10's format with 100 fine classes (``targets``: the fine labels).
    Reads ``root/cifar-100-python/`` (``train``, ``test``, ``meta``)."""

    base_folder = "cifar-100-python"
    mirrors = CIFAR100_URLS
    url = CIFAR100_URLS[0]
    filename = "cifar-100-python.tar.gz"
    tgz_md5 = "eb9058c3a382ffc7106e4002c42a8d85"
    train_list = [["train", "16019d7e3df5f24257cddd939b257f8d"]]
    test_list = [["test", "f0ef6b0ae62326f3e7ffdfab6717acfc"]]
    meta = {"filename": "meta", "key": "fine_label_names",
            "md5": "7973b15100ade9c7d40fb424638fde48"}
    _label_key = "fine_labels"
