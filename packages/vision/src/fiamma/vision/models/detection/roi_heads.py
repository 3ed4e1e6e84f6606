"""RoIHeads (torchvision.models.detection.roi_heads): pool each proposal, run the box head and
predictor, and either compute the Fast R-CNN losses (training) or decode, score, filter and NMS
the detections (eval); with a mask branch (Mask R-CNN) or a keypoint branch (Keypoint R-CNN)
the positive proposals (training) or the detections (eval) also go through those heads."""
import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models.detection import _utils as det_utils
from fiamma.vision.models.detection._roi_masks import (
    expand_boxes,
    expand_masks,
    heatmaps_to_keypoints,
    keypointrcnn_inference,
    keypointrcnn_loss,
    keypoints_to_heatmap,
    maskrcnn_inference,
    maskrcnn_loss,
    paste_mask_in_image,
    paste_masks_in_image,
    project_masks_on_boxes,
)
from fiamma.vision.ops import boxes as box_ops

__all__ = ["RoIHeads", "fastrcnn_loss", "maskrcnn_inference", "project_masks_on_boxes",
           "maskrcnn_loss", "keypoints_to_heatmap", "heatmaps_to_keypoints",
           "keypointrcnn_loss", "keypointrcnn_inference", "expand_boxes", "expand_masks",
           "paste_mask_in_image", "paste_masks_in_image"]


