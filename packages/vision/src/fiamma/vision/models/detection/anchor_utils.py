"""AnchorGenerator and DefaultBoxGenerator (torchvision.models.detection.anchor_utils): anchors
at every position of each feature map, ``len(sizes[i]) * len(aspect_ratios[i])`` per position
of map ``i`` (R-CNN, RetinaNet, FCOS), or SSD's default boxes."""
import math

import numpy as np

import fiamma
from fiamma import nn

__all__ = ["AnchorGenerator", "DefaultBoxGenerator"]


class AnchorGenerator(nn.Module):
    """Anchors of ``sizes[i]`` (side of a square of the same area) and ``aspect_ratios[i]``
    (height / width) for feature map ``i``, centred on the map's cells (stride = image size //
    map size), rounded to integers as torchvision's.

        >>> import fiamma
        >>> from fiamma.vision.models.detection.image_list import ImageList
        >>> ag = AnchorGenerator(((16,),), ((1.0,),))
        >>> il = ImageList(fiamma.zeros(1, 3, 32, 32), [(32, 32)])
        >>> ag(il, [fiamma.zeros(1, 8, 2, 2)])[0].tolist()[:2]
        [[-8.0, -8.0, 8.0, 8.0], [8.0, -8.0, 24.0, 8.0]]
    """

    def __init__(self, sizes=((128, 256, 512),), aspect_ratios=((0.5, 1.0, 2.0),)):
        super().__init__()
        if not isinstance(sizes[0], (list, tuple)):
            sizes = tuple((s,) for s in sizes)
        if not isinstance(aspect_ratios[0], (list, tuple)):
            aspect_ratios = (aspect_ratios,) * len(sizes)
        if len(sizes) != len(aspect_ratios):
            raise ValueError(f"AnchorGenerator: sizes ({len(sizes)} levels) and aspect_ratios "
                             f"({len(aspect_ratios)} levels) must have the same length")
        self.sizes = sizes
        self.aspect_ratios = aspect_ratios
        self.cell_anchors = [self.generate_anchors(s, a) for s, a in zip(sizes, aspect_ratios)]

    def generate_anchors(self, scales, aspect_ratios, dtype=fiamma.float32, device=None):
        """(len(aspect_ratios) * len(scales), 4) zero-centred anchors, ratio-major."""
        scales = fiamma.as_tensor(list(scales), dtype=dtype)
        ratios = fiamma.as_tensor(list(aspect_ratios), dtype=dtype)
        h_ratios = fiamma.sqrt(ratios)
        w_ratios = 1 / h_ratios
        ws = (w_ratios[:, None] * scales[None, :]).reshape(-1)
        hs = (h_ratios[:, None] * scales[None, :]).reshape(-1)
        return (fiamma.stack([-ws, -hs, ws, hs], dim=1) / 2).round()

    def set_cell_anchors(self, dtype, device=None):
        self.cell_anchors = [a.to(dtype=dtype) if device is None else a.to(device=device,
                                                                                dtype=dtype)
                             for a in self.cell_anchors]

    def num_anchors_per_location(self):
        return [len(s) * len(a) for s, a in zip(self.sizes, self.aspect_ratios)]

    def grid_anchors(self, grid_sizes, strides):
        if not (len(grid_sizes) == len(strides) == len(self.cell_anchors)):
            raise ValueError(
                f"AnchorGenerator: {len(grid_sizes)} feature maps but anchors for "
                f"{len(self.cell_anchors)} levels; sizes and aspect_ratios need one entry per "
                f"feature map")
        anchors = []
        for (gh, gw), (sh, sw), base in zip(grid_sizes, strides, self.cell_anchors):
            shifts_x = fiamma.arange(0, gw, dtype=fiamma.int32) * sw
            shifts_y = fiamma.arange(0, gh, dtype=fiamma.int32) * sh
            shift_y, shift_x = fiamma.meshgrid(shifts_y, shifts_x, indexing="ij")
            shift_x, shift_y = shift_x.reshape(-1), shift_y.reshape(-1)
            shifts = fiamma.stack((shift_x, shift_y, shift_x, shift_y), dim=1)
            anchors.append((shifts.reshape(-1, 1, 4) + base.reshape(1, -1, 4)).reshape(-1, 4))
        return anchors

    def forward(self, image_list, feature_maps):
        grid_sizes = [tuple(f.shape[-2:]) for f in feature_maps]
        ih, iw = image_list.tensors.shape[-2:]
        strides = [(ih // g[0], iw // g[1]) for g in grid_sizes]
        self.set_cell_anchors(feature_maps[0].dtype, feature_maps[0].device)
        per_level = self.grid_anchors(grid_sizes, strides)
        return [fiamma.cat(per_level) for _ in range(len(image_list.image_sizes))]


class DefaultBoxGenerator(nn.Module):
    """SSD's default boxes: for feature map ``k`` of ``len(aspect_ratios)`` maps, squares of
    relative sizes ``s_k`` and ``sqrt(s_k * s_{k+1})`` and, per ratio ``r`` of
    ``aspect_ratios[k]``, boxes ``s_k * sqrt(r)`` by ``s_k / sqrt(r)`` and their transposes,
    centred on the map's cells (spaced ``steps[k]`` pixels when given). ``scales`` default to
    ``min_ratio`` .. ``max_ratio`` evenly plus 1.0; ``clip`` clamps the relative sizes to
    [0, 1]. Returns per image an (A, 4) tensor of xyxy boxes in pixels.

        >>> import fiamma
        >>> from fiamma.vision.models.detection.image_list import ImageList
        >>> g = DefaultBoxGenerator([[2]], scales=[0.5, 1.0], steps=[32])
        >>> g.num_anchors_per_location()
        [4]
        >>> g(ImageList(fiamma.zeros(1, 3, 32, 32), [(32, 32)]), [fiamma.zeros(1, 8, 1, 1)])[0][0]
        tensor([ 8.,  8., 24., 24.])
    """

    def __init__(self, aspect_ratios, min_ratio=0.15, max_ratio=0.9, scales=None, steps=None,
                 clip=True):
        super().__init__()
        if steps is not None and len(aspect_ratios) != len(steps):
            raise ValueError("aspect_ratios and steps should have the same length")
        self.aspect_ratios = aspect_ratios
        self.steps = steps
        self.clip = clip
        n = len(aspect_ratios)
        if scales is None:
            if n > 1:
                self.scales = [min_ratio + (max_ratio - min_ratio) * k / (n - 1.0)
                               for k in range(n)]
                self.scales.append(1.0)
            else:
                self.scales = [min_ratio, max_ratio]
        else:
            self.scales = scales
        if len(self.scales) < n + 1:
            raise ValueError(f"DefaultBoxGenerator: {n} feature maps need {n + 1} scales, got "
                             f"{len(self.scales)}")
        self._wh_pairs = self._generate_wh_pairs(n)

    def _generate_wh_pairs(self, num_outputs):
        pairs = []
        for k in range(num_outputs):
            s_k = self.scales[k]
            s_prime = math.sqrt(self.scales[k] * self.scales[k + 1])
            wh = [[s_k, s_k], [s_prime, s_prime]]
            for ar in self.aspect_ratios[k]:
                w, h = s_k * math.sqrt(ar), s_k / math.sqrt(ar)
                wh.extend([[w, h], [h, w]])
            # float32 as torchvision's, whatever the model's dtype
            pairs.append(np.asarray(wh, dtype=np.float32))
        return pairs

    def num_anchors_per_location(self):
        return [2 + 2 * len(r) for r in self.aspect_ratios]

    def _grid_default_boxes(self, grid_sizes, image_size):
        """(A, 4) ``(cx, cy, w, h)`` relative to the image, computed in float32."""
        boxes = []
        for k, (fh, fw) in enumerate(grid_sizes):
            if self.steps is not None:
                x_f, y_f = image_size[1] / self.steps[k], image_size[0] / self.steps[k]
            else:
                y_f, x_f = fh, fw
            sx = (np.arange(fw, dtype=np.float32) + np.float32(0.5)) / np.float32(x_f)
            sy = (np.arange(fh, dtype=np.float32) + np.float32(0.5)) / np.float32(y_f)
            gy, gx = np.meshgrid(sy, sx, indexing="ij")
            wh = self._wh_pairs[k]
            if self.clip:
                wh = np.clip(wh, 0, 1)
            centres = np.repeat(np.stack([gx.reshape(-1), gy.reshape(-1)], 1), len(wh), axis=0)
            boxes.append(np.concatenate([centres, np.tile(wh, (fh * fw, 1))], axis=1))
        return np.concatenate(boxes, axis=0)

    def __repr__(self):
        return (f"{self.__class__.__name__}(aspect_ratios={self.aspect_ratios}, "
                f"clip={self.clip}, scales={self.scales}, steps={self.steps})")

    def forward(self, image_list, feature_maps):
        if len(feature_maps) != len(self.aspect_ratios):
            raise ValueError(f"DefaultBoxGenerator: {len(feature_maps)} feature maps but default "
                             f"boxes for {len(self.aspect_ratios)}")
        grid_sizes = [tuple(int(s) for s in f.shape[-2:]) for f in feature_maps]
        ih, iw = (int(s) for s in image_list.tensors.shape[-2:])
        dtype = feature_maps[0].dtype
        rel = self._grid_default_boxes(grid_sizes, (ih, iw)).astype(
            np.float64 if dtype == fiamma.float64 else np.float32)
        size = np.asarray([iw, ih], dtype=rel.dtype)
        xyxy = np.concatenate([(rel[:, :2] - 0.5 * rel[:, 2:]) * size,
                               (rel[:, :2] + 0.5 * rel[:, 2:]) * size], axis=1)
        boxes = fiamma.from_numpy(xyxy).to(dtype)
        if feature_maps[0].device != boxes.device:
            boxes = boxes.to(feature_maps[0].device)
        return [boxes for _ in image_list.image_sizes]
