"""Rotated bounding boxes (formats XYWHR, CXCYWHR, XYXYXYXY) for the v2 functionals, in float64
NumPy on ``(N, K)`` arrays, with torchvision 0.28's conventions:

- the angle ``r`` is in degrees, counter-clockwise on the screen (y points down), so the first
  edge of an XYWHR box runs from (x1, y1) to (x1 + w cos r, y1 - w sin r) and the corners are
  listed in that order (top-left, top-right, bottom-right, bottom-left of the unrotated box);
- conversions go through XYWHR (XYXYXYXY -> XYWHR reads w, h and r off the first two edges);
- a transform maps the four corners, refits a rectangle to the parallelogram they form
  (keeping the longer diagonal), and clamps it to the canvas: ``"soft"`` keeps the smallest
  rectangle of the same angle enclosing the box's part inside the canvas, ``"hard"`` the
  largest one inside both, edge by edge (a side at a time, the canvas turned by 90 degrees
  between sides), as torchvision's clamping does.
"""
import numpy as np

from fiamma.vision import tv_tensors as tv

BBF = tv.BoundingBoxFormat
WIDTH = {BBF.XYWHR: 5, BBF.CXCYWHR: 5, BBF.XYXYXYXY: 8}


def _cos_sin(r_deg):
    r = r_deg * (np.pi / 180.0)
    return np.cos(r), np.sin(r)


def _cxcywhr_to_xywhr(a):
    cx, cy, w, h, r = a.T
    c, s = _cos_sin(r)
    hw, hh = np.abs(w) / 2, np.abs(h) / 2
    return np.stack([cx - hw * c - hh * s, cy + hw * s - hh * c, w, h, r], axis=1)


def _xywhr_to_cxcywhr(a):
    x, y, w, h, r = a.T
    c, s = _cos_sin(r)
    hw, hh = np.abs(w) / 2, np.abs(h) / 2
    return np.stack([x + hw * c + hh * s, y - hw * s + hh * c, w, h, r], axis=1)


def _xywhr_to_corners(a):
    x, y, w, h, r = a.T
    c, s = _cos_sin(r)
    return np.stack([x, y, x + w * c, y - w * s, x + w * c + h * s, y - w * s + h * c,
                     x + h * s, y + h * c], axis=1)


def _corners_to_xywhr(p):
    x1, y1, x2, y2, x3, y3 = p[:, :6].T
    r = np.arctan2(y1 - y2, x2 - x1) * (180.0 / np.pi)
    return np.stack([x1, y1, np.hypot(x2 - x1, y2 - y1), np.hypot(x3 - x2, y3 - y2), r], axis=1)


def convert(a, old, new):
    """(N, K) float64 boxes from rotated format ``old`` to rotated format ``new``."""
    if old == new:
        return a.copy()
    if old == BBF.CXCYWHR:
        a = _cxcywhr_to_xywhr(a)
    elif old == BBF.XYXYXYXY:
        a = _corners_to_xywhr(a)
    if new == BBF.CXCYWHR:
        return _xywhr_to_cxcywhr(a)
    if new == BBF.XYXYXYXY:
        return _xywhr_to_corners(a)
    return a.copy() if old == BBF.XYWHR else a


def horizontal_flip(a, fmt, canvas):
    a = a.copy()
    w_img = canvas[1]
    if fmt == BBF.XYXYXYXY:
        a[:, 0::2] = w_img - a[:, 0::2]
        return a[:, [2, 3, 0, 1, 6, 7, 4, 5]]
    if fmt == BBF.XYWHR:
        c, s = _cos_sin(a[:, 4])
        a[:, 0] = w_img - (a[:, 0] + a[:, 2] * c)
        a[:, 1] = a[:, 1] - a[:, 2] * s
    else:
        a[:, 0] = w_img - a[:, 0]
    a[:, 4] = -a[:, 4]
    return a