def fastrcnn_loss(class_logits, box_regression, labels, regression_targets):
    """(classification loss, box loss): cross-entropy over all sampled proposals; smooth L1
    (beta 1/9) of the positives' deltas for their class, summed and divided by the number of
    proposals."""
    labels = fiamma.cat(labels, dim=0)
    regression_targets = fiamma.cat(regression_targets, dim=0)
    classification_loss = F.cross_entropy(class_logits, labels)
    pos = fiamma.where(labels > 0)[0]
    labels_pos = labels[pos]
    N = class_logits.shape[0]
    box_regression = box_regression.reshape(N, box_regression.shape[-1] // 4, 4)
    box_loss = F.smooth_l1_loss(box_regression[pos, labels_pos], regression_targets[pos],
                                beta=1 / 9, reduction="sum")
    return classification_loss, box_loss / labels.numel()


class RoIHeads(nn.Module):
    """The second stage of the R-CNN family: the box branch, plus the mask branch when
    ``mask_roi_pool``, ``mask_head`` and ``mask_predictor`` are all given, and the keypoint
    branch when the three ``keypoint_*`` modules are."""

    def __init__(self, box_roi_pool, box_head, box_predictor, fg_iou_thresh, bg_iou_thresh,
                 batch_size_per_image, positive_fraction, bbox_reg_weights, score_thresh,
                 nms_thresh, detections_per_img, mask_roi_pool=None, mask_head=None,
                 mask_predictor=None, keypoint_roi_pool=None, keypoint_head=None,
                 keypoint_predictor=None):
        super().__init__()
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh,
                                                  allow_low_quality_matches=False)
        self.fg_bg_sampler = det_utils.BalancedPositiveNegativeSampler(batch_size_per_image,
                                                                       positive_fraction)
        if bbox_reg_weights is None:
            bbox_reg_weights = (10.0, 10.0, 5.0, 5.0)
        self.box_coder = det_utils.BoxCoder(bbox_reg_weights)
        self.box_roi_pool = box_roi_pool
        self.box_head = box_head
        self.box_predictor = box_predictor
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.mask_roi_pool = mask_roi_pool
        self.mask_head = mask_head
        self.mask_predictor = mask_predictor
        self.keypoint_roi_pool = keypoint_roi_pool
        self.keypoint_head = keypoint_head
        self.keypoint_predictor = keypoint_predictor

    def has_mask(self):
        return (self.mask_roi_pool is not None and self.mask_head is not None
                and self.mask_predictor is not None)

    def has_keypoint(self):
        return (self.keypoint_roi_pool is not None and self.keypoint_head is not None
                and self.keypoint_predictor is not None)

    def assign_targets_to_proposals(self, proposals, gt_boxes, gt_labels):
        matched_idxs, labels = [], []
        for props, gtb, gtl in zip(proposals, gt_boxes, gt_labels):
            if gtb.numel() == 0:
                clamped = fiamma.zeros((props.shape[0],), dtype=fiamma.int64)
                lab = fiamma.zeros((props.shape[0],), dtype=fiamma.int64)
            else:
                idxs = self.proposal_matcher(box_ops.box_iou(gtb, props))
                clamped = idxs.clamp(min=0)
                lab = gtl[clamped].to(fiamma.int64)
                lab = fiamma.where(idxs == self.proposal_matcher.BELOW_LOW_THRESHOLD, 0, lab)
                lab = fiamma.where(idxs == self.proposal_matcher.BETWEEN_THRESHOLDS, -1, lab)
            matched_idxs.append(clamped)
            labels.append(lab)
        return matched_idxs, labels

    def subsample(self, labels):
        pos, neg = self.fg_bg_sampler(labels)
        return [fiamma.where(p | n)[0] for p, n in zip(pos, neg)]

    def add_gt_proposals(self, proposals, gt_boxes):
        return [fiamma.cat((p, g)) for p, g in zip(proposals, gt_boxes)]

    def check_targets(self, targets):
        if targets is None:
            raise ValueError("targets should not be None")
        if not all("boxes" in t for t in targets):
            raise ValueError("Every element of targets should have a boxes key")
        if not all("labels" in t for t in targets):
            raise ValueError("Every element of targets should have a labels key")
        if self.has_mask() and not all("masks" in t for t in targets):
            raise ValueError("Every element of targets should have a masks key")
        if self.has_keypoint() and not all("keypoints" in t for t in targets):
            raise ValueError("Every element of targets should have a keypoints key")

    def select_training_samples(self, proposals, targets):
        self.check_targets(targets)
        dtype = proposals[0].dtype
        gt_boxes = [t["boxes"].to(dtype) for t in targets]
        gt_labels = [t["labels"] for t in targets]
        proposals = self.add_gt_proposals(proposals, gt_boxes)
        matched_idxs, labels = self.assign_targets_to_proposals(proposals, gt_boxes, gt_labels)
        sampled = self.subsample(labels)
        matched_gt_boxes = []
        for i in range(len(proposals)):
            s = sampled[i]
            proposals[i] = proposals[i][s]
            labels[i] = labels[i][s]
            matched_idxs[i] = matched_idxs[i][s]
            gtb = gt_boxes[i]
            if gtb.numel() == 0:
                gtb = fiamma.zeros((1, 4), dtype=dtype)
            matched_gt_boxes.append(gtb[matched_idxs[i]])
        regression_targets = self.box_coder.encode(matched_gt_boxes, proposals)
        return proposals, matched_idxs, labels, regression_targets

    def postprocess_detections(self, class_logits, box_regression, proposals, image_shapes):
        num_classes = class_logits.shape[-1]
        counts = [int(p.shape[0]) for p in proposals]
        pred_boxes = self.box_coder.decode(box_regression, proposals)
        pred_scores = F.softmax(class_logits, -1)
        all_boxes, all_scores, all_labels = [], [], []
        for boxes, scores, image_shape in zip(pred_boxes.split(counts, 0),
                                              pred_scores.split(counts, 0), image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, image_shape)
            labels = fiamma.arange(num_classes).reshape(1, -1).expand(tuple(scores.shape))
            # every class prediction is a separate instance; class 0 is the background
            boxes = boxes[:, 1:].reshape(-1, 4)
            scores = scores[:, 1:].reshape(-1)
            labels = labels[:, 1:].reshape(-1)
            inds = fiamma.where(scores > self.score_thresh)[0]
            boxes, scores, labels = boxes[inds], scores[inds], labels[inds]
            keep = box_ops.remove_small_boxes(boxes, min_size=1e-2)
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)
            keep = keep[:self.detections_per_img]
            all_boxes.append(boxes[keep])
            all_scores.append(scores[keep])
            all_labels.append(labels[keep])
        return all_boxes, all_scores, all_labels

    def forward(self, features, proposals, image_shapes, targets=None):
        if targets is not None:
            for t in targets:
                if t["boxes"].dtype not in (fiamma.float32, fiamma.float64, fiamma.float16):
                    raise TypeError(f"target boxes must of float type, instead got "
                                    f"{t['boxes'].dtype}")
                if t["labels"].dtype != fiamma.int64:
                    raise TypeError(f"target labels must of int64 type, instead got "
                                    f"{t['labels'].dtype}")
                if self.has_keypoint() and "keypoints" in t and \
                        not t["keypoints"].is_floating_point():
                    raise TypeError(f"target keypoints must of float type, instead got "
                                    f"{t['keypoints'].dtype}")
        matched_idxs = None
        if self.training:
            proposals, matched_idxs, labels, regression_targets = self.select_training_samples(
                proposals, targets)
        box_features = self.box_roi_pool(features, proposals, image_shapes)
        box_features = self.box_head(box_features)
        class_logits, box_regression = self.box_predictor(box_features)
        result, losses = [], {}
        if self.training:
            loss_classifier, loss_box_reg = fastrcnn_loss(class_logits, box_regression, labels,
                                                          regression_targets)
            losses = {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg}
        else:
            boxes, scores, labels = self.postprocess_detections(class_logits, box_regression,
                                                                proposals, image_shapes)
            for b, s, lab in zip(boxes, scores, labels):
                result.append({"boxes": b, "labels": lab, "scores": s})
        if self.has_mask():
            losses.update(self._mask_branch(features, proposals, image_shapes, targets,
                                            matched_idxs, labels, result))
        if self.has_keypoint():
            losses.update(self._keypoint_branch(features, proposals, image_shapes, targets,
                                                matched_idxs, labels, result))
        return result, losses

    def _positive(self, proposals, matched_idxs, labels):
        """Training: the positive proposals of each image and their ground-truth indices."""
        props, idxs = [], []
        for p, m, lab in zip(proposals, matched_idxs, labels):
            pos = fiamma.where(lab > 0)[0]
            props.append(p[pos])
            idxs.append(m[pos])
        return props, idxs

    def _mask_branch(self, features, proposals, image_shapes, targets, matched_idxs, labels,
                     result):
        if self.training:
            mask_proposals, pos_idxs = self._positive(proposals, matched_idxs, labels)
        else:
            mask_proposals = [r["boxes"] for r in result]
        x = self.mask_roi_pool(features, mask_proposals, image_shapes)
        mask_logits = self.mask_predictor(self.mask_head(x))
        if self.training:
            loss = maskrcnn_loss(mask_logits, mask_proposals, [t["masks"] for t in targets],
                                 [t["labels"] for t in targets], pos_idxs)
            return {"loss_mask": loss}
        probs = maskrcnn_inference(mask_logits, [r["labels"] for r in result])
        for prob, r in zip(probs, result):
            r["masks"] = prob
        return {}

    def _keypoint_branch(self, features, proposals, image_shapes, targets, matched_idxs,
                         labels, result):
        if self.training:
            kp_proposals, pos_idxs = self._positive(proposals, matched_idxs, labels)
        else:
            kp_proposals = [r["boxes"] for r in result]
        x = self.keypoint_roi_pool(features, kp_proposals, image_shapes)
        kp_logits = self.keypoint_predictor(self.keypoint_head(x))
        if self.training:
            loss = keypointrcnn_loss(kp_logits, kp_proposals,
                                     [t["keypoints"] for t in targets], pos_idxs)
            return {"loss_keypoint": loss}
        kps, scores = keypointrcnn_inference(kp_logits, kp_proposals)
        for kp, sc, r in zip(kps, scores, result):
            r["keypoints"] = kp
            r["keypoints_scores"] = sc
        return {}
