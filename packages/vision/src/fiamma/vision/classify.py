"""Classify images with a pretrained model from the command line::

    python -m fiamma.vision.classify cat.jpg dog.png --model resnet50 --topk 5
    python -m fiamma.vision.classify cat.jpg --model resnet18 --weights ./resnet18-f37072fd.pth

``--weights`` is a weights name of the model (``DEFAULT``, ``IMAGENET1K_V1``, downloaded once
into ``$FIAMMA_HOME/hub/checkpoints``) or a local checkpoint file (no network). The images are
prepared with the weights' own transforms (for a local file: those of the model's DEFAULT
weights) and the top-k labels are printed with their probabilities.
"""
import argparse
import sys
from pathlib import Path

import fiamma

__all__ = ["classify", "main"]


def _num_classes(state_dict):
    """Output size of the last layer that has a weight (fc / classifier / final 1x1 conv)."""
    for key in reversed(list(state_dict)):
        if key.endswith("weight") and state_dict[key].ndim >= 2:
            return int(state_dict[key].shape[0])
    return None


def load_classifier(model="resnet50", weights="DEFAULT", progress=True):
    """``(model in eval mode, transforms, categories)`` for a registered model and weights (a
    weights name or a local checkpoint path)."""
    from fiamma.vision import models as M
    from fiamma.vision.models._api import load_weights, resolve_weights
    builder = M.get_model_builder(model)
    enum_cls = M.get_model_weights(model)
    w = resolve_weights(enum_cls, weights)
    if isinstance(w, Path):
        ref = enum_cls.DEFAULT if "DEFAULT" in enum_cls.__members__ else next(iter(enum_cls))
        sd = load_weights(w)
        n = _num_classes(sd)
        net = builder(weights=None, **({"num_classes": n} if n else {}))
        net.load_state_dict(sd)
        cats = ref.meta.get("categories")
        if cats is None or len(cats) != n:
            cats = [f"class {i}" for i in range(n)]
        transforms = ref.transforms()
    elif w is None:
        raise ValueError("classify: weights=None gives a random model; name weights or a file")
    else:
        net = builder(weights=w, progress=progress)
        cats = w.meta.get("categories") or [f"class {i}" for i in range(1000)]
        transforms = w.transforms()
    return net.eval(), transforms, cats


def classify(images, model="resnet50", weights="DEFAULT", topk=5, progress=True):
    """Top-``topk`` ``[(label, probability), ...]`` for each image (paths or PIL images)."""
    from PIL import Image
    net, transforms, cats = load_classifier(model, weights, progress)
    batch = []
    for img in images:
        if not isinstance(img, Image.Image):
            with Image.open(img) as im:
                img = im.convert("RGB")
        batch.append(transforms(img.convert("RGB")))
    with fiamma.no_grad():
        probs = fiamma.softmax(net(fiamma.stack(batch)), dim=1)
    k = min(topk, probs.shape[1])
    values, indices = fiamma.topk(probs, k, dim=1)
    return [[(cats[int(i)], float(v)) for v, i in zip(vr.tolist(), ir.tolist())]
            for vr, ir in zip(values, indices)]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m fiamma.vision.classify",
                                description="Classify images with a pretrained model.")
    p.add_argument("images", nargs="+", help="image files")
    p.add_argument("--model", default="resnet50", help="registered model name (list_models())")
    p.add_argument("--weights", default="DEFAULT",
                   help="weights name (DEFAULT, IMAGENET1K_V1, ...) or a local checkpoint file")
    p.add_argument("--topk", type=int, default=5, help="how many labels to print per image")
    args = p.parse_args(argv)
    if args.topk < 1:
        p.error("--topk must be >= 1")
    for f in args.images:
        if not Path(f).is_file():
            p.error(f"no image file at {f!r}")
    try:
        results = classify(args.images, args.model, args.weights, args.topk)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for f, res in zip(args.images, results):
        print(f"{f}:")
        for label, prob in res:
            print(f"  {prob:8.4f}  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
