"""Image utilities (``torchvision.utils``): image grids, saving, drawing boxes and masks.

>>> import fiamma
>>> from fiamma.vision.utils import make_grid
>>> make_grid(fiamma.rand(10, 3, 8, 8), nrow=5, padding=1).shape
fiamma.Size([3, 19, 46])
"""

import math
import os
import warnings

import numpy as np

import fiamma

__all__ = ["make_grid", "save_image", "draw_bounding_boxes", "draw_segmentation_masks",
           "draw_keypoints", "flow_to_image"]


def _check_tensor_list(tensor, op):
    if fiamma.is_tensor(tensor):
        return tensor
    if isinstance(tensor, list):
        for t in tensor:
            if not fiamma.is_tensor(t):
                raise TypeError(f"{op}: tensor or list of tensors expected, got a list "
                                f"containing {type(t).__name__}")
        return fiamma.stack(tensor, dim=0)
    raise TypeError(f"{op}: tensor or list of tensors expected, got {type(tensor).__name__}")


def _normalize_(t, low, high):
    t.clamp_(min=low, max=high)
    t.sub_(low).div_(max(high - low, 1e-5))


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False,
              pad_value=0.0):
    """Lay a batch of images ``(B, C, H, W)`` (or a list of ``(C, H, W)``) out as one image.

    ``nrow`` images per row, ``padding`` pixels of ``pad_value`` around each; single-channel
    images become 3-channel. ``normalize=True`` maps ``value_range`` (default: the min and max,
    per image with ``scale_each``) to [0, 1]. A batch of one is returned without padding.

    >>> import fiamma
    >>> make_grid(fiamma.zeros(3, 1, 4, 4), nrow=2, padding=0).shape
    fiamma.Size([3, 8, 8])
    """
    tensor = _check_tensor_list(tensor, "make_grid")
    if hasattr(tensor, "detach"):
        tensor = tensor.detach()
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        if tensor.shape[0] == 1:
            tensor = fiamma.cat((tensor, tensor, tensor), 0)
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 4:
        raise ValueError(f"make_grid: expected a 2-D, 3-D or 4-D tensor, got shape "
                         f"{tuple(tensor.shape)}")
    if tensor.shape[1] == 1:
        tensor = fiamma.cat((tensor, tensor, tensor), 1)
    if normalize:
        if value_range is not None and not isinstance(value_range, tuple):
            raise TypeError("make_grid: value_range has to be a tuple (min, max) if specified, "
                            f"got {type(value_range).__name__}")
        tensor = tensor.clone()

        def norm_range(t):
            if value_range is not None:
                _normalize_(t, value_range[0], value_range[1])
            else:
                _normalize_(t, float(t.min()), float(t.max()))

        if scale_each:
            for i in range(tensor.shape[0]):
                norm_range(tensor[i])
        else:
            norm_range(tensor)
    if tensor.shape[0] == 1:
        return tensor.squeeze(0)
    nmaps = tensor.shape[0]
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(nmaps / xmaps))
    h, w = tensor.shape[2] + padding, tensor.shape[3] + padding
    grid = fiamma.full((tensor.shape[1], h * ymaps + padding, w * xmaps + padding), pad_value,
                       dtype=tensor.dtype)
    for k in range(nmaps):
        y, x = divmod(k, xmaps)
        grid[:, y * h + padding:(y + 1) * h, x * w + padding:(x + 1) * w] = tensor[k]
    return grid


