"""The base class of fiamma.vision's datasets (``torchvision.datasets.VisionDataset``)."""

import os

from fiamma.data import Dataset

__all__ = ["VisionDataset", "StandardTransform"]


class StandardTransform:
    """Applies ``transform`` to the input and ``target_transform`` to the target."""

    def __init__(self, transform=None, target_transform=None):
        self.transform = transform
        self.target_transform = target_transform

    def __call__(self, input, target):
        if self.transform is not None:
            input = self.transform(input)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return input, target

    @staticmethod
    def _format(transform, head):
        lines = repr(transform).splitlines()
        return [head + lines[0]] + [" " * len(head) + line for line in lines[1:]]

    def __repr__(self):
        body = [type(self).__name__]
        if self.transform is not None:
            body += self._format(self.transform, "Transform: ")
        if self.target_transform is not None:
            body += self._format(self.target_transform, "Target transform: ")
        return "\n".join(body)


class VisionDataset(Dataset):
    """Base of the vision datasets: holds ``root`` and the transforms.

    Pass either ``transforms`` (a callable of ``(input, target)`` returning both) or
    ``transform`` / ``target_transform`` (one each), not both kinds. Subclasses implement
    ``__getitem__`` and ``__len__``, and may add lines to the repr with ``extra_repr``.

    >>> class Two(VisionDataset):
    ...     def __len__(self): return 2
    ...     def __getitem__(self, i): return self.transforms(i, -i)
    >>> Two("data", transform=lambda x: x * 10)[1]
    (10, -1)
    """

    _repr_indent = 4

    def __init__(self, root=None, transforms=None, transform=None, target_transform=None):
        if isinstance(root, str):
            root = os.path.expanduser(root)
        self.root = root
        separate = transform is not None or target_transform is not None
        if transforms is not None and separate:
            raise ValueError(f"{type(self).__name__}: only transforms or "
                             "transform/target_transform can be passed as argument")
        self.transform = transform
        self.target_transform = target_transform
        if separate:
            transforms = StandardTransform(transform, target_transform)
        self.transforms = transforms

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")

    def _apply(self, sample, target):
        if self.transforms is not None:
            return self.transforms(sample, target)
        return sample, target

    def extra_repr(self):
        return ""

    def __repr__(self):
        body = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        if self.transforms is not None:
            body += repr(self.transforms).splitlines()
        return "\n".join([f"Dataset {type(self).__name__}"] +
                         [" " * self._repr_indent + line for line in body])
