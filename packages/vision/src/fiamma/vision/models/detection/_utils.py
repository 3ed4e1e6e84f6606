"""Helpers the two-stage detectors share (torchvision.models.detection._utils): the box coder,
the IoU matcher and the balanced positive/negative sampler."""
import math

import fiamma

__all__ = ["BalancedPositiveNegativeSampler", "BoxCoder", "BoxLinearCoder", "Matcher",
           "SSDMatcher", "overwrite_eps", "retrieve_out_channels"]



class BalancedPositiveNegativeSampler:
    """Per image, draw at most ``batch_size_per_image`` elements with at most
    ``positive_fraction`` of them positive (label >= 1), the rest negative (label 0); -1 is
    ignored. Returns two lists of uint8 masks (positives, negatives), one per image.

        >>> import fiamma
        >>> s = BalancedPositiveNegativeSampler(4, 0.5)
        >>> pos, neg = s([fiamma.tensor([1, 0, -1, 1, 1, 0, 0, 0])])
        >>> int(pos[0].sum()), int(neg[0].sum())
        (2, 2)
    """

    def __init__(self, batch_size_per_image, positive_fraction):
        self.batch_size_per_image = batch_size_per_image
        self.positive_fraction = positive_fraction

    def __call__(self, matched_idxs):
        pos_idx, neg_idx = [], []
        for matched in matched_idxs:
            positive = fiamma.where(matched >= 1)[0]
            negative = fiamma.where(matched == 0)[0]
            num_pos = min(positive.numel(), int(self.batch_size_per_image
                                                * self.positive_fraction))
            num_neg = min(negative.numel(), self.batch_size_per_image - num_pos)
            pos_sel = positive[fiamma.randperm(positive.numel())[:num_pos]]
            neg_sel = negative[fiamma.randperm(negative.numel())[:num_neg]]
            pos_mask = fiamma.zeros(matched.shape, dtype=fiamma.uint8)
            neg_mask = fiamma.zeros(matched.shape, dtype=fiamma.uint8)
            pos_mask[pos_sel] = 1
            neg_mask[neg_sel] = 1
            pos_idx.append(pos_mask)
            neg_idx.append(neg_mask)
        return pos_idx, neg_idx


