"""tv_tensors: Tensor subclasses that tell the v2 transforms what a tensor is (torchvision's
``tv_tensors``): :class:`Image`, :class:`Video`, :class:`Mask`, :class:`BoundingBoxes` (with
``format`` and ``canvas_size``) and :class:`KeyPoints` (with ``canvas_size``).

They keep their type and metadata through the v2 transforms; tensor methods and operators
return plain ``fiamma.Tensor`` (torchvision's default return type; :func:`set_return_type`
changes it), except ``clone``, ``to``, ``detach`` and ``requires_grad_``, which keep the type.
:func:`wrap` re-attaches the type and metadata.

    >>> import fiamma
    >>> from fiamma.vision import tv_tensors
    >>> b = tv_tensors.BoundingBoxes([[0, 0, 10, 5]], format="XYXY", canvas_size=(20, 30))
    >>> b.format, b.canvas_size
    (<BoundingBoxFormat.XYXY: 'XYXY'>, (20, 30))
    >>> type(b + 1) is fiamma.Tensor
    True
"""
import enum

import numpy as np

import fiamma
from fiamma.overrides import disabled_torch_function_impl as _disabled

from . import _return_type
from ._return_type import set_return_type

__all__ = ["TVTensor", "Image", "Video", "Mask", "BoundingBoxes", "BoundingBoxFormat",
           "KeyPoints", "wrap", "is_rotated_bounding_format", "set_return_type"]


def _as_tensor(data, dtype=None, device=None, requires_grad=None):
    if isinstance(data, fiamma.Tensor):
        t = data
        if dtype is not None or device is not None:
            t = t.to(device=device, dtype=dtype)
    else:
        if hasattr(data, "__array_interface__") or isinstance(data, np.ndarray):
            data = np.asarray(data)
        t = fiamma.tensor(data, dtype=dtype, device=device)
    if requires_grad is not None:
        t = t.detach().requires_grad_(requires_grad) if requires_grad else t
    return t


class TVTensor(fiamma.Tensor):
    """Base of the tv_tensors; a plain subclass of ``fiamma.Tensor`` with metadata."""

    # its methods are wrapped by _return_type (torchvision's rule); module-level functions
    # return plain tensors, as torchvision's __torch_function__ makes them
    __torch_function__ = _disabled

    _meta_names = ()

    @classmethod
    def _wrap(cls, tensor, **meta):
        out = tensor.as_subclass(cls)
        for k, v in meta.items():
            setattr(out, k, v)
        return out

    def _meta(self):
        return {k: getattr(self, k) for k in self._meta_names}

    def _rewrap(self, t):
        return type(self)._wrap(t, **self._meta())

    def clone(self, *args, **kwargs):
        return self._rewrap(fiamma.Tensor.clone(self, *args, **kwargs))

    def to(self, *args, **kwargs):
        return self._rewrap(fiamma.Tensor.to(self, *args, **kwargs))

    def detach(self):
        return self._rewrap(fiamma.Tensor.detach(self))

    def requires_grad_(self, requires_grad=True):
        fiamma.Tensor.requires_grad_(self, requires_grad)
        return self

    def as_subclass(self, cls):
        return fiamma.Tensor.as_subclass(self, cls)

    def __repr__(self):
        # torchvision's layout: the tensor's repr under the class name (continuation lines
        # re-indented to it), then the metadata as ``key=str(value)`` and a closing ", )"
        base = fiamma.Tensor.__repr__(fiamma.Tensor.as_subclass(self, fiamma.Tensor))
        name = type(self).__name__
        if base.startswith("tensor(") and base.endswith(")"):
            base = base[len("tensor("):-1].replace("\n" + " " * len("tensor("),
                                                    "\n" + " " * (len(name) + 1))
        extra = ", ".join(f"{k}={getattr(self, k)}" for k in self._meta_names)
        return f"{name}({base}, {extra})"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        return self.detach().clone().requires_grad_(self.requires_grad)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (type(self), self.detach().numpy().copy(), self._meta()))


_return_type.install(TVTensor)


def _rebuild(cls, array, meta):
    return cls._wrap(fiamma.from_numpy(array), **meta)


class Image(TVTensor):
    """An image tensor ``(..., C, H, W)``; a 2-D input gets a leading channel dimension. A PIL
    image is converted as ``pil_to_tensor`` does."""

    def __new__(cls, data, *, dtype=None, device=None, requires_grad=None):
        from PIL import Image as PILImage
        if isinstance(data, PILImage.Image):
            from fiamma.vision.transforms import functional as F1
            data = F1.pil_to_tensor(data)
        t = _as_tensor(data, dtype, device, requires_grad)
        if t.ndim < 2:
            raise ValueError(f"Image: expected a tensor with at least 2 dims, got shape "
                             f"{tuple(t.shape)}")
        if t.ndim == 2:
            t = t.unsqueeze(0)
        return cls._wrap(t)