def save_image(tensor, fp, format=None, **kwargs):
    """Save an image ``(C, H, W)`` with values in [0, 1], or a batch laid out by
    :func:`make_grid` (``**kwargs`` go to it), to a file name or file object with Pillow.
    ``format`` is needed for file objects; otherwise the file extension decides."""
    from PIL import Image
    grid = make_grid(tensor, **kwargs)
    arr = grid.float().mul(255).add_(0.5).clamp_(0, 255).to(fiamma.uint8).numpy()
    arr = np.ascontiguousarray(arr.transpose(1, 2, 0))
    if arr.shape[2] == 1:
        arr = arr[:, :, 0]
    img = Image.fromarray(arr)
    if not isinstance(fp, (str, os.PathLike)):
        img.save(fp, format=format)
        return
    # a path: write a temporary file beside it (same extension, so Pillow picks the same
    # format) and rename, so an interrupted save never leaves a truncated image
    from fiamma.utils.files import temp_file_beside
    fp = os.fspath(fp)
    fd, tmp = temp_file_beside(fp, os.path.splitext(fp)[1])
    os.close(fd)
    try:
        img.save(tmp, format=format)
        os.replace(tmp, fp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _palette(n):
    # torchvision's default colours: multiples of fixed large primes, mod 255
    base = (2 ** 25 - 1, 2 ** 15 - 1, 2 ** 21 - 1)
    return [tuple((i * b) % 255 for b in base) for i in range(n)]


def _parse_colors(colors, num_objects, op, floating=False):
    from PIL import ImageColor
    if colors is None:
        colors = _palette(num_objects)
    elif isinstance(colors, list):
        if len(colors) < num_objects:
            raise ValueError(f"{op}: the number of colors must be at least the number of "
                             f"objects, got {len(colors)} < {num_objects}")
    elif not isinstance(colors, (tuple, str)):
        raise ValueError(f"{op}: colors must be a tuple or a string, or a list of them, "
                         f"got {colors!r}")
    elif isinstance(colors, tuple) and len(colors) != 3:
        raise ValueError(f"{op}: a tuple color must be an RGB triplet, got {colors!r}")
    else:
        colors = [colors] * num_objects
    out = [ImageColor.getrgb(c)[:3] if isinstance(c, str) else tuple(c) for c in colors]
    if floating:
        out = [tuple(v / 255 for v in c) for c in out]
    return out


def _check_image(image, op, channels):
    if not fiamma.is_tensor(image):
        raise TypeError(f"{op}: the image must be a tensor, got {type(image).__name__}")
    if not (image.dtype == fiamma.uint8 or image.dtype.is_floating_point):
        raise ValueError(f"{op}: the image dtype must be uint8 or float, got {image.dtype}")
    if image.dim() != 3:
        raise ValueError(f"{op}: pass individual (C, H, W) images, not batches: got shape "
                         f"{tuple(image.shape)}")
    if image.shape[0] not in channels:
        raise ValueError(f"{op}: expected {' or '.join(map(str, channels))} channels, got "
                         f"{image.shape[0]}")


def draw_bounding_boxes(image, boxes, labels=None, colors=None, fill=False, width=1, font=None,
                        font_size=None):
    """Draw boxes ``(N, 4)`` in ``(xmin, ymin, xmax, ymax)`` pixels, or rotated boxes ``(N, 8)``
    as their four corners ``(x1, y1, ..., x4, y4)`` (the first edge dashed, as torchvision marks
    the box's orientation), on a ``(C, H, W)`` image (C = 1 or 3, uint8 or float in [0, 1]);
    returns a new image of the input's dtype with 3 channels. ``fill`` fills boxes at alpha
    100/255, ``labels`` are written inside the top-left corner with Pillow's default font (or
    the TrueType ``font`` at ``font_size``).

    >>> import fiamma
    >>> img = fiamma.zeros(3, 10, 10, dtype=fiamma.uint8)
    >>> out = draw_bounding_boxes(img, fiamma.tensor([[1, 1, 8, 8]]), colors="red")
    >>> out[:, 1, 4].tolist()
    [255, 0, 0]
    """
    from PIL import Image, ImageDraw, ImageFont
    op = "draw_bounding_boxes"
    _check_image(image, op, (1, 3))
    if not fiamma.is_tensor(boxes):
        boxes = fiamma.as_tensor(boxes)
    if boxes.dim() != 2 or boxes.shape[-1] not in (4, 8):
        raise ValueError(f"{op}: boxes must have shape (N, 4) or (N, 8), got "
                         f"{tuple(boxes.shape)}")
    b = boxes.detach().numpy() if hasattr(boxes, "detach") else boxes.numpy()
    if b.shape[1] == 4 and ((b[:, 0] > b[:, 2]) | (b[:, 1] > b[:, 3])).any():
        raise ValueError(f"{op}: boxes need to be in (xmin, ymin, xmax, ymax) format")
    n = b.shape[0]
    if n == 0:
        warnings.warn(f"{op}: boxes doesn't contain any box. No box was drawn")
        return image
    if labels is None:
        labels = [None] * n
    elif len(labels) != n:
        raise ValueError(f"{op}: number of boxes ({n}) and labels ({len(labels)}) mismatch")
    colors = _parse_colors(colors, n, op)
    if font is None:
        if font_size is not None:
            warnings.warn(f"{op}: font_size is ignored since font is not set")
        txt_font = ImageFont.load_default()
    else:
        txt_font = ImageFont.truetype(font=font, size=font_size or 10)
    floating = image.dtype.is_floating_point
    src = image.detach() if hasattr(image, "detach") else image
    if floating:
        src = src.float().mul(255.999).clamp_(0, 255).to(fiamma.uint8)
    arr = np.ascontiguousarray(src.numpy().transpose(1, 2, 0))
    if arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)
    pil = Image.fromarray(arr)
    draw = ImageDraw.Draw(pil, "RGBA" if fill else None)
    for box, color, label in zip(b.astype(np.int64).tolist(), colors, labels):
        if len(box) == 8:
            _oriented_rectangle(draw, box, width, color, (color + (100,)) if fill else None)
        else:
            draw.rectangle(box, width=width, outline=color,
                           fill=(color + (100,)) if fill else None)
        if label is not None:
            margin = width + 1
            draw.text((box[0] + margin, box[1] + margin), label, fill=color, font=txt_font)
    out = fiamma.from_numpy(np.ascontiguousarray(np.array(pil).transpose(2, 0, 1)))
    if floating:
        out = out.to(image.dtype).div_(255)
    return out


