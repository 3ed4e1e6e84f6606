"""ImageList: a padded batch of images and the sizes they had before padding."""

__all__ = ["ImageList"]


class ImageList:
    """``tensors`` (N, C, H, W) padded batch; ``image_sizes`` the (h, w) of each image in it.

        >>> import fiamma
        >>> il = ImageList(fiamma.zeros(1, 3, 32, 32), [(30, 28)])
        >>> il.image_sizes
        [(30, 28)]
    """

    def __init__(self, tensors, image_sizes):
        self.tensors = tensors
        self.image_sizes = image_sizes

    def to(self, device):
        return ImageList(self.tensors.to(device), self.image_sizes)