class Video(TVTensor):
    """A video tensor ``(..., T, C, H, W)``."""

    def __new__(cls, data, *, dtype=None, device=None, requires_grad=None):
        t = _as_tensor(data, dtype, device, requires_grad)
        if t.ndim < 4:
            raise ValueError(f"Video: expected a tensor with at least 4 dims, got shape "
                             f"{tuple(t.shape)}")
        return cls._wrap(t)


class Mask(TVTensor):
    """A segmentation mask ``(..., H, W)`` (one per instance along the leading dims)."""

    def __new__(cls, data, *, dtype=None, device=None, requires_grad=None):
        from PIL import Image as PILImage
        if isinstance(data, PILImage.Image):
            from fiamma.vision.transforms import functional as F1
            data = F1.pil_to_tensor(data)[0]
        return cls._wrap(_as_tensor(data, dtype, device, requires_grad))


class BoundingBoxFormat(enum.Enum):
    """Box coordinate layouts. XYXY: corners; XYWH: top-left and size; CXCYWH: centre and
    size; the ``R`` formats add a rotation angle (degrees) and XYXYXYXY holds the four
    corners (x1, y1, ..., x4, y4)."""
    XYXY = "XYXY"
    XYWH = "XYWH"
    CXCYWH = "CXCYWH"
    XYWHR = "XYWHR"
    CXCYWHR = "CXCYWHR"
    XYXYXYXY = "XYXYXYXY"


def is_rotated_bounding_format(fmt):
    return fmt in (BoundingBoxFormat.XYWHR, BoundingBoxFormat.CXCYWHR,
                   BoundingBoxFormat.XYXYXYXY)


def _parse_format(fmt):
    if isinstance(fmt, str):
        try:
            return BoundingBoxFormat[fmt.upper()]
        except KeyError:
            raise ValueError(f"BoundingBoxes: unknown format {fmt!r}; expected one of "
                             f"{[f.name for f in BoundingBoxFormat]}") from None
    if not isinstance(fmt, BoundingBoxFormat):
        raise TypeError(f"BoundingBoxes: format must be a BoundingBoxFormat or str, got "
                        f"{type(fmt).__name__}")
    return fmt


def _canvas(canvas_size, op):
    try:
        h, w = (int(v) for v in canvas_size)
    except (TypeError, ValueError):
        raise ValueError(f"{op}: canvas_size must be a (height, width) pair, got "
                         f"{canvas_size!r}") from None
    return (h, w)


class BoundingBoxes(TVTensor):
    """Boxes ``(N, K)`` (K = 4, 5 for the rotated ``R`` formats, 8 for XYXYXYXY) on an image of
    ``canvas_size = (height, width)``; ``clamping_mode`` is ``"soft"``, ``"hard"`` or None (no
    clamping by :class:`~fiamma.vision.transforms.v2.ClampBoundingBoxes` and the geometric
    kernels)."""

    _meta_names = ("format", "canvas_size", "clamping_mode")

    def __new__(cls, data, *, format, canvas_size, clamping_mode="soft", dtype=None, device=None,
                requires_grad=None):
        fmt = _parse_format(format)
        t = _as_tensor(data, dtype, device, requires_grad)
        if t.ndim == 1:
            t = t.unsqueeze(0)
        k = {BoundingBoxFormat.XYWHR: 5, BoundingBoxFormat.CXCYWHR: 5,
             BoundingBoxFormat.XYXYXYXY: 8}.get(fmt, 4)
        if t.ndim != 2 or t.shape[-1] != k:
            raise ValueError(f"BoundingBoxes: format {fmt.name} expects shape (N, {k}), got "
                             f"{tuple(t.shape)}")
        if clamping_mode not in ("soft", "hard", None):
            raise ValueError(f"BoundingBoxes: clamping_mode must be 'soft', 'hard' or None, got "
                             f"{clamping_mode!r}")
        return cls._wrap(t, format=fmt, canvas_size=_canvas(canvas_size, "BoundingBoxes"),
                         clamping_mode=clamping_mode)


class KeyPoints(TVTensor):
    """Points ``(..., 2)`` as (x, y) on an image of ``canvas_size = (height, width)``."""

    _meta_names = ("canvas_size",)

    def __new__(cls, data, *, canvas_size, dtype=None, device=None, requires_grad=None):
        t = _as_tensor(data, dtype, device, requires_grad)
        if t.ndim == 1:
            t = t.unsqueeze(0)
        if t.ndim < 2 or t.shape[-1] != 2:
            raise ValueError(f"KeyPoints: expected shape (..., 2), got {tuple(t.shape)}")
        return cls._wrap(t, canvas_size=_canvas(canvas_size, "KeyPoints"))


def wrap(wrappee, *, like, **kwargs):
    """``wrappee`` as a tv_tensor of ``like``'s type and metadata (``kwargs`` override the
    metadata, e.g. ``canvas_size=``)."""
    if not isinstance(like, TVTensor):
        raise TypeError(f"wrap: like must be a tv_tensor, got {type(like).__name__}")
    meta = like._meta()
    meta.update(kwargs)
    return type(like)._wrap(wrappee, **meta)