def _oriented_rectangle(draw, xy, width, outline, fill):
    # the edge from corner 1 to corner 2 is dashed (5 px on, 5 px off) so the orientation shows
    # stepped from the first corner, re-aiming at the second each step, so the dashes land
    # on the pixels torchvision's do
    x, y = xy[0], xy[1]
    x2, y2 = xy[2], xy[3]
    left = math.hypot(x2 - x, y2 - y)
    on = True
    while left > 0:
        step = min(left, 5)
        angle = math.atan2(y2 - y, x2 - x)
        nx, ny = x + math.cos(angle) * step, y + math.sin(angle) * step
        if on:
            draw.line([(x, y), (nx, ny)], fill=outline, width=width)
        left -= step
        x, y, on = nx, ny, not on
    for i in range(2, 8, 2):
        j = (i + 2) % 8
        draw.line(((xy[i], xy[i + 1]), (xy[j], xy[j + 1])), width=width, fill=outline)
    if fill is not None:
        draw.polygon(xy, fill=fill, outline=None, width=0)


def draw_keypoints(image, keypoints, connectivity=None, colors=None, radius=2, width=3,
                   visibility=None):
    """Draw keypoints ``(num_instances, K, 2)`` in ``(x, y)`` pixels as filled discs of
    ``radius`` on an RGB ``(3, H, W)`` image (uint8, or float in [0, 1]), and the pairs in
    ``connectivity`` as lines of ``width``; a keypoint whose ``visibility`` (``(num_instances,
    K)``, cast to bool) is False is not drawn, nor are its connections. ``colors`` is one colour
    (a Pillow name or an RGB tuple) for the discs; None draws them white. Lines are white.
    Returns the input's dtype.

    >>> import fiamma
    >>> img = fiamma.zeros(3, 9, 9, dtype=fiamma.uint8)
    >>> out = draw_keypoints(img, fiamma.tensor([[[4, 4]]]), colors="red", radius=1)
    >>> out[:, 4, 4].tolist(), out[:, 0, 0].tolist()
    ([255, 0, 0], [0, 0, 0])
    """
    from PIL import Image, ImageDraw
    op = "draw_keypoints"
    _check_image(image, op, (3,))
    if not fiamma.is_tensor(keypoints):
        keypoints = fiamma.as_tensor(keypoints)
    # (num_instances, K, 3) is accepted too, as torchvision reads x and y from the first two
    # columns: Keypoint R-CNN's outputs carry a visibility column
    if keypoints.dim() != 3 or keypoints.shape[-1] < 2:
        raise ValueError(f"{op}: keypoints must have shape (num_instances, K, 2), got "
                         f"{tuple(keypoints.shape)}")
    kp = keypoints.detach().numpy() if hasattr(keypoints, "detach") else keypoints.numpy()
    kp = kp[..., :2]
    if visibility is None:
        vis = np.ones(kp.shape[:2], dtype=bool)
    else:
        vis = np.asarray(visibility.detach().numpy() if fiamma.is_tensor(visibility)
                         else visibility).astype(bool)
        if vis.ndim == 3 and vis.shape[-1] == 1:
            vis = vis[..., 0]
        if vis.shape != kp.shape[:2]:
            raise ValueError(f"{op}: visibility must have shape (num_instances, K) = "
                             f"{tuple(kp.shape[:2])}, got {tuple(vis.shape)}")
    if isinstance(colors, list):
        raise ValueError(f"{op}: colors must be one color (a string or an RGB tuple), got a "
                         f"list")
    floating = image.dtype.is_floating_point
    src = image.detach() if hasattr(image, "detach") else image
    if floating:
        src = src.float().mul(255.999).clamp_(0, 255).to(fiamma.uint8)
    pil = Image.fromarray(np.ascontiguousarray(src.numpy().transpose(1, 2, 0)))
    draw = ImageDraw.Draw(pil)
    # coordinates truncate toward zero, as torchvision's .to(int64)
    pts = np.trunc(kp).astype(np.int64).tolist()
    for inst, inst_vis in zip(pts, vis.tolist()):
        for (x, y), v in zip(inst, inst_vis):
            if v:
                draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=colors,
                             outline=None, width=0)
        for a, c in connectivity or ():
            if inst_vis[a] and inst_vis[c]:
                draw.line((tuple(inst[a]), tuple(inst[c])), width=width)
    out = fiamma.from_numpy(np.ascontiguousarray(np.array(pil).transpose(2, 0, 1)))
    if floating:
        out = out.to(image.dtype).div_(255)
    return out


