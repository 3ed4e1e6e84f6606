"""fiamma.utils.tensorboard.SummaryWriter: real event files, read back with TensorBoard's own
reader (skipped where the optional ``tensorboard`` package is not installed)."""

import os
import zlib

import numpy as np
import pytest

import fiamma

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)

from fiamma.utils.tensorboard import SummaryWriter  # noqa: E402


def load(path):
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "histograms": 0,
                                                     "images": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_scalars_histograms_images_text(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for step in range(4):
            w.add_scalar("loss/train", 1.0 / (step + 1), step)
        w.add_scalar("acc", fiamma.tensor(0.5), 10, walltime=123.0)
        w.add_histogram("weights", fiamma.tensor([-1.0, 0.0, 0.5, 0.5, 2.0]), 1)
        w.add_image("img", fiamma.ones(3, 4, 5) * 0.5, 2)
        w.add_image("gray", np.full((4, 5), 255, dtype=np.uint8), 3, dataformats="HW")
        w.add_images("batch", fiamma.zeros(3, 1, 2, 2), 4)
        w.add_text("note", "hello", 5)
        assert w.get_logdir() == str(tmp_path)
    acc = load(tmp_path)
    loss = acc.Scalars("loss/train")
    assert [e.step for e in loss] == [0, 1, 2, 3]
    np.testing.assert_allclose([e.value for e in loss], [1.0, 0.5, 1 / 3, 0.25], rtol=1e-6)
    (a,) = acc.Scalars("acc")
    assert (a.step, a.value, a.wall_time) == (10, 0.5, 123.0)
    (h,) = acc.Histograms("weights")
    hv = h.histogram_value
    assert (hv.min, hv.max, hv.num, hv.sum, hv.sum_squares) == (-1.0, 2.0, 5, 2.0, 5.5)
    assert sum(hv.bucket) == 5
    (img,) = acc.Images("img")
    assert (img.width, img.height) == (5, 4)
    png = img.encoded_image_string
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    raw = zlib.decompress(png[png.index(b"IDAT") + 4:])  # one IDAT chunk: filter byte + RGB rows
    assert raw[1:4] == bytes([128, 128, 128])
    (grid,) = acc.Images("batch")
    assert (grid.width, grid.height) == (4, 4)  # 3 images in a 2 x 2 grid
    assert acc.Tensors("note/text_summary")[0].tensor_proto.string_val == [b"hello"]


def test_add_scalars_writes_one_run_per_tag(tmp_path):
    w = SummaryWriter(tmp_path)
    w.add_scalars("loss", {"train": 1.0, "val": 2.0}, 0)
    w.add_scalars("loss", {"train": 0.5, "val": 1.5}, 1)
    w.close()
    for tag, want in (("train", [1.0, 0.5]), ("val", [2.0, 1.5])):
        acc = load(tmp_path / f"loss_{tag}")
        assert [e.value for e in acc.Scalars("loss")] == want


def test_default_log_dir_flush_and_unsupported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp")
    assert w.get_logdir().startswith("runs" + os.sep) and w.get_logdir().endswith("_exp")
    w.add_scalar("x", 1, 0)
    w.flush()
    assert load(w.get_logdir()).Scalars("x")[0].value == 1.0
    with pytest.raises(NotImplementedError, match="add_graph is not supported by fiamma"):
        w.add_graph(object())
    with pytest.raises(ValueError, match="single value"):
        w.add_scalar("x", fiamma.ones(2))
    with pytest.raises(ValueError, match="inf or NaN"):
        w.add_histogram("h", fiamma.tensor([float("nan")]))
    with pytest.raises(ValueError, match="dataformats"):
        w.add_image("i", fiamma.ones(2, 2), dataformats="CHW")
    w.close()
