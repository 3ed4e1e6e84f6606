"""AnchorGenerator (torchvision.models.detection.anchor_utils): anchors at every position of
each feature map, ``len(sizes[i]) * len(aspect_ratios[i])`` per position of map ``i``."""
import fiamma
from fiamma import nn

__all__ = ["AnchorGenerator"]


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
