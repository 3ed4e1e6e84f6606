"""v1 transforms whose machinery lives with transforms.v2: ElasticTransform (v2's elastic
kernel) and LinearTransformation (torchvision.transforms' names, arguments and reprs).

    >>> import fiamma
    >>> from fiamma.vision import transforms as T
    >>> t = T.LinearTransformation(fiamma.eye(4), fiamma.full((4,), 0.5))
    >>> t(fiamma.ones(1, 2, 2)).flatten().tolist()
    [0.5, 0.5, 0.5, 0.5]
"""
from fiamma import nn
from fiamma.vision.transforms import functional as F1
from fiamma.vision.transforms.functional import InterpolationMode

__all__ = ["ElasticTransform", "LinearTransformation"]


def _float_pair(v, name):
    if isinstance(v, float):
        return [v, v]
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"ElasticTransform: {name} should be float or a sequence of floats. "
                        f"Got {type(v).__name__}")
    if len(v) != 2:
        raise ValueError(f"ElasticTransform: if {name} is a sequence its length should be 2. "
                         f"Got {len(v)}")
    for e in v:
        if not isinstance(e, float):
            raise TypeError(f"ElasticTransform: {name} should be a sequence of floats. Got "
                            f"{type(e).__name__}")
    return list(v)


class ElasticTransform(nn.Module):
    """Elastic deformation of a tensor or PIL image: uniform [-1, 1] displacement fields
    smoothed by a Gaussian of ``sigma`` and scaled by ``alpha`` / size (normalised units), as
    torchvision's ``get_params``; the warp is ``transforms.v2.functional.elastic``.

        >>> import fiamma
        >>> tuple(ElasticTransform(alpha=5.0, sigma=2.0)(fiamma.rand(3, 8, 8)).shape)
        (3, 8, 8)
    """

    def __init__(self, alpha=50.0, sigma=5.0, interpolation=InterpolationMode.BILINEAR, fill=0):
        super().__init__()
        self.alpha = _float_pair(alpha, "alpha")
        self.sigma = _float_pair(sigma, "sigma")
        self.interpolation = F1._interp(interpolation, "ElasticTransform")
        if isinstance(fill, (int, float)):
            fill = [float(fill)]
        elif isinstance(fill, (list, tuple)):
            fill = [float(f) for f in fill]
        else:
            raise TypeError(f"ElasticTransform: fill should be int or float or a list or tuple "
                            f"of them. Got {type(fill).__name__}")
        self.fill = fill

    @staticmethod
    def get_params(alpha, sigma, size):
        """A (1, H, W, 2) displacement field for an image of ``size`` = [H, W]."""
        import fiamma
        fields = []
        for axis in (0, 1):
            d = fiamma.rand(1, 1, *size) * 2 - 1
            if sigma[axis] > 0.0:
                k = int(8 * sigma[axis] + 1)
                k += 1 - k % 2
                d = F1.gaussian_blur(d, [k, k], list(sigma))
            fields.append(d * alpha[axis] / size[1 - axis])
        return fiamma.cat(fields, 1).permute(0, 2, 3, 1)

    def forward(self, tensor):
        from fiamma.vision.transforms.v2 import functional as F2
        _, h, w = F1.get_dimensions(tensor)
        displacement = self.get_params(self.alpha, self.sigma, [h, w])
        fill = self.fill[0] if len(self.fill) == 1 else self.fill
        return F2.elastic(tensor, displacement, self.interpolation, fill)

    def __repr__(self):
        return (f"{type(self).__name__}(alpha={self.alpha}, sigma={self.sigma}, "
                f"interpolation={self.interpolation}, fill={self.fill})")


def linear_transformation_check(m, v):
    """LinearTransformation's argument checks (v1 and v2 share them); returns (m, v)."""
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"LinearTransformation: transformation_matrix should be square. "
                         f"Got {tuple(m.shape)} rectangular matrix.")
    if v.shape[0] != m.shape[0]:
        raise ValueError(f"LinearTransformation: mean_vector should have the same length "
                         f"{v.shape[0]} as any one of the dimensions of the "
                         f"transformation_matrix [{tuple(m.shape)}]")
    if m.device != v.device:
        raise ValueError(f"LinearTransformation: input tensors should be on the same "
                         f"device. Got {m.device} and {v.device}")
    if m.dtype != v.dtype:
        raise ValueError(f"LinearTransformation: input tensors should have the same dtype. "
                         f"Got {m.dtype} and {v.dtype}")
    return m, v


def linear_transformation_apply(tensor, m, v):
    """(tensor flattened to (-1, C*H*W) - v) @ m, in tensor's shape (a plain tensor)."""
    import fiamma
    shape = tuple(tensor.shape)
    n = shape[-3] * shape[-2] * shape[-1]
    if n != m.shape[0]:
        raise ValueError(f"LinearTransformation: input tensor and transformation matrix "
                         f"have incompatible shape.[{shape[-3]} x {shape[-2]} x "
                         f"{shape[-1]}] != {m.shape[0]}")
    if tensor.device.type != v.device.type:
        raise ValueError(f"LinearTransformation: input tensor should be on the same device "
                         f"as transformation matrix and mean vector. Got {tensor.device} "
                         f"vs {v.device}")
    flat = tensor.reshape(-1, n) - v
    return fiamma.mm(flat, m.to(flat.dtype)).reshape(shape)


class LinearTransformation(nn.Module):
    """Whitening-style transform of a tensor image (..., C, H, W): flatten to D = C*H*W,
    subtract ``mean_vector`` (D,), multiply by ``transformation_matrix`` (D, D)."""

    def __init__(self, transformation_matrix, mean_vector):
        super().__init__()
        self.transformation_matrix, self.mean_vector = linear_transformation_check(
            transformation_matrix, mean_vector)

    def forward(self, tensor):
        import fiamma
        if not isinstance(tensor, fiamma.Tensor):
            raise TypeError(f"LinearTransformation: expected a tensor image, got "
                            f"{type(tensor).__name__}")
        return linear_transformation_apply(tensor, self.transformation_matrix,
                                           self.mean_vector)

    def __repr__(self):
        return (f"{type(self).__name__}(transformation_matrix="
                f"{self.transformation_matrix.tolist()}, mean_vector="
                f"{self.mean_vector.tolist()})")
