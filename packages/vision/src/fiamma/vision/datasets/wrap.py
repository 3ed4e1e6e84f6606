"""``wrap_dataset_for_transforms_v2``: make a detection dataset return tv_tensors so the v2
transforms move boxes and masks with the image (torchvision's wrapper for COCO and VOC)."""
import numpy as np

import fiamma
from fiamma.vision.datasets.coco import CocoDetection, coco_ann_to_mask
from fiamma.vision.datasets.voc import VOCDetection, VOCSegmentation

__all__ = ["wrap_dataset_for_transforms_v2"]

VOC_CLASSES = ["__background__", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car",
               "cat", "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person",
               "pottedplant", "sheep", "sofa", "train", "tvmonitor"]


def wrap_dataset_for_transforms_v2(dataset, target_keys=None):
    """Wrap ``dataset`` (CocoDetection, VOCDetection or VOCSegmentation) so that a sample is
    ``(Image-compatible PIL image, target dict)`` with ``tv_tensors.BoundingBoxes`` (XYXY) and
    ``Mask`` values. COCO's ``target_keys`` default to ``{"image_id", "boxes", "labels"}``;
    ``"all"`` or a set adds ``"masks"`` and the other annotation fields. The dataset's own
    ``transforms`` run after the conversion.

        >>> # ds = wrap_dataset_for_transforms_v2(CocoDetection(root, ann), {"boxes", "masks"})
    """
    if not isinstance(dataset, (CocoDetection, VOCDetection, VOCSegmentation)):
        raise TypeError(f"wrap_dataset_for_transforms_v2: {type(dataset).__name__} is not "
                        "supported (CocoDetection, VOCDetection, VOCSegmentation)")
    return _Wrapped(dataset, target_keys)


_COCO_KEYS = {"segmentation", "area", "iscrowd", "image_id", "bbox", "category_id", "boxes",
              "masks", "labels"}


class _Wrapped:
    def __init__(self, dataset, target_keys):
        self._dataset = dataset
        coco = isinstance(dataset, CocoDetection)
        if target_keys is None:
            target_keys = {"image_id", "boxes", "labels"} if coco else None
        elif target_keys == "all":
            target_keys = set(_COCO_KEYS) if coco else None
        elif coco:
            target_keys = set(target_keys)
            if not target_keys <= _COCO_KEYS:
                raise ValueError(f"wrap_dataset_for_transforms_v2: unknown target_keys "
                                 f"{sorted(target_keys - _COCO_KEYS)}; allowed "
                                 f"{sorted(_COCO_KEYS)}")
        else:
            raise ValueError("wrap_dataset_for_transforms_v2: target_keys is only for COCO")
        self.target_keys = target_keys
        self.transforms = dataset.transforms

    def __len__(self):
        return len(self._dataset)

    def __getattr__(self, name):
        return getattr(self._dataset, name)

    def __getitem__(self, index):
        ds = self._dataset
        saved = ds.transforms
        ds.transforms = None
        try:
            image, target = ds[index]
        finally:
            ds.transforms = saved
        if isinstance(ds, CocoDetection):
            target = self._coco(ds, index, image, target)
        elif isinstance(ds, VOCDetection):
            target = self._voc(image, target)
        else:
            from fiamma.vision import tv_tensors as tv
            target = tv.Mask(target)
        if saved is not None:
            image, target = saved(image, target)
        return image, target

    def _coco(self, ds, index, image, anns):
        from fiamma.vision import tv_tensors as tv
        keys = self.target_keys
        image_id = ds.ids[index]
        canvas = (image.height, image.width)
        out = {}
        if "image_id" in keys:
            out["image_id"] = image_id
        if not anns:
            return out
        xywh = np.array([a["bbox"] for a in anns], np.float32).reshape(-1, 4)
        if "boxes" in keys:
            xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
            out["boxes"] = tv.BoundingBoxes(fiamma.from_numpy(xyxy), format="XYXY",
                                            canvas_size=canvas)
        if "masks" in keys:
            masks = np.stack([coco_ann_to_mask(a, *canvas) for a in anns])
            out["masks"] = tv.Mask(fiamma.from_numpy(masks))
        if "labels" in keys:
            out["labels"] = fiamma.tensor([a["category_id"] for a in anns])
        for k in ("segmentation", "area", "iscrowd", "bbox", "category_id"):
            if k in keys:
                out[k] = [a[k] for a in anns]
        return out

    def _voc(self, image, target):
        from fiamma.vision import tv_tensors as tv
        objs = target["annotation"]["object"]
        boxes = [[float(o["bndbox"][k]) for k in ("xmin", "ymin", "xmax", "ymax")]
                 for o in objs]
        return {"boxes": tv.BoundingBoxes(fiamma.tensor(boxes, dtype=fiamma.float32)
                                          .reshape(-1, 4), format="XYXY",
                                          canvas_size=(image.height, image.width)),
                "labels": fiamma.tensor([VOC_CLASSES.index(o["name"]) for o in objs],
                                        dtype=fiamma.int64)}