def vertical_flip(a, fmt, canvas):
    a = a.copy()
    h_img = canvas[0]
    if fmt == BBF.XYXYXYXY:
        a[:, 1::2] = h_img - a[:, 1::2]
        return a[:, [2, 3, 0, 1, 6, 7, 4, 5]]
    if fmt == BBF.XYWHR:
        c, s = _cos_sin(a[:, 4])
        a[:, 1] = h_img - (a[:, 1] - a[:, 2] * s)
        a[:, 0] = a[:, 0] + a[:, 2] * c
    else:
        a[:, 1] = h_img - a[:, 1]
    a[:, 4] = 180.0 - a[:, 4]
    return a


def parallelogram_to_rectangle(p):
    """The rectangle (as four corners) fitted to parallelograms ``p`` (N, 8): the two corners
    on the longer diagonal stay, the angle follows the longer of the first two edges."""
    x1, y1, x2, y2, x3, y3, x4, y4 = p.T
    cx, cy = (x1 + x3) / 2, (y1 + y3) / 2
    wp, hp = np.hypot(x2 - x1, y2 - y1), np.hypot(x4 - x1, y4 - y1)
    r12, r14 = np.arctan2(y1 - y2, x2 - x1), np.arctan2(y1 - y4, x4 - x1)
    between = r12 - r14
    sign = np.where(between > np.pi / 2, -1.0, 1.0)
    c, s = np.cos(between), np.sin(between)
    w = np.where(wp < hp, wp * s, wp + hp * c * sign)
    h = np.where(wp > hp, hp * s, hp + wp * c * sign)
    r = np.where(hp > wp, r14 + np.pi / 2, r12)
    c, s = np.cos(r), np.sin(r)
    hw, hh = w / 2, h / 2
    return np.stack([cx - hw * c - hh * s, cy - hh * c + hw * s,
                     cx + hw * c - hh * s, cy - hh * c - hw * s,
                     cx + hw * c + hh * s, cy + hh * c - hw * s,
                     cx - hw * c + hh * s, cy + hh * c + hw * s], axis=1)


# ---------------------------------------------------------------------------- clamping

def _roll_to_leftmost(p, idx=None):
    """Corners re-listed cyclically from the leftmost one (the upper of equals), or by a
    previously returned ``idx``."""
    if idx is None:
        x, y = p[:, 0::2], p[:, 1::2]
        score = y / np.abs(y).max(1, keepdims=True) + x / np.abs(x).max(1, keepdims=True) * 100
        first = np.argmin(score, axis=1)
        idx = (2 * first[:, None] + np.arange(8)) % 8
    return idx, np.take_along_axis(p, idx, axis=1)


def _lines(p):
    """Slope and y-intercept of the four edges (corner i to corner i + 1)."""
    x, y = p[:, 0::2], p[:, 1::2]
    a = (np.roll(y, -1, axis=1) - y) / (np.roll(x, -1, axis=1) - x)
    return a, y - a * x


def _clip(v, lo, hi):
    return np.minimum(np.maximum(v, lo), hi)


def _clamped_intercepts(p, orig, canvas, mode):
    """New y-intercepts of the four edges for the box whose first corner is leftmost."""
    h_img, w_img = canvas
    a, b = _lines(p)
    a1, a2, a3, a4 = a.T
    b1, b2, b3, b4 = b.T
    _, bm = _lines(orig)
    b1m, b2m, b3m, b4m = bm.T
    n1 = _clip(_clip(b2, b1, b3), 0, h_img)
    n4 = _clip(_clip(b3, b2, b4), 0, h_img)
    if mode == "hard":
        # the largest box inside: first and last edges meet halfway, the other two move in
        # as far as the canvas corners allow
        mid = (n1 + n4) / 2
        n2 = np.minimum(np.max(np.stack([mid * a2 / a1, b3 * a2 / a3, (a1 - a2) * w_img + mid,
                                         (a3 - a2) * w_img + b3], 1), axis=1), b2)
        n3 = np.maximum(np.min(np.stack([h_img * (1 - a3 / a4) + mid * a3 / a4,
                                         h_img * (1 - a3 / a2) + n2 * a3 / a2,
                                         (a2 - a3) * w_img + n2, (a4 - a3) * w_img + mid], 1),
                               axis=1), b3)
        n1 = n4 = _clip(_clip(mid, b1m, b3m), b2m, b4m)
        return n1, _clip(n2, b2m, b4m), _clip(n3, b1m, b3m), n4
    return _clip(n1, b1m, b3m), _clip(b2, b2m, b4m), _clip(b3, b1m, b3m), _clip(n4, b2m, b4m)


