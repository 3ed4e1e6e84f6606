"""The mask and keypoint parts of the RoI heads (torchvision.models.detection.roi_heads):
targets for the mask/keypoint losses, the losses, the inference decoding of the head outputs
and the pasting of RoI masks into the image. Re-exported from ``roi_heads``."""
import fiamma
import fiamma.nn.functional as F
from fiamma.vision.ops.roi_align import roi_align

__all__ = ["maskrcnn_inference", "project_masks_on_boxes", "maskrcnn_loss",
           "keypoints_to_heatmap", "heatmaps_to_keypoints", "keypointrcnn_loss",
           "keypointrcnn_inference", "expand_boxes", "expand_masks", "paste_mask_in_image",
           "paste_masks_in_image"]


def maskrcnn_inference(x, labels):
    """Per image, the sigmoid of each detection's mask logits for its predicted class:
    ``x`` (N, num_classes, M, M) logits, ``labels`` a per-image list of (N_i,) labels; returns
    a list of (N_i, 1, M, M) probabilities."""
    mask_prob = x.sigmoid()
    counts = [lab.shape[0] for lab in labels]  # sizes: symbolic under fiamma.jit.trace
    labels = fiamma.cat(list(labels))
    mask_prob = mask_prob[fiamma.arange(x.shape[0]), labels][:, None]
    return list(mask_prob.split(counts, dim=0))


def project_masks_on_boxes(gt_masks, boxes, matched_idxs, M):
    """The (N, H, W) ground-truth masks cropped to ``boxes`` (K, 4) and resampled to (K, M, M)
    with RoIAlign (box k reads mask ``matched_idxs[k]``): the targets of the mask loss."""
    idx = matched_idxs.to(boxes.dtype)
    rois = fiamma.cat([idx[:, None], boxes], dim=1)
    masks = gt_masks[:, None].to(rois.dtype)
    return roi_align(masks, rois, (M, M), 1.0)[:, 0]


def maskrcnn_loss(mask_logits, proposals, gt_masks, gt_labels, mask_matched_idxs):
    """Mean binary cross-entropy between each positive proposal's mask logits for its
    ground-truth class and the ground-truth mask projected on the proposal (zero, still tied
    to the graph, when no proposal is positive)."""
    size = int(mask_logits.shape[-1])
    labels = fiamma.cat([gl[idx] for gl, idx in zip(gt_labels, mask_matched_idxs)], dim=0)
    targets = fiamma.cat([project_masks_on_boxes(m, p, i, size)
                          for m, p, i in zip(gt_masks, proposals, mask_matched_idxs)], dim=0)
    if targets.numel() == 0:
        return mask_logits.sum() * 0
    picked = mask_logits[fiamma.arange(int(labels.shape[0])), labels]
    return F.binary_cross_entropy_with_logits(picked, targets)


def keypoints_to_heatmap(keypoints, rois, heatmap_size):
    """Each (x, y, v) keypoint of ``keypoints`` (K, P, 3) as the flat index ``y * S + x`` of its
    cell in an S x S grid over its RoI (``rois`` (K, 4)), and whether it is usable (visible and
    inside the RoI; a keypoint on the RoI's right/bottom edge falls in the last cell).
    Returns (indices, valid), both (K, P) int64 (indices are 0 where invalid)."""
    x0, y0 = rois[:, 0][:, None], rois[:, 1][:, None]
    sx = heatmap_size / (rois[:, 2] - rois[:, 0])[:, None]
    sy = heatmap_size / (rois[:, 3] - rois[:, 1])[:, None]
    x, y = keypoints[..., 0], keypoints[..., 1]
    x_edge = x == rois[:, 2][:, None]
    y_edge = y == rois[:, 3][:, None]
    xi = ((x - x0) * sx).floor().to(fiamma.int64)
    yi = ((y - y0) * sy).floor().to(fiamma.int64)
    xi = fiamma.where(x_edge, heatmap_size - 1, xi)
    yi = fiamma.where(y_edge, heatmap_size - 1, yi)
    inside = (xi >= 0) & (yi >= 0) & (xi < heatmap_size) & (yi < heatmap_size)
    valid = (inside & (keypoints[..., 2] > 0)).to(fiamma.int64)
    return (yi * heatmap_size + xi) * valid, valid


