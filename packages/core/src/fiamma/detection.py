"""Kernels for object detection that other fiamma packages build on (public, stable API;
``fiamma.vision.ops`` wraps them with torchvision's names).

>>> import fiamma
>>> from fiamma import detection
>>> boxes = fiamma.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.], [20., 20., 30., 30.]])
>>> detection.nms(boxes, fiamma.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
[0, 2]
"""

from fiamma._backend import check
from fiamma._creation import empty
from fiamma._dtype import float32, float64, int64
from fiamma._tensor import Tensor

__all__ = ["nms"]


def nms(boxes, scores, iou_threshold):
    """Greedy non-maximum suppression: the int64 indices of the boxes kept, in decreasing
    score order (ties: lower index first). ``boxes`` (N, 4) as (x1, y1, x2, y2) and ``scores``
    (N,) are float32 or float64 tensors of one dtype on one device; a box is dropped when its
    IoU with a kept higher-scored box is greater than ``iou_threshold``."""
    op = "detection.nms"
    if not isinstance(boxes, Tensor) or not isinstance(scores, Tensor):
        raise TypeError(f"{op}: boxes and scores must be Tensors, got "
                        f"{type(boxes).__name__} and {type(scores).__name__}")
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"{op}: boxes should be of shape (N, 4), got {list(boxes.shape)}")
    if scores.ndim != 1 or scores.shape[0] != boxes.shape[0]:
        raise ValueError(f"{op}: scores should be of shape ({boxes.shape[0]},), got "
                         f"{list(scores.shape)}")
    if boxes._dtype is not scores._dtype or boxes._dtype not in (float32, float64):
        raise TypeError(f"{op}: boxes and scores must both be float32 or both float64, got "
                        f"{boxes._dtype} and {scores._dtype}")
    dev = boxes._storage.device
    if scores._storage.device != dev:
        raise RuntimeError(f"{op}: expected boxes and scores on one device, got {dev} and "
                           f"{scores._storage.device}")
    boxes = boxes.detach().contiguous()
    scores = scores.detach().contiguous()
    if bool(scores.isnan().any()):
        raise ValueError(f"{op}: scores contain NaN")
    n = boxes.shape[0]
    keep = empty(n, dtype=int64, device=dev)
    count = empty(1, dtype=int64, device=dev)
    check(keep._storage.backend.nms(boxes, scores, float(iou_threshold), keep, count), op)
    return keep[:int(count.item())].clone()