def draw_segmentation_masks(image, masks, alpha=0.8, colors=None):
    """Blend boolean masks ``(N, H, W)`` (or ``(H, W)``) over an RGB ``(3, H, W)`` image:
    ``image * (1 - alpha) + colored * alpha``, where pixels covered by several masks become
    black in the colored layer (as torchvision). Returns the input's dtype.

    >>> import fiamma
    >>> img = fiamma.zeros(3, 2, 2, dtype=fiamma.uint8)
    >>> m = fiamma.tensor([[True, False], [False, False]])
    >>> draw_segmentation_masks(img, m, alpha=1.0, colors="blue")[:, 0, 0].tolist()
    [0, 0, 255]
    """
    op = "draw_segmentation_masks"
    _check_image(image, op, (3,))
    if not fiamma.is_tensor(masks):
        raise TypeError(f"{op}: masks must be a tensor, got {type(masks).__name__}")
    if masks.dim() == 2:
        masks = masks.unsqueeze(0)
    if masks.dim() != 3:
        raise ValueError(f"{op}: masks must have shape (H, W) or (N, H, W), got "
                         f"{tuple(masks.shape)}")
    if masks.dtype != fiamma.bool:
        raise ValueError(f"{op}: masks must be of dtype bool, got {masks.dtype}")
    if tuple(masks.shape[-2:]) != tuple(image.shape[-2:]):
        raise ValueError(f"{op}: the image {tuple(image.shape)} and the masks "
                         f"{tuple(masks.shape)} must have the same height and width")
    n = masks.shape[0]
    if n == 0:
        warnings.warn(f"{op}: masks doesn't contain any mask. No mask was drawn")
        return image
    floating = image.dtype.is_floating_point
    img = image.detach().numpy() if hasattr(image, "detach") else image.numpy()
    work = np.float64 if img.dtype == np.float64 else np.float32
    m = masks.numpy()
    drawn = img.astype(work, copy=True)
    for mask, color in zip(m, _parse_colors(colors, n, op, floating)):
        drawn[:, mask] = np.asarray(color, dtype=work)[:, None]
    drawn[:, m.sum(axis=0) > 1] = 0
    out = img.astype(work) * (1 - alpha) + drawn * alpha
    if not floating:
        out = np.trunc(out)  # the .to(uint8) cast truncates, as torchvision's
    return fiamma.from_numpy(np.ascontiguousarray(out)).to(image.dtype)