def heatmaps_to_keypoints(maps, rois):
    """Keypoint locations from heatmaps ``maps`` (K, P, S, S) over ``rois`` (K, 4): each map is
    resized (bicubic) to the RoI's size in pixels (at least 1, rounded up); the argmax cell
    ``(i, j)`` maps back to ``(j + 0.5, i + 0.5)`` scaled to the RoI. Returns (K, P, 3)
    ``(x, y, 1)`` and the (K, P) map values at the maxima, in ``maps``' dtype."""
    k, p = int(maps.shape[0]), int(maps.shape[1])
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    w_ceil, h_ceil = widths.ceil().tolist(), heights.ceil().tolist()
    xy, scores = [], []
    for i in range(k):
        rw, rh = int(w_ceil[i]), int(h_ceil[i])
        roi_map = F.interpolate(maps[i][:, None], size=(rh, rw), mode="bicubic",
                                align_corners=False)[:, 0]
        best, pos = roi_map.reshape(p, -1).max(dim=1)
        x_int = pos % rw
        y_int = (pos - x_int) // rw
        x = (x_int.to(maps.dtype) + 0.5) * (widths[i] / rw) + rois[i, 0]
        y = (y_int.to(maps.dtype) + 0.5) * (heights[i] / rh) + rois[i, 1]
        xy.append(fiamma.stack((x, y, fiamma.ones_like(x)), dim=1))
        scores.append(best)
    if not xy:
        return (fiamma.zeros((0, p, 3), dtype=maps.dtype),
                fiamma.zeros((0, p), dtype=maps.dtype))
    return fiamma.stack(xy), fiamma.stack(scores)


def keypointrcnn_loss(keypoint_logits, proposals, gt_keypoints, keypoint_matched_idxs):
    """Cross-entropy of each visible keypoint's S*S heatmap logits against the cell of its
    ground-truth location in the proposal (zero, tied to the graph, when none is usable)."""
    n, p, h, w = (int(s) for s in keypoint_logits.shape)
    if h != w:
        raise ValueError(f"keypoint_logits height and width (last two elements of shape) should "
                         f"be equal. Instead got H = {h} and W = {w}")
    heatmaps, valid = [], []
    for props, kps, midx in zip(proposals, gt_keypoints, keypoint_matched_idxs):
        hm, v = keypoints_to_heatmap(kps[midx], props, h)
        heatmaps.append(hm.reshape(-1))
        valid.append(v.reshape(-1))
    targets = fiamma.cat(heatmaps, dim=0)
    valid = fiamma.where(fiamma.cat(valid, dim=0) > 0)[0]
    if targets.numel() == 0 or valid.numel() == 0:
        return keypoint_logits.sum() * 0
    logits = keypoint_logits.reshape(n * p, h * w)
    return F.cross_entropy(logits[valid], targets[valid])


def keypointrcnn_inference(x, boxes):
    """Per image, :func:`heatmaps_to_keypoints` of its detections' heatmaps: lists of (N_i,
    P, 3) keypoints and (N_i, P) scores."""
    counts = [b.shape[0] for b in boxes]  # sizes: symbolic under fiamma.jit.trace
    kps, scores = [], []
    for maps, bb in zip(x.split(counts, dim=0), boxes):
        kp, sc = heatmaps_to_keypoints(maps, bb)
        kps.append(kp)
        scores.append(sc)
    return kps, scores


def expand_boxes(boxes, scale):
    """(N, 4) xyxy boxes scaled by ``scale`` about their centres."""
    w_half = (boxes[:, 2] - boxes[:, 0]) * 0.5 * scale
    h_half = (boxes[:, 3] - boxes[:, 1]) * 0.5 * scale
    x_c = (boxes[:, 2] + boxes[:, 0]) * 0.5
    y_c = (boxes[:, 3] + boxes[:, 1]) * 0.5
    return fiamma.stack((x_c - w_half, y_c - h_half, x_c + w_half, y_c + h_half), dim=1)


