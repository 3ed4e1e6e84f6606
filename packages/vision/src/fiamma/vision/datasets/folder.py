"""Datasets of files sorted into one folder per class: ``DatasetFolder`` and ``ImageFolder``."""

import os

from fiamma.vision.datasets.vision import VisionDataset

__all__ = ["DatasetFolder", "ImageFolder", "IMG_EXTENSIONS", "find_classes", "make_dataset",
           "has_file_allowed_extension", "is_image_file", "pil_loader", "default_loader"]

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def has_file_allowed_extension(filename, extensions):
    """Whether ``filename`` ends with one of ``extensions`` (case-insensitive)."""
    exts = (extensions,) if isinstance(extensions, str) else tuple(extensions)
    return filename.lower().endswith(tuple(e.lower() for e in exts))


def is_image_file(filename):
    """Whether ``filename`` has an image extension (``IMG_EXTENSIONS``)."""
    return has_file_allowed_extension(filename, IMG_EXTENSIONS)


def find_classes(directory):
    """The sorted sub-folder names of ``directory`` and a ``{name: index}`` map."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"find_classes: {directory} is not a folder")
    classes = sorted(e.name for e in os.scandir(directory) if e.is_dir())
    if not classes:
        raise FileNotFoundError(f"find_classes: couldn't find any class folder in {directory}")
    return classes, {c: i for i, c in enumerate(classes)}


def make_dataset(directory, class_to_idx=None, extensions=None, is_valid_file=None,
                 allow_empty=False):
    """The ``(path, class_index)`` pairs under ``directory/<class>/`` (recursively, sorted),
    keeping files with one of ``extensions`` or for which ``is_valid_file(path)`` is true
    (exactly one of the two must be given). A class with no file raises FileNotFoundError
    unless ``allow_empty``."""
    directory = os.path.expanduser(os.fspath(directory))
    if class_to_idx is None:
        _, class_to_idx = find_classes(directory)
    elif not class_to_idx:
        raise ValueError("make_dataset: class_to_idx must have at least one entry")
    if (extensions is None) == (is_valid_file is None):
        raise ValueError("make_dataset: pass exactly one of extensions and is_valid_file, "
                         f"got {'neither' if extensions is None else 'both'}")
    if extensions is not None:
        def is_valid_file(path):
            return has_file_allowed_extension(path, extensions)
    instances, found = [], set()
    for cls in sorted(class_to_idx):
        target_dir = os.path.join(directory, cls)
        if not os.path.isdir(target_dir):
            continue
        for root, _, fnames in sorted(os.walk(target_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(root, fname)
                if is_valid_file(path):
                    instances.append((path, class_to_idx[cls]))
                    found.add(cls)
    empty = set(class_to_idx) - found
    if empty and not allow_empty:
        msg = f"make_dataset: found no valid file for the classes {', '.join(sorted(empty))}"
        if extensions is not None:
            exts = extensions if isinstance(extensions, str) else ", ".join(extensions)
            msg += f"; supported extensions are: {exts}"
        raise FileNotFoundError(msg)
    return instances


def pil_loader(path):
    """Open an image file with Pillow and convert it to RGB (errors name the file)."""
    from PIL import Image, UnidentifiedImageError
    try:
        with open(path, "rb") as f:
            img = Image.open(f)
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise RuntimeError(f"pil_loader: cannot read the image {path}: {e}") from None


def default_loader(path):
    """The loader of :class:`ImageFolder`: :func:`pil_loader`."""
    return pil_loader(path)


class DatasetFolder(VisionDataset):
    """A dataset of files laid out as ``root/<class>/.../<file>``; samples are
    ``(loader(path), class_index)``, classes are the sorted sub-folder names.

    Override :meth:`find_classes` or :meth:`make_dataset` for other layouts. Attributes:
    ``classes``, ``class_to_idx``, ``samples`` (``(path, index)`` pairs), ``targets``.

    >>> # ds = DatasetFolder("data/", loader=numpy.load, extensions=(".npy",))
    """

    def __init__(self, root, loader, extensions=None, transform=None, target_transform=None,
                 is_valid_file=None, allow_empty=False):
        super().__init__(os.fspath(root), transform=transform, target_transform=target_transform)
        classes, class_to_idx = self.find_classes(self.root)
        self.samples = self.make_dataset(self.root, class_to_idx, extensions, is_valid_file,
                                         allow_empty)
        self.loader = loader
        self.extensions = extensions
        self.classes = classes
        self.class_to_idx = class_to_idx
        self.targets = [s[1] for s in self.samples]

    @staticmethod
    def make_dataset(directory, class_to_idx, extensions=None, is_valid_file=None,
                     allow_empty=False):
        """See :func:`make_dataset` (``class_to_idx`` is required here)."""
        if class_to_idx is None:
            raise ValueError("make_dataset: the class_to_idx parameter cannot be None")
        return make_dataset(directory, class_to_idx, extensions, is_valid_file, allow_empty)

    def find_classes(self, directory):
        """See :func:`find_classes`."""
        return find_classes(directory)

    def __getitem__(self, index):
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __len__(self):
        return len(self.samples)


class ImageFolder(DatasetFolder):
    """Images laid out as ``root/<class>/.../<image>`` (extensions ``IMG_EXTENSIONS``), loaded
    as RGB PIL images by default (pass ``loader=fiamma.vision.io.read_image`` for tensors).
    ``imgs`` is an alias of ``samples``.

    >>> # ds = ImageFolder("pets/", transform=transforms.ToTensor()); img, label = ds[0]
    """

    def __init__(self, root, transform=None, target_transform=None, loader=default_loader,
                 is_valid_file=None, allow_empty=False):
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None,
                         transform=transform, target_transform=target_transform,
                         is_valid_file=is_valid_file, allow_empty=allow_empty)
        self.imgs = self.samples
