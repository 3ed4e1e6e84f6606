"""``FakeData``: random images, the same for the same index (for testing pipelines)."""

import numpy as np

import fiamma
from fiamma.vision.datasets.vision import VisionDataset

__all__ = ["FakeData"]


class FakeData(VisionDataset):
    """``size`` random PIL images of ``image_size`` ``(C, H, W)`` (C = 1 or 3) with random
    labels in ``[0, num_classes)``; sample ``i`` is drawn from a generator seeded with
    ``i + random_offset``, so it is the same every time.

    >>> ds = FakeData(size=4, image_size=(3, 8, 8), num_classes=2)
    >>> img, label = ds[0]
    >>> img.size, label in (0, 1)
    ((8, 8), True)
    """

    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None,
                 target_transform=None, random_offset=0):
        super().__init__(None, transform=transform, target_transform=target_transform)
        if len(image_size) != 3 or image_size[0] not in (1, 3):
            raise ValueError(f"FakeData: image_size must be (C, H, W) with C = 1 or 3, got "
                             f"{tuple(image_size)}")
        self.size = size
        self.num_classes = num_classes
        self.image_size = tuple(image_size)
        self.random_offset = random_offset

    def __getitem__(self, index):
        from PIL import Image
        if not -self.size <= index < self.size:
            raise IndexError(f"FakeData: index {index} out of range for size {self.size}")
        index %= self.size
        g = fiamma.Generator()
        g.manual_seed(index + self.random_offset)
        img = fiamma.randn(*self.image_size, generator=g)
        target = int(fiamma.randint(0, self.num_classes, (1,), generator=g)[0])
        # a float image in [0, 1] scaled to bytes, as ToPILImage would (noise clipped)
        arr = np.clip(img.numpy() * 255, 0, 255).astype(np.uint8).transpose(1, 2, 0)
        img = Image.fromarray(np.ascontiguousarray(arr[:, :, 0] if arr.shape[2] == 1 else arr))
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self):
        return self.size