# ---- optical flow as colours (the Middlebury colour wheel of Baker et al., "A Database and
# Evaluation Methodology for Optical Flow", 2011) ---------------------------------------------

def _color_wheel():
    """The wheel's 55 RGB colours, 0..255: red -> yellow -> green -> cyan -> blue -> magenta ->
    red, in 15, 6, 4, 11, 13 and 6 steps."""
    segments = ((15, 0, 1), (6, 1, 0), (4, 1, 2), (11, 2, 1), (13, 2, 0), (6, 0, 2))
    rows = []
    for i, (n, full, ramp) in enumerate(segments):
        step = np.floor(255.0 * np.arange(n) / n)
        block = np.zeros((n, 3))
        block[:, full] = 255.0
        # even segments ramp a channel up (0 -> 255), odd ones ramp the previous full one down
        block[:, ramp] = step if i % 2 == 0 else 255.0 - step
        rows.append(block)
    return np.concatenate(rows)


def flow_to_image(flow):
    """An RGB uint8 image of an optical flow (``(2, H, W)`` or ``(N, 2, H, W)``, float): the
    direction is the hue on the Middlebury colour wheel and the magnitude, relative to the
    largest in the batch (as torchvision's), the saturation (zero flow is white).

    >>> import fiamma
    >>> img = flow_to_image(fiamma.zeros(2, 2, 3))
    >>> img.dtype, tuple(img.shape), img.unique().tolist()
    (fiamma.uint8, (3, 2, 3), [255])
    """
    if not isinstance(flow, fiamma.Tensor):
        raise TypeError(f"flow_to_image: expected a Tensor, got {type(flow).__name__}")
    if not flow.dtype.is_floating_point:
        raise ValueError(f"Flow should be of dtype torch.float, got {flow.dtype}.")
    unbatched = flow.dim() == 3
    f = flow.unsqueeze(0) if unbatched else flow
    if f.dim() != 4 or f.shape[1] != 2:
        raise ValueError(f"Input flow should have shape (2, H, W) or (N, 2, H, W), got "
                         f"{tuple(flow.shape)}.")
    with fiamma.no_grad():
        x = f.detach().cpu().to(fiamma.float64).numpy() if f.dtype is not fiamma.float32 \
            else f.detach().cpu().numpy()
        eps = float(fiamma.finfo(f.dtype).eps)
        norm = np.sqrt((x.astype(np.float64) ** 2).sum(axis=1))
        peak = norm.max() if norm.size else 0.0  # the largest over the whole batch
        x = x / (x.dtype.type(peak) + x.dtype.type(eps))
        wheel = _color_wheel()
        ncols = wheel.shape[0]
        u, v = x[:, 0], x[:, 1]
        rad = np.sqrt(u * u + v * v)
        angle = np.arctan2(-v, -u) / np.pi
        fk = (angle + 1) / 2 * (ncols - 1)
        k0 = np.floor(fk).astype(np.int64)
        k1 = k0 + 1
        k1[k1 == ncols] = 0
        frac = fk - k0
        out = np.empty((x.shape[0], 3) + x.shape[2:], dtype=np.uint8)
        for c in range(3):
            col = (1 - frac) * wheel[k0, c] / 255.0 + frac * wheel[k1, c] / 255.0
            col = 1 - rad * (1 - col)
            out[:, c] = np.floor(255 * col).astype(np.uint8)
    img = fiamma.from_numpy(out).to(flow.device)
    return img[0] if unbatched else img
