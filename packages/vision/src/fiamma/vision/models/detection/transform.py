"""GeneralizedRCNNTransform (torchvision.models.detection.transform): normalise, resize and
batch the input images (and their targets) for the R-CNN family, and map the detections back
to the original image sizes."""
import math

import fiamma
import fiamma.nn.functional as F
from fiamma import nn
from fiamma.vision.models.detection._roi_masks import paste_masks_in_image
from fiamma.vision.models.detection.image_list import ImageList

__all__ = ["GeneralizedRCNNTransform", "resize_boxes", "resize_keypoints"]


def _resize_image_and_masks(image, self_min_size, self_max_size, target=None, fixed_size=None):
    h, w = image.shape[-2:]
    if fixed_size is not None:
        size, scale, recompute = [fixed_size[1], fixed_size[0]], None, None
    else:
        scale = min(self_min_size / min(h, w), self_max_size / max(h, w))
        size, recompute = None, True
    image = F.interpolate(image[None], size=size, scale_factor=scale, mode="bilinear",
                          recompute_scale_factor=recompute, align_corners=False)[0]
    if target is not None and "masks" in target:
        mask = target["masks"]
        mask = F.interpolate(mask[:, None].float(), size=size, scale_factor=scale,
                             recompute_scale_factor=recompute)[:, 0].byte()
        target["masks"] = mask
    return image, target


def resize_boxes(boxes, original_size, new_size):
    """(N, 4) boxes scaled from an image of ``original_size`` (h, w) to ``new_size``."""
    rh = fiamma.tensor(float(new_size[0]), dtype=fiamma.float32) / float(original_size[0])
    rw = fiamma.tensor(float(new_size[1]), dtype=fiamma.float32) / float(original_size[1])
    rh, rw = float(rh), float(rw)
    x1, y1, x2, y2 = boxes.unbind(1)
    return fiamma.stack((x1 * rw, y1 * rh, x2 * rw, y2 * rh), dim=1)


def resize_keypoints(keypoints, original_size, new_size):
    """(N, K, 3) keypoints (x, y, visibility) scaled like :func:`resize_boxes`."""
    rh = float(fiamma.tensor(float(new_size[0])) / float(original_size[0]))
    rw = float(fiamma.tensor(float(new_size[1])) / float(original_size[1]))
    x = keypoints[..., 0] * rw
    y = keypoints[..., 1] * rh
    return fiamma.stack((x, y, keypoints[..., 2]), dim=-1)


class GeneralizedRCNNTransform(nn.Module):
    """Normalise each image with ``image_mean``/``image_std``, resize it so its shorter side is
    ``min_size`` (a random choice of the tuple in training, the last one in eval) without its
    longer side exceeding ``max_size`` (or to ``fixed_size`` (w, h)), and zero-pad the batch to
    a multiple of ``size_divisible``. Targets' boxes (and masks, keypoints) follow.

        >>> import fiamma
        >>> t = GeneralizedRCNNTransform(64, 100, [0.5] * 3, [0.5] * 3).eval()
        >>> il, _ = t([fiamma.rand(3, 40, 50)])
        >>> tuple(il.tensors.shape), il.image_sizes
        ((1, 3, 64, 96), [(64, 80)])
    """

    def __init__(self, min_size, max_size, image_mean, image_std, size_divisible=32,
                 fixed_size=None, **kwargs):
        super().__init__()
        if not isinstance(min_size, (list, tuple)):
            min_size = (min_size,)
        self.min_size = min_size
        self.max_size = max_size
        self.image_mean = image_mean
        self.image_std = image_std
        self.size_divisible = size_divisible
        self.fixed_size = fixed_size
        self._skip_resize = kwargs.pop("_skip_resize", False)
        if kwargs:
            raise TypeError(f"GeneralizedRCNNTransform: unexpected arguments {sorted(kwargs)}")

    def forward(self, images, targets=None):
        images = list(images)
        if targets is not None:
            targets = [dict(t) for t in targets]
        for i, image in enumerate(images):
            if image.ndim != 3:
                raise ValueError(f"images is expected to be a list of 3d tensors of shape "
                                 f"[C, H, W], got {list(image.shape)}")
            image = self.normalize(image)
            image, target = self.resize(image, targets[i] if targets is not None else None)
            images[i] = image
            if targets is not None and target is not None:
                targets[i] = target
        image_sizes = [tuple(int(s) for s in img.shape[-2:]) for img in images]
        batched = self.batch_images(images, size_divisible=self.size_divisible)
        return ImageList(batched, image_sizes), targets

    def normalize(self, image):
        if not image.is_floating_point():
            raise TypeError(f"Expected input images to be of floating type (in range [0, 1]), "
                            f"but found type {image.dtype} instead")
        mean = fiamma.as_tensor(self.image_mean, dtype=image.dtype)
        std = fiamma.as_tensor(self.image_std, dtype=image.dtype)
        return (image - mean[:, None, None]) / std[:, None, None]

    def torch_choice(self, k):
        """A uniformly random element of ``k`` from fiamma's generator."""
        index = int(fiamma.empty(1).uniform_(0.0, float(len(k))).item())
        return k[min(index, len(k) - 1)]

    def resize(self, image, target=None):
        h, w = image.shape[-2:]
        if self.training:
            if self._skip_resize:
                return image, target
            size = self.torch_choice(self.min_size)
        else:
            size = self.min_size[-1]
        image, target = _resize_image_and_masks(image, size, self.max_size, target,
                                                self.fixed_size)
        if target is None:
            return image, target
        new = tuple(image.shape[-2:])
        target["boxes"] = resize_boxes(target["boxes"], (h, w), new)
        if "keypoints" in target:
            target["keypoints"] = resize_keypoints(target["keypoints"], (h, w), new)
        return image, target

    def batch_images(self, images, size_divisible=32):
        """Zero-pad ``images`` to a common (C, H, W), H and W rounded up to
        ``size_divisible``, and stack them."""
        max_size = [max(s) for s in zip(*[img.shape for img in images])]
        stride = float(size_divisible)
        max_size[1] = int(math.ceil(max_size[1] / stride) * stride)
        max_size[2] = int(math.ceil(max_size[2] / stride) * stride)
        padded = []
        for img in images:
            pad = (0, max_size[2] - img.shape[2], 0, max_size[1] - img.shape[1],
                   0, max_size[0] - img.shape[0])
            padded.append(F.pad(img, pad) if any(pad) else img)
        return fiamma.stack(padded)

    def postprocess(self, result, image_shapes, original_image_sizes):
        """Detections' boxes (and keypoints) scaled back to the original image sizes; RoI
        masks pasted into full-size (N, 1, H, W) masks of the original image."""
        if self.training:
            return result
        for i, (pred, im_s, o_im_s) in enumerate(zip(result, image_shapes,
                                                     original_image_sizes)):
            boxes = resize_boxes(pred["boxes"], im_s, o_im_s)
            result[i]["boxes"] = boxes
            if "masks" in pred:
                result[i]["masks"] = paste_masks_in_image(pred["masks"], boxes, o_im_s)
            if "keypoints" in pred:
                result[i]["keypoints"] = resize_keypoints(pred["keypoints"], im_s, o_im_s)
        return result

    def __repr__(self):
        return (f"{self.__class__.__name__}(\n    Normalize(mean={self.image_mean}, "
                f"std={self.image_std})\n    Resize(min_size={self.min_size}, "
                f"max_size={self.max_size}, mode='bilinear')\n)")