class BoxCoder:
    """Encode boxes as ``(dx, dy, dw, dh)`` offsets from reference boxes (R-CNN's
    parameterisation, scaled by ``weights``) and decode them back; ``dw``/``dh`` are clamped
    to ``bbox_xform_clip`` when decoding.

        >>> import fiamma
        >>> c = BoxCoder((1.0, 1.0, 1.0, 1.0))
        >>> ref = fiamma.tensor([[0., 0., 10., 10.]])
        >>> c.decode_single(c.encode_single(ref, ref), ref).tolist()
        [[0.0, 0.0, 10.0, 10.0]]
    """

    def __init__(self, weights, bbox_xform_clip=math.log(1000.0 / 16)):
        self.weights = weights
        self.bbox_xform_clip = bbox_xform_clip

    def encode(self, reference_boxes, proposals):
        """Per-image lists in, per-image list of (N_i, 4) targets out."""
        counts = [len(b) for b in reference_boxes]
        targets = self.encode_single(fiamma.cat(list(reference_boxes), dim=0),
                                     fiamma.cat(list(proposals), dim=0))
        return targets.split(counts, 0)

    def encode_single(self, reference_boxes, proposals):
        """Targets that take ``proposals`` (N, 4) to ``reference_boxes`` (N, 4)."""
        wx, wy, ww, wh = self.weights
        px1, py1, px2, py2 = (proposals[:, i:i + 1] for i in range(4))
        gx1, gy1, gx2, gy2 = (reference_boxes[:, i:i + 1] for i in range(4))
        ex_w, ex_h = px2 - px1, py2 - py1
        ex_cx, ex_cy = px1 + 0.5 * ex_w, py1 + 0.5 * ex_h
        gt_w, gt_h = gx2 - gx1, gy2 - gy1
        gt_cx, gt_cy = gx1 + 0.5 * gt_w, gy1 + 0.5 * gt_h
        return fiamma.cat((wx * (gt_cx - ex_cx) / ex_w, wy * (gt_cy - ex_cy) / ex_h,
                           ww * fiamma.log(gt_w / ex_w), wh * fiamma.log(gt_h / ex_h)), dim=1)

    def decode(self, rel_codes, boxes):
        """``rel_codes`` (sum N_i, 4k) against the per-image list ``boxes``: (sum N_i, k, 4)."""
        if not isinstance(boxes, (list, tuple)):
            raise TypeError(f"BoxCoder.decode: boxes must be a list or tuple of tensors, got "
                            f"{type(boxes).__name__}")
        total = sum(b.shape[0] for b in boxes)  # sizes: symbolic under fiamma.jit.trace
        concat = fiamma.cat(list(boxes), dim=0)
        if total > 0:
            rel_codes = rel_codes.reshape(total, -1)
        pred = self.decode_single(rel_codes, concat)
        if total > 0:
            pred = pred.reshape(total, -1, 4)
        else:  # no boxes: (0, k, 4) all the same (-1 cannot be inferred for an empty tensor)
            pred = pred.reshape(0, pred.shape[-1] // 4, 4)
        return pred

    def decode_single(self, rel_codes, boxes):
        """Boxes (N, 4k) from offsets ``rel_codes`` (N, 4k) relative to ``boxes`` (N, 4)."""
        boxes = boxes.to(rel_codes.dtype)
        widths = boxes[:, 2] - boxes[:, 0]
        heights = boxes[:, 3] - boxes[:, 1]
        ctr_x = boxes[:, 0] + 0.5 * widths
        ctr_y = boxes[:, 1] + 0.5 * heights
        wx, wy, ww, wh = self.weights
        dx = rel_codes[:, 0::4] / wx
        dy = rel_codes[:, 1::4] / wy
        dw = (rel_codes[:, 2::4] / ww).clamp(max=self.bbox_xform_clip)
        dh = (rel_codes[:, 3::4] / wh).clamp(max=self.bbox_xform_clip)
        pcx = dx * widths[:, None] + ctr_x[:, None]
        pcy = dy * heights[:, None] + ctr_y[:, None]
        half_w = 0.5 * (fiamma.exp(dw) * widths[:, None])
        half_h = 0.5 * (fiamma.exp(dh) * heights[:, None])
        return fiamma.stack((pcx - half_w, pcy - half_h, pcx + half_w, pcy + half_h),
                            dim=2).flatten(1)


class BoxLinearCoder:
    """FCOS's box parameterisation: the distances ``(left, top, right, bottom)`` from the centre
    of a reference box to the edges of a box, divided by the reference's ``(w, h, w, h)`` when
    ``normalize_by_size``. Works on any leading shape ``(..., 4)``.

        >>> import fiamma
        >>> c = BoxLinearCoder()
        >>> ref = fiamma.tensor([[0., 0., 8., 8.]])
        >>> c.encode(ref, fiamma.tensor([[2., 0., 6., 12.]])).tolist()
        [[0.25, 0.5, 0.25, 1.0]]
    """

    def __init__(self, normalize_by_size=True):
        self.normalize_by_size = normalize_by_size

    def encode(self, reference_boxes, proposals):
        """Offsets of ``proposals`` from the centres of ``reference_boxes``."""
        cx = 0.5 * (reference_boxes[..., 0] + reference_boxes[..., 2])
        cy = 0.5 * (reference_boxes[..., 1] + reference_boxes[..., 3])
        targets = fiamma.stack((cx - proposals[..., 0], cy - proposals[..., 1],
                                proposals[..., 2] - cx, proposals[..., 3] - cy), dim=-1)
        if self.normalize_by_size:
            w = reference_boxes[..., 2] - reference_boxes[..., 0]
            h = reference_boxes[..., 3] - reference_boxes[..., 1]
            targets = targets / fiamma.stack((w, h, w, h), dim=-1)
        return targets

    def decode(self, rel_codes, boxes):
        """Boxes from offsets ``rel_codes`` relative to the centres of ``boxes``."""
        boxes = boxes.to(rel_codes.dtype)
        cx = 0.5 * (boxes[..., 0] + boxes[..., 2])
        cy = 0.5 * (boxes[..., 1] + boxes[..., 3])
        if self.normalize_by_size:
            w = boxes[..., 2] - boxes[..., 0]
            h = boxes[..., 3] - boxes[..., 1]
            rel_codes = rel_codes * fiamma.stack((w, h, w, h), dim=-1)
        return fiamma.stack((cx - rel_codes[..., 0], cy - rel_codes[..., 1],
                             cx + rel_codes[..., 2], cy + rel_codes[..., 3]), dim=-1)


class Matcher:
    """Match each prediction (column of an M x N quality matrix) to its best ground truth:
    the ground-truth index when the quality is >= ``high_threshold``,
    ``BETWEEN_THRESHOLDS`` (-2) in [low, high), ``BELOW_LOW_THRESHOLD`` (-1) below ``low``.
    With ``allow_low_quality_matches`` the predictions of highest quality for each ground truth
    (ties included) keep their match whatever the thresholds.

        >>> import fiamma
        >>> Matcher(0.7, 0.3)(fiamma.tensor([[0.9, 0.5, 0.1]])).tolist()
        [0, -2, -1]
    """

    BELOW_LOW_THRESHOLD = -1
    BETWEEN_THRESHOLDS = -2

    def __init__(self, high_threshold, low_threshold, allow_low_quality_matches=False):
        if low_threshold > high_threshold:
            raise ValueError(f"Matcher: low_threshold ({low_threshold}) should be <= "
                             f"high_threshold ({high_threshold})")
        self.high_threshold = high_threshold
        self.low_threshold = low_threshold
        self.allow_low_quality_matches = allow_low_quality_matches

    def __call__(self, match_quality_matrix):
        if match_quality_matrix.numel() == 0:
            if match_quality_matrix.shape[0] == 0:
                raise ValueError("No ground-truth boxes available for one of the images during "
                                 "training")
            raise ValueError("No proposal boxes available for one of the images during training")
        matched_vals, matches = match_quality_matrix.max(dim=0)
        all_matches = matches.clone() if self.allow_low_quality_matches else None
        below = matched_vals < self.low_threshold
        between = (matched_vals >= self.low_threshold) & (matched_vals < self.high_threshold)
        matches = fiamma.where(below, self.BELOW_LOW_THRESHOLD, matches)
        matches = fiamma.where(between, self.BETWEEN_THRESHOLDS, matches)
        if self.allow_low_quality_matches:
            self.set_low_quality_matches_(matches, all_matches, match_quality_matrix)
        return matches

    def set_low_quality_matches_(self, matches, all_matches, match_quality_matrix):
        """Give back their match to the predictions of highest quality for some ground truth."""
        best_per_gt = match_quality_matrix.max(dim=1)[0]
        pairs = fiamma.where(match_quality_matrix == best_per_gt[:, None])
        preds = pairs[1]
        matches[preds] = all_matches[preds]


class SSDMatcher(Matcher):
    """SSD's matcher: IoU >= ``threshold`` matches, anything lower is background (-1); then each
    ground truth also claims its best prediction (a later ground truth wins a shared one).

        >>> import fiamma
        >>> SSDMatcher(0.5)(fiamma.tensor([[0.9, 0.3, 0.1], [0.2, 0.4, 0.3]])).tolist()
        [0, 1, -1]
    """

    def __init__(self, threshold):
        super().__init__(threshold, threshold, allow_low_quality_matches=False)

    def __call__(self, match_quality_matrix):
        matches = super().__call__(match_quality_matrix)
        best_pred = match_quality_matrix.max(dim=1)[1]
        matches[best_pred] = fiamma.arange(int(best_pred.shape[0]), dtype=fiamma.int64)
        return matches


def overwrite_eps(model, eps):
    """Set ``eps`` of every FrozenBatchNorm2d in ``model`` (the v1 detection checkpoints were
    trained with eps=0)."""
    from fiamma.vision.ops.misc import FrozenBatchNorm2d
    for module in model.modules():
        if isinstance(module, FrozenBatchNorm2d):
            module.eps = eps


def retrieve_out_channels(model, size):
    """The channel counts of the feature maps ``model`` returns for a zero (1, 3, size[1],
    size[0]) image, run in eval mode without gradients (the training flag is restored)."""
    from collections import OrderedDict
    was_training = model.training
    model.eval()
    try:
        params = list(model.parameters())
        kw = {"device": params[0].device} if params else {}
        with fiamma.no_grad():
            features = model(fiamma.zeros((1, 3, size[1], size[0]), **kw))
    finally:
        if was_training:
            model.train()
    if isinstance(features, fiamma.Tensor):
        features = OrderedDict([("0", features)])
    return [int(x.shape[1]) for x in features.values()]


def _topk_min(input, orig_kval, axis):
    # sym_min: under fiamma.jit.trace the count follows the number of candidates
    return fiamma.sym_min(int(orig_kval), input.shape[axis])


def _box_loss(kind, box_coder, anchors, matched_gt_boxes, bbox_regression, cnf=None):
    """Summed box regression loss of one image: ``'l1'``/``'smooth_l1'`` on the encoded
    targets, ``'giou'``/``'diou'``/``'ciou'`` on the decoded boxes."""
    import fiamma.nn.functional as F
    from fiamma.vision.ops import losses as L
    if kind in ("l1", "smooth_l1"):
        target = box_coder.encode_single(matched_gt_boxes, anchors)
        if kind == "l1":
            return F.l1_loss(bbox_regression, target, reduction="sum")
        beta = (cnf or {}).get("beta", 1.0)
        return F.smooth_l1_loss(bbox_regression, target, reduction="sum", beta=beta)
    fns = {"giou": L.generalized_box_iou_loss, "diou": L.distance_box_iou_loss,
           "ciou": L.complete_box_iou_loss}
    if kind not in fns:
        raise ValueError(f"Unsupported loss: {kind}; expected l1, smooth_l1, giou, diou or ciou")
    boxes = box_coder.decode_single(bbox_regression, anchors)
    return fns[kind](boxes, matched_gt_boxes, reduction="sum", eps=(cnf or {}).get("eps", 1e-7))