def expand_masks(mask, padding):
    """``mask`` (..., M, M) zero-padded by ``padding`` on every side, and the scale
    ``(M + 2 * padding) / M`` the boxes must grow by to keep their pixels in place."""
    m = int(mask.shape[-1])
    return F.pad(mask, (padding,) * 4), float(m + 2 * padding) / m


def paste_mask_in_image(mask, box, im_h, im_w):
    """One (M, M) RoI mask resized (bilinear) to its integer box ``[x1, y1, x2, y2]``
    (inclusive corners) and placed in an (im_h, im_w) zero image, cropped at the borders."""
    x1, y1, x2, y2 = (int(v) for v in box.tolist())
    w, h = max(x2 - x1 + 1, 1), max(y2 - y1 + 1, 1)
    mask = F.interpolate(mask[None, None], size=(h, w), mode="bilinear",
                         align_corners=False)[0, 0]
    xa, xb = max(x1, 0), min(x2 + 1, im_w)
    ya, yb = max(y1, 0), min(y2 + 1, im_h)
    if xb <= xa or yb <= ya:
        return fiamma.zeros((im_h, im_w), dtype=mask.dtype)
    crop = mask[ya - y1:yb - y1, xa - x1:xb - x1]
    return F.pad(crop, (xa, im_w - xb, ya, im_h - yb))


def paste_masks_in_image(masks, boxes, img_shape, padding=1):
    """Paste (N, 1, M, M) RoI masks into (N, 1, H, W) full-image masks for (N, 4) boxes in
    image coordinates (``img_shape`` (H, W)). The masks are padded by ``padding`` and the
    boxes grown to match before the boxes are truncated to integers.

        >>> import fiamma
        >>> out = paste_masks_in_image(fiamma.ones(1, 1, 28, 28),
        ...                            fiamma.tensor([[2., 3., 10., 12.]]), (16, 16))
        >>> tuple(out.shape), out[0, 0, 6, 5].item(), out[0, 0, 0, 0].item()
        ((1, 1, 16, 16), 1.0, 0.0)
    """
    masks, scale = expand_masks(masks, padding=padding)
    boxes = expand_boxes(boxes, scale).to(fiamma.int64)
    im_h, im_w = (int(s) for s in img_shape)
    m = int(masks.shape[-1])
    x1, y1, x2, y2 = boxes.unbind(1)
    # the bilinear resize to the box and the placement, as two weight matrices per box (the
    # resize is separable): every box at once, with fiamma ops only (fiamma.jit.trace and
    # fiamma.onnx follow them for any number of boxes)
    wy = _paste_weights(y1, (y2 - y1 + 1).clamp(min=1), im_h, m, masks.dtype)  # (N, H, m)
    wx = _paste_weights(x1, (x2 - x1 + 1).clamp(min=1), im_w, m, masks.dtype)  # (N, W, m)
    return fiamma.matmul(fiamma.matmul(wy, masks[:, 0]), wx.transpose(1, 2))[:, None]


def _paste_weights(start, size, length, m, dtype):
    """(N, length, m): row ``p`` holds the bilinear weights (align_corners=False, as
    F.interpolate) of the m source cells for image position ``p`` of a box starting at
    ``start`` of ``size`` pixels; zero outside the box."""
    j = fiamma.arange(length)[None, :] - start[:, None]                       # (N, L)
    inside = (j >= 0) & (j < size[:, None])
    scale = (m / size.to(dtype))[:, None]
    src = ((j.to(dtype) + 0.5) * scale - 0.5).clamp(min=0)
    i0 = fiamma.floor(src).to(fiamma.int64).clamp(max=m - 1)
    i1 = (i0 + 1).clamp(max=m - 1)
    lam = (src - i0.to(dtype))[..., None]
    k = fiamma.arange(m)
    w = (k == i0[..., None]).to(dtype) * (1 - lam) + (k == i1[..., None]).to(dtype) * lam
    return w * inside[..., None].to(dtype)
