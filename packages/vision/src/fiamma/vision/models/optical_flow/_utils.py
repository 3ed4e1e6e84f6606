"""Helpers of RAFT (torchvision.models.optical_flow._utils): sampling at absolute pixel
coordinates, the pixel-coordinate grid, and upsampling a 1/8-resolution flow."""
import fiamma
import fiamma.nn.functional as F

__all__ = ["grid_sample", "make_coords_grid", "upsample_flow"]


def grid_sample(img, absolute_grid, mode="bilinear", align_corners=None):
    """:func:`fiamma.nn.functional.grid_sample` with a grid of absolute pixel coordinates
    ``(x, y)`` (x along W, y along H) instead of coordinates normalised to [-1, 1]."""
    h, w = img.shape[-2:]
    xgrid, ygrid = absolute_grid.split([1, 1], dim=-1)
    xgrid = 2 * xgrid / (w - 1) - 1
    if h > 1:
        ygrid = 2 * ygrid / (h - 1) - 1
    return F.grid_sample(img, fiamma.cat([xgrid, ygrid], dim=-1), mode=mode,
                         align_corners=align_corners)


def make_coords_grid(batch_size, h, w, device="cpu"):
    """``(batch_size, 2, h, w)`` float32: channel 0 is each pixel's x (column), channel 1 its
    y (row)."""
    ys, xs = fiamma.meshgrid(fiamma.arange(h, device=device), fiamma.arange(w, device=device),
                             indexing="ij")
    coords = fiamma.stack([xs, ys], dim=0).float()
    return coords[None].repeat(batch_size, 1, 1, 1)


def upsample_flow(flow, up_mask=None, factor=8):
    """``flow`` ``(N, 2, h, w)`` to ``(N, 2, h*factor, w*factor)``, scaled by ``factor``: with
    ``up_mask`` ``(N, 9*factor*factor, h, w)`` each fine pixel is a convex combination (softmax
    over the 9 weights) of the 3x3 coarse neighbourhood around its coarse pixel; without it,
    bilinear interpolation (align_corners=True)."""
    n, c, h, w = flow.shape
    if up_mask is None:
        return factor * F.interpolate(flow, size=(h * factor, w * factor), mode="bilinear",
                                      align_corners=True)
    mask = fiamma.softmax(up_mask.reshape(n, 1, 9, factor, factor, h, w), dim=2)
    nb = F.unfold(factor * flow, kernel_size=3, padding=1).reshape(n, c, 9, 1, 1, h, w)
    up = (mask * nb).sum(dim=2)
    return up.permute(0, 1, 4, 2, 5, 3).reshape(n, c, h * factor, w * factor)
