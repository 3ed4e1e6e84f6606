"""Region Proposal Network (torchvision.models.detection.rpn): RPNHead and
RegionProposalNetwork with torchvision's module names and rules."""
import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models.detection import _utils as det_utils
from fiamma.vision.ops import boxes as box_ops
from fiamma.vision.ops.misc import Conv2dNormActivation

__all__ = ["RPNHead", "RegionProposalNetwork", "concat_box_prediction_layers"]


class RPNHead(nn.Module):
    """``conv_depth`` 3x3 conv + ReLU layers, then 1x1 convs to ``num_anchors`` objectness
    logits and ``4 * num_anchors`` box deltas, on every feature map.

        >>> import fiamma
        >>> h = RPNHead(8, 3)
        >>> logits, deltas = h([fiamma.zeros(1, 8, 4, 4)])
        >>> tuple(logits[0].shape), tuple(deltas[0].shape)
        ((1, 3, 4, 4), (1, 12, 4, 4))
    """

    _version = 2

    def __init__(self, in_channels, num_anchors, conv_depth=1):
        super().__init__()
        self.conv = nn.Sequential(*[
            Conv2dNormActivation(in_channels, in_channels, kernel_size=3, norm_layer=None)
            for _ in range(conv_depth)])
        self.cls_logits = nn.Conv2d(in_channels, num_anchors, kernel_size=1, stride=1)
        self.bbox_pred = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=1, stride=1)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, std=0.01)
                if layer.bias is not None:
                    nn.init.constant_(layer.bias, 0)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, *args, **kwargs):
        version = (local_metadata or {}).get("version", None)
        if version is None or version < 2:     # checkpoints from before conv became a stack
            for kind in ("weight", "bias"):
                old, new = f"{prefix}conv.{kind}", f"{prefix}conv.0.0.{kind}"
                if old in state_dict:
                    state_dict[new] = state_dict.pop(old)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, *args, **kwargs)

    def forward(self, x):
        logits, bbox_reg = [], []
        for feature in x:
            t = self.conv(feature)
            logits.append(self.cls_logits(t))
            bbox_reg.append(self.bbox_pred(t))
        return logits, bbox_reg


def permute_and_flatten(layer, N, A, C, H, W):
    return layer.reshape(N, A, C, H, W).permute(0, 3, 4, 1, 2).reshape(N, -1, C)


def concat_box_prediction_layers(box_cls, box_regression):
    """Per-level (N, A*C, H, W) class maps and (N, A*4, H, W) deltas -> (N*sum(HWA), C) and
    (N*sum(HWA), 4), ordered (image, level, y, x, anchor)."""
    cls_flat, reg_flat = [], []
    for cls_l, reg_l in zip(box_cls, box_regression):
        N, AxC, H, W = cls_l.shape
        A = reg_l.shape[1] // 4
        C = AxC // A
        cls_flat.append(permute_and_flatten(cls_l, N, A, C, H, W))
        reg_flat.append(permute_and_flatten(reg_l, N, A, 4, H, W))
    box_cls = fiamma.cat(cls_flat, dim=1).flatten(0, -2)
    box_regression = fiamma.cat(reg_flat, dim=1).reshape(-1, 4)
    return box_cls, box_regression


