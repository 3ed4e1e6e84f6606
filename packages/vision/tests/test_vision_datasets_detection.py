"""CocoDetection/CocoCaptions, VOCDetection/VOCSegmentation and
wrap_dataset_for_transforms_v2 on tiny fixtures written to a temp dir; COCO's mask formats
(polygon, uncompressed and compressed RLE) against hand-computed masks."""
import json

import numpy as np
import pytest
from PIL import Image

import fiamma
from fiamma.vision import tv_tensors as tv
from fiamma.vision.datasets import (
    CocoCaptions,
    CocoDetection,
    VOCDetection,
    VOCSegmentation,
    wrap_dataset_for_transforms_v2,
)
from fiamma.vision.datasets.coco import coco_ann_to_mask, rle_decode
from fiamma.vision.transforms import v2


@pytest.fixture
def coco(tmp_path):
    (tmp_path / "img").mkdir()
    Image.new("RGB", (8, 6), (10, 20, 30)).save(tmp_path / "img" / "b.png")
    Image.new("RGB", (5, 4), (1, 2, 3)).save(tmp_path / "img" / "a.png")
    ann = {
        "images": [{"id": 7, "file_name": "b.png", "height": 6, "width": 8},
                   {"id": 3, "file_name": "a.png", "height": 4, "width": 5}],
        "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
        "annotations": [
            {"id": 1, "image_id": 7, "bbox": [1, 1, 3, 2], "category_id": 2, "area": 6,
             "iscrowd": 0, "segmentation": [[1, 1, 4, 1, 4, 3, 1, 3]], "caption": "two"},
            {"id": 2, "image_id": 7, "bbox": [0, 0, 2, 2], "category_id": 1, "area": 4,
             "iscrowd": 1, "segmentation": {"counts": [0, 2, 4, 2, 40], "size": [6, 8]},
             "caption": "one"},
        ],
    }
    path = tmp_path / "ann.json"
    path.write_text(json.dumps(ann))
    return tmp_path, path


def test_coco_detection(coco):
    root, ann = coco
    ds = CocoDetection(str(root / "img"), str(ann))
    assert len(ds) == 2 and ds.ids == [3, 7]
    img, target = ds[0]
    assert img.size == (5, 4) and target == []
    img, target = ds[1]
    assert img.size == (8, 6) and [t["id"] for t in target] == [1, 2]
    caps = CocoCaptions(str(root / "img"), str(ann))
    assert caps[1][1] == ["two", "one"]
    with pytest.raises(ValueError, match="integer"):
        ds["0"]
    bad = root / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        CocoDetection(str(root), str(bad))


def test_coco_masks_by_hand():
    poly = coco_ann_to_mask({"segmentation": [[1, 1, 4, 1, 4, 3, 1, 3]]}, 6, 8)
    expected = np.zeros((6, 8), np.uint8)
    expected[1:4, 1:5] = 1          # PIL fills the polygon including its outline
    np.testing.assert_array_equal(poly, expected)
    # column-major runs: 0 zeros, 2 ones (column 0 rows 0-1), 4 zeros, 2 ones (column 1)
    m = rle_decode([0, 2, 4, 2, 40], 6, 8)
    assert m[:2, 0].tolist() == [1, 1] and m[:2, 1].tolist() == [1, 1] and m.sum() == 4
    # compressed form of counts [5, 3, 3, 1] ("533N": the last is 1 - 3 = -2 -> 'N')
    c = rle_decode("533N", 3, 4)
    flat = np.array([0] * 5 + [1] * 3 + [0] * 3 + [1])
    np.testing.assert_array_equal(c, flat.reshape(4, 3).T)
    with pytest.raises(ValueError, match="do not fit"):
        rle_decode([20], 2, 2)


def test_coco_wrapped_for_v2(coco):
    root, ann = coco
    ds = wrap_dataset_for_transforms_v2(CocoDetection(str(root / "img"), str(ann)),
                                        target_keys={"image_id", "boxes", "labels", "masks"})
    img, target = ds[1]
    assert target["image_id"] == 7 and target["labels"].tolist() == [2, 1]
    assert type(target["boxes"]) is tv.BoundingBoxes
    assert target["boxes"].tolist() == [[1, 1, 4, 3], [0, 0, 2, 2]]
    assert target["boxes"].canvas_size == (6, 8)
    assert type(target["masks"]) is tv.Mask and tuple(target["masks"].shape) == (2, 6, 8)
    out_img, out = v2.Compose([v2.ToImage(), v2.RandomHorizontalFlip(p=1.0)])(img, target)
    assert out["boxes"].tolist() == [[4, 1, 7, 3], [6, 0, 8, 2]]
    np.testing.assert_array_equal(out["masks"].numpy(), target["masks"].numpy()[..., ::-1])
    assert ds[0][1] == {"image_id": 3}
    with pytest.raises(ValueError, match="unknown target_keys"):
        wrap_dataset_for_transforms_v2(CocoDetection(str(root / "img"), str(ann)), {"x"})


_XML = """<annotation><folder>VOC2012</folder><filename>{n}.jpg</filename>
<size><width>8</width><height>6</height><depth>3</depth></size>
<object><name>dog</name><difficult>0</difficult>
<bndbox><xmin>1</xmin><ymin>2</ymin><xmax>5</xmax><ymax>6</ymax></bndbox></object>
{extra}</annotation>"""