def _clamp_left(p, orig, canvas, mode):
    """Clamp boxes (first corner leftmost) against the canvas' left edge x = 0."""
    a, _ = _lines(p)
    b = np.stack(_clamped_intercepts(p, orig, canvas, mode), axis=1)
    # corner i where edges i - 1 and i meet
    xs = -(b - np.roll(b, 1, axis=1)) / (a - np.roll(a, 1, axis=1))
    meet = np.stack([xs, a * xs + b], axis=2).reshape(-1, 8)
    x1, y1, x2, y2, x3, y3, x4, y4 = p.T
    moved = p.copy()
    moved[:, 0] = np.maximum(moved[:, 0], 0)
    moved[:, 6] = np.maximum(moved[:, 6], 0)
    use_meet = (x1 < 0) & ~np.isnan(meet).any(axis=1)
    axis_aligned = np.isclose(y1, y2) | np.isclose(y3, y4)
    gone = ((p[:, 0::2] <= 0).all(axis=1) | np.isclose(y1, y4) | np.isclose(y2, y3)
            | (axis_aligned & np.isclose(x1, x2)))
    out = np.where(use_meet[:, None], meet, p)
    out = np.where(axis_aligned[:, None], moved, out)
    return np.where(gone[:, None], 0.0, out)


def clamp_corners(p, canvas, mode):
    """Clamp rotated boxes given as corners (N, 8) to ``canvas`` (h, w); ``mode`` "soft" or
    "hard" (None: unchanged)."""
    if mode is None or p.shape[0] == 0:
        return p.copy()
    h_img, w_img = canvas
    out, orig = p.copy(), p.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(4):
            idx, out = _roll_to_leftmost(out)
            _, orig = _roll_to_leftmost(orig, idx)
            out = _clamp_left(out, orig, (h_img, w_img), mode)
            # torchvision re-applies the same cyclic shift here (it does not undo it), which
            # decides the corner listed first, hence the angle returned
            _, out = _roll_to_leftmost(out, idx)
            _, orig = _roll_to_leftmost(orig, idx)
            # turn the canvas 90 degrees so that the next side becomes the left one
            out = np.stack([out[:, 1::2], w_img - out[:, 0::2]], axis=2).reshape(-1, 8)
            orig = np.stack([orig[:, 1::2], w_img - orig[:, 0::2]], axis=2).reshape(-1, 8)
            h_img, w_img = w_img, h_img
    return out


def clamp(a, fmt, canvas, mode):
    """Clamp rotated boxes of format ``fmt`` (see :func:`clamp_corners`)."""
    if mode is None:
        return a.copy()
    return convert(clamp_corners(convert(a, fmt, BBF.XYXYXYXY), canvas, mode), BBF.XYXYXYXY,
                   fmt)


def sanitize_mask(a, fmt, canvas, min_size, min_area):
    """SanitizeBoundingBoxes' test for rotated boxes (torchvision 0.28's: the side lengths it
    checks are |p1 - p2| and the distance from (y2, x3) to (y3, x4), the latter mixing x and
    y as torchvision's code does)."""
    p = convert(a, fmt, BBF.XYXYXYXY)
    ws = np.hypot(p[:, 0] - p[:, 2], p[:, 1] - p[:, 3])
    hs = np.hypot(p[:, 3] - p[:, 5], p[:, 4] - p[:, 6])
    h_img, w_img = canvas
    valid = (ws >= min_size) & (hs >= min_size) & (p >= 0).all(axis=1) & (ws * hs >= min_area)
    valid &= (p[:, 0::2] <= w_img).all(axis=1) & (p[:, 1::2] <= h_img).all(axis=1)
    return valid