class RegionProposalNetwork(nn.Module):
    """Objectness and box deltas for every anchor; proposals are the decoded boxes of the
    ``pre_nms_top_n`` best anchors per level, clipped, with tiny and low-scored ones removed,
    NMS'ed per level and cut to ``post_nms_top_n``. In training it also returns the
    objectness (binary cross-entropy) and box (smooth L1, beta 1/9) losses over
    ``batch_size_per_image`` sampled anchors per image."""

    def __init__(self, anchor_generator, head, fg_iou_thresh, bg_iou_thresh,
                 batch_size_per_image, positive_fraction, pre_nms_top_n, post_nms_top_n,
                 nms_thresh, score_thresh=0.0):
        super().__init__()
        self.anchor_generator = anchor_generator
        self.head = head
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh,
                                                  allow_low_quality_matches=True)
        self.fg_bg_sampler = det_utils.BalancedPositiveNegativeSampler(batch_size_per_image,
                                                                       positive_fraction)
        self._pre_nms_top_n = pre_nms_top_n
        self._post_nms_top_n = post_nms_top_n
        self.nms_thresh = nms_thresh
        self.score_thresh = score_thresh
        self.min_size = 1e-3

    def pre_nms_top_n(self):
        return self._pre_nms_top_n["training" if self.training else "testing"]

    def post_nms_top_n(self):
        return self._post_nms_top_n["training" if self.training else "testing"]

    def assign_targets_to_anchors(self, anchors, targets):
        labels, matched_gt_boxes = [], []
        for anchors_i, target in zip(anchors, targets):
            gt_boxes = target["boxes"]
            if gt_boxes.numel() == 0:
                matched = fiamma.zeros(tuple(anchors_i.shape), dtype=fiamma.float32)
                lab = fiamma.zeros((anchors_i.shape[0],), dtype=fiamma.float32)
            else:
                quality = self.box_similarity(gt_boxes, anchors_i)
                idxs = self.proposal_matcher(quality)
                matched = gt_boxes[idxs.clamp(min=0)]
                lab = (idxs >= 0).to(fiamma.float32)
                lab = fiamma.where(idxs == self.proposal_matcher.BELOW_LOW_THRESHOLD, 0.0, lab)
                lab = fiamma.where(idxs == self.proposal_matcher.BETWEEN_THRESHOLDS, -1.0, lab)
            labels.append(lab)
            matched_gt_boxes.append(matched)
        return labels, matched_gt_boxes

    def _get_top_n_idx(self, objectness, num_anchors_per_level):
        r, offset = [], 0
        for ob in objectness.split(num_anchors_per_level, 1):
            n = det_utils._topk_min(ob, self.pre_nms_top_n(), 1)
            r.append(ob.topk(n, dim=1)[1] + offset)
            offset += ob.shape[1]
        return fiamma.cat(r, dim=1)

    def filter_proposals(self, proposals, objectness, image_shapes, num_anchors_per_level):
        num_images = proposals.shape[0]
        objectness = objectness.detach().reshape(num_images, -1)
        levels = fiamma.cat([fiamma.full((n,), idx, dtype=fiamma.int64)
                             for idx, n in enumerate(num_anchors_per_level)], 0)
        top_n_idx = self._get_top_n_idx(objectness, num_anchors_per_level)
        batch_idx = fiamma.arange(num_images)[:, None]
        objectness = objectness[batch_idx, top_n_idx]
        levels = levels[top_n_idx]
        proposals = proposals[batch_idx, top_n_idx]
        probs = fiamma.sigmoid(objectness)
        final_boxes, final_scores = [], []
        for boxes, scores, lvl, img_shape in zip(proposals, probs, levels, image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, img_shape)
            keep = box_ops.remove_small_boxes(boxes, self.min_size)
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = fiamma.where(scores >= self.score_thresh)[0]
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = box_ops.batched_nms(boxes, scores, lvl, self.nms_thresh)
            keep = keep[:self.post_nms_top_n()]
            final_boxes.append(boxes[keep])
            final_scores.append(scores[keep])
        return final_boxes, final_scores

    def compute_loss(self, objectness, pred_bbox_deltas, labels, regression_targets):
        """(objectness loss, box loss) over the sampled anchors."""
        pos, neg = self.fg_bg_sampler(labels)
        pos = fiamma.where(fiamma.cat(pos, dim=0))[0]
        neg = fiamma.where(fiamma.cat(neg, dim=0))[0]
        sampled = fiamma.cat([pos, neg], dim=0)
        objectness = objectness.flatten()
        labels = fiamma.cat(labels, dim=0)
        regression_targets = fiamma.cat(regression_targets, dim=0)
        box_loss = F.smooth_l1_loss(pred_bbox_deltas[pos], regression_targets[pos],
                                    beta=1 / 9, reduction="sum") / sampled.numel()
        objectness_loss = F.binary_cross_entropy_with_logits(objectness[sampled],
                                                             labels[sampled])
        return objectness_loss, box_loss

    def forward(self, images, features, targets=None):
        """``images`` an ImageList, ``features`` an ordered dict of maps; returns (proposals per
        image, losses dict (empty in eval))."""
        features = list(features.values())
        objectness, pred_bbox_deltas = self.head(features)
        anchors = self.anchor_generator(images, features)
        num_images = len(anchors)
        num_anchors_per_level = [o.shape[1] * o.shape[2] * o.shape[3] for o in objectness]
        objectness, pred_bbox_deltas = concat_box_prediction_layers(objectness,
                                                                    pred_bbox_deltas)
        proposals = self.box_coder.decode(pred_bbox_deltas.detach(), anchors)
        proposals = proposals.reshape(num_images, -1, 4)
        boxes, _scores = self.filter_proposals(proposals, objectness, images.image_sizes,
                                               num_anchors_per_level)
        losses = {}
        if self.training:
            if targets is None:
                raise ValueError("targets should not be None")
            labels, matched_gt_boxes = self.assign_targets_to_anchors(anchors, targets)
            regression_targets = self.box_coder.encode(matched_gt_boxes, anchors)
            loss_objectness, loss_rpn_box_reg = self.compute_loss(
                objectness, pred_bbox_deltas, labels, regression_targets)
            losses = {"loss_objectness": loss_objectness, "loss_rpn_box_reg": loss_rpn_box_reg}
        return boxes, losses
