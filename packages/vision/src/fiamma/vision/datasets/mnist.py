"""MNIST-style datasets read from IDX files: ``MNIST``, ``FashionMNIST``, ``KMNIST``.

The IDX files may be raw or gzipped, in torchvision's layout ``root/<ClassName>/raw/`` or
directly in ``root`` (such as Debian's ``/usr/share/datasets/fashion-mnist``).
"""

import gzip
import os
import struct
import warnings
import zlib

import numpy as np

import fiamma
from fiamma.vision.datasets.utils import download_and_extract_archive
from fiamma.vision.datasets.vision import VisionDataset

__all__ = ["MNIST", "FashionMNIST", "KMNIST", "read_sn3_pascalvincent_tensor",
           "read_image_file", "read_label_file", "MNIST_MIRRORS", "FASHION_MNIST_MIRRORS",
           "KMNIST_MIRRORS"]

# the URLs tried in order; a user (or a test) may replace their entries
MNIST_MIRRORS = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "http://yann.lecun.com/exdb/mnist/"]
FASHION_MNIST_MIRRORS = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
KMNIST_MIRRORS = ["http://codh.rois.ac.jp/kmnist/dataset/kmnist/"]

# IDX type codes -> big-endian NumPy dtypes
_IDX_TYPES = {0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


_GZ_TRAILING_MAX = 1 << 26


def _open(path):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _read_up_to(f, n, path):
    """At most ``n`` bytes of ``f``, read in chunks: a header that lies about the size costs
    no more memory than the data actually there (a .gz file is never inflated past ``n``)."""
    parts, got = [], 0
    try:
        while got < n:
            chunk = f.read(min(n - got, 1 << 24))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
    except (OSError, EOFError, zlib.error) as e:
        raise RuntimeError(f"cannot read {path}: {e}") from None
    return b"".join(parts)


def read_sn3_pascalvincent_tensor(path, strict=True):
    """Read an IDX file (raw or ``.gz``) into a tensor of its stored dtype and shape.

    Errors name the file: a bad magic number, an unknown type code, or a size that does not
    match the header (extra trailing bytes are allowed when ``strict`` is false). The header's
    size is checked against the bytes present before anything is allocated for it."""
    path = os.fspath(path)
    try:
        f = _open(path)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise RuntimeError(f"cannot read {path}: {e}") from None
    with f:
        head = _read_up_to(f, 4, path)
        if len(head) < 4 or head[0] != 0 or head[1] != 0:
            raise RuntimeError(f"{path} is not an IDX file (bad magic number {head[:4]!r})")
        code, ndim = head[2], head[3]
        if code not in _IDX_TYPES:
            raise RuntimeError(f"{path}: unknown IDX type code 0x{code:02x}")
        dims = _read_up_to(f, 4 * ndim, path)
        if len(dims) < 4 * ndim:
            raise RuntimeError(f"{path}: truncated IDX header ({4 + len(dims)} bytes)")
        shape = struct.unpack(f">{ndim}I", dims)
        dt = _IDX_TYPES[code]
        need = dt.itemsize
        for d in shape:  # Python ints: no int64 wrap-around for a lying header
            need *= d
        raw = _read_up_to(f, need + (1 if strict else 0), path)
        if path.endswith(".gz") and len(raw) >= need:
            # inflate what follows (discarded, bounded) so that gzip checks its CRC and length
            extra = 0
            while extra <= _GZ_TRAILING_MAX:
                chunk = _read_up_to(f, 1 << 20, path)
                if not chunk:
                    break
                extra += len(chunk)
            if extra > _GZ_TRAILING_MAX:
                raise RuntimeError(f"{path}: more than {_GZ_TRAILING_MAX} bytes follow the "
                                   f"{need} bytes of data the IDX header describes")
    have = len(raw)
    if have < need or (strict and have != need):
        more = " or more" if strict and have > need else ""
        raise RuntimeError(f"{path}: the IDX header says shape {shape} ({need} bytes of data), "
                           f"but the file holds {have}{more}")
    arr = np.frombuffer(raw, dt, need // dt.itemsize).reshape(shape)
    return fiamma.from_numpy(arr.astype(dt.newbyteorder("="), copy=True))


def read_label_file(path):
    """An IDX label file (1-D uint8) as an int64 tensor."""
    x = read_sn3_pascalvincent_tensor(path, strict=False)
    if x.dtype != fiamma.uint8 or x.dim() != 1:
        raise RuntimeError(f"{path}: expected a 1-D uint8 label file, got {x.dtype} "
                           f"{tuple(x.shape)}")
    return x.long()


def read_image_file(path):
    """An IDX image file (3-D uint8, ``(N, H, W)``) as a uint8 tensor."""
    x = read_sn3_pascalvincent_tensor(path, strict=False)
    if x.dtype != fiamma.uint8 or x.dim() != 3:
        raise RuntimeError(f"{path}: expected a 3-D uint8 image file, got {x.dtype} "
                           f"{tuple(x.shape)}")
    return x


class MNIST(VisionDataset):
    """The MNIST handwritten digits: 60,000 training and 10,000 test 28x28 grey images.

    Samples are ``(PIL image in mode "L", int label)`` before transforms; ``data`` is the uint8
    ``(N, 28, 28)`` tensor and ``targets`` the int64 labels. The IDX files (raw or ``.gz``)
    are looked up in ``root/<ClassName>/raw/`` and then in ``root`` itself.
    ``download=True`` fetches missing files from ``mirrors`` (tried in order) into
    ``root/<ClassName>/raw/``, checking their md5.

    >>> # ds = MNIST("data", train=False, download=True, transform=transforms.ToTensor())
    """

    mirrors = MNIST_MIRRORS
    resources = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
               "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        super().__init__(os.fspath(root), transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        files = self._find_files()
        if files is None:
            raise RuntimeError(f"{type(self).__name__}: dataset not found in {self.raw_folder} "
                               f"nor in {self.root}. You can use download=True to download it")
        self.data = read_image_file(files[0])
        self.targets = read_label_file(files[1])
        if self.data.shape[0] != self.targets.shape[0]:
            raise RuntimeError(f"{type(self).__name__}: {files[0]} holds {self.data.shape[0]} "
                               f"images but {files[1]} holds {self.targets.shape[0]} labels")

    # torchvision's deprecated names, still read by older scripts (MNIST-M builders, ...)
    @property
    def train_labels(self):
        warnings.warn("train_labels has been renamed targets")
        return self.targets

    @property
    def test_labels(self):
        warnings.warn("test_labels has been renamed targets")
        return self.targets

    @property
    def train_data(self):
        warnings.warn("train_data has been renamed data")
        return self.data

    @property
    def test_data(self):
        warnings.warn("test_data has been renamed data")
        return self.data

    @property
    def raw_folder(self):
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def processed_folder(self):
        return os.path.join(self.root, type(self).__name__, "processed")

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    def _split_names(self):
        prefix = "train" if self.train else "t10k"
        return f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"

    def _find_files(self, train=None):
        """The (images, labels) paths of the split, raw preferred over .gz, or None."""
        saved = self.train
        if train is not None:
            self.train = train
        names = self._split_names()
        self.train = saved
        for folder in (self.raw_folder, self.root):
            found = []
            for name in names:
                path = next((p for p in (os.path.join(folder, name),
                                         os.path.join(folder, name + ".gz"))
                             if os.path.isfile(p)), None)
                found.append(path)
            if all(found):
                return found
        return None

    def _check_exists(self):
        return self._find_files(True) is not None and self._find_files(False) is not None

    def download(self):
        """Download the files that are missing (nothing is fetched when they are present)."""
        if self._check_exists():
            return
        os.makedirs(self.raw_folder, exist_ok=True)
        for filename, md5 in self.resources:
            plain = os.path.join(self.raw_folder, filename[:-3])
            if os.path.isfile(plain):
                continue
            errors = []
            for mirror in self.mirrors:
                url = mirror + filename
                try:
                    download_and_extract_archive(url, self.raw_folder, filename=filename, md5=md5)
                    break
                except RuntimeError as e:
                    errors.append(f"tried {url}, got: {e}")
            else:
                raise RuntimeError(f"{type(self).__name__}: error downloading {filename}:\n" +
                                   "\n".join(errors or ["no mirror is configured"]))

    def __getitem__(self, index):
        from PIL import Image
        img = Image.fromarray(self.data[index].numpy())  # uint8 (H, W): mode "L"
        target = int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self):
        return self.data.shape[0]

    def extra_repr(self):
        return f"Split: {'Train' if self.train else 'Test'}"


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: 28x28 grey images of 10 kinds of clothing (MNIST's format and
    API; the files go in ``root/FashionMNIST/raw/`` or directly in ``root``)."""

    mirrors = FASHION_MNIST_MIRRORS
    resources = [
        ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ]
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]


class KMNIST(MNIST):
    """Kuzushiji-MNIST: 28x28 grey images of 10 cursive Japanese characters (MNIST's format
    and API; the files go in ``root/KMNIST/raw/`` or directly in ``root``)."""

    mirrors = KMNIST_MIRRORS
    resources = [
        ("train-images-idx3-ubyte.gz", "bdb82020997e1d708af4cf47b453dcf7"),
        ("train-labels-idx1-ubyte.gz", "e144d726b3acfaa3e44228e80efcd344"),
        ("t10k-images-idx3-ubyte.gz", "5c965bf0a639b31b8f53240b1b52f4d7"),
        ("t10k-labels-idx1-ubyte.gz", "7320c461ea6c1c855c0b718fb2a4b134"),
    ]
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]