@pytest.fixture
def voc(tmp_path):
    base = tmp_path / "VOCdevkit" / "VOC2012"
    for d in ["JPEGImages", "Annotations", "SegmentationClass", "ImageSets/Main",
              "ImageSets/Segmentation"]:
        (base / d).mkdir(parents=True)
    for n, extra in [("x1", ""), ("x2", "<object><name>cat</name><bndbox><xmin>0</xmin>"
                                       "<ymin>0</ymin><xmax>2</xmax><ymax>3</ymax></bndbox>"
                                       "</object>")]:
        Image.new("RGB", (8, 6)).save(base / "JPEGImages" / f"{n}.jpg")
        (base / "Annotations" / f"{n}.xml").write_text(_XML.format(n=n, extra=extra))
        mask = Image.fromarray(np.full((6, 8), 3, np.uint8), mode="L").convert("P")
        mask.save(base / "SegmentationClass" / f"{n}.png")
    (base / "ImageSets/Main/train.txt").write_text("x1\nx2\n")
    (base / "ImageSets/Segmentation/val.txt").write_text("x2\n")
    return tmp_path


def test_voc_detection_and_segmentation(voc):
    ds = VOCDetection(str(voc), year="2012", image_set="train")
    assert len(ds) == 2
    img, t = ds[0]
    a = t["annotation"]
    assert img.size == (8, 6) and a["filename"] == "x1.jpg" and a["size"]["width"] == "8"
    assert isinstance(a["object"], list) and len(a["object"]) == 1
    assert a["object"][0]["bndbox"] == {"xmin": "1", "ymin": "2", "xmax": "5", "ymax": "6"}
    assert len(ds[1][1]["annotation"]["object"]) == 2
    w = wrap_dataset_for_transforms_v2(ds)
    _, tgt = w[1]
    assert tgt["boxes"].tolist() == [[1, 2, 5, 6], [0, 0, 2, 3]]
    assert tgt["labels"].tolist() == [12, 8]
    seg = VOCSegmentation(str(voc), image_set="val")
    img, mask = seg[0]
    assert len(seg) == 1 and np.asarray(mask).max() == 3
    _, m = wrap_dataset_for_transforms_v2(seg)[0]
    assert type(m) is tv.Mask and tuple(m.shape) == (6, 8)
    with pytest.raises(RuntimeError, match="not found"):
        VOCDetection(str(voc / "none"))
    with pytest.raises(ValueError, match="image_set"):
        VOCDetection(str(voc), image_set="test")
    with pytest.raises(TypeError, match="not supported"):
        wrap_dataset_for_transforms_v2([1, 2])
    assert fiamma.is_tensor(tgt["labels"])


def _celeba(tmp_path):
    base = tmp_path / "celeba"
    (base / "img_align_celeba").mkdir(parents=True)
    names = ["000001.jpg", "000002.jpg", "000003.jpg"]
    for i, n in enumerate(names):
        Image.new("RGB", (6, 7), (i, 0, 0)).save(base / "img_align_celeba" / n)
    (base / "list_eval_partition.txt").write_text("000001.jpg 0\n000002.jpg 1\n000003.jpg 0\n")
    (base / "identity_CelebA.txt").write_text("000001.jpg 10\n000002.jpg 20\n000003.jpg 10\n")
    (base / "list_attr_celeba.txt").write_text(
        "3\nSmiling Young\n000001.jpg 1 -1\n000002.jpg -1 -1\n000003.jpg -1  1\n")
    (base / "list_bbox_celeba.txt").write_text(
        "3\nimage_id x_1 y_1 width height\n000001.jpg 1 2 3 4\n000002.jpg 5 6 7 8\n"
        "000003.jpg 9 10 11 12\n")
    (base / "list_landmarks_align_celeba.txt").write_text(
        "3\nlefteye_x lefteye_y\n000001.jpg 1 1\n000002.jpg 2 2\n000003.jpg 3 3\n")


def test_celeba_folder(tmp_path):
    from fiamma.vision.datasets import CelebA
    _celeba(tmp_path)
    ds = CelebA(str(tmp_path), split="train", target_type=["attr", "identity", "bbox",
                                                              "landmarks"])
    assert len(ds) == 2 and ds.attr_names == ["Smiling", "Young"]
    img, (attr, ident, bbox, lms) = ds[1]
    assert img.size == (6, 7) and np.asarray(img)[0, 0, 0] == 2
    assert attr.tolist() == [0, 1] and int(ident) == 10
    assert bbox.tolist() == [9, 10, 11, 12] and lms.tolist() == [3, 3]
    assert len(CelebA(str(tmp_path), split="all")) == 3
    valid = CelebA(str(tmp_path), split="valid", target_type="identity")
    assert int(valid[0][1]) == 20
    assert CelebA(str(tmp_path), target_type=[])[0][1] is None
    with pytest.raises(ValueError, match="split"):
        CelebA(str(tmp_path), split="dev")
    with pytest.raises(ValueError, match="target_type"):
        CelebA(str(tmp_path), target_type="age")
    with pytest.raises(RuntimeError, match="not found"):
        CelebA(str(tmp_path / "nope"))
