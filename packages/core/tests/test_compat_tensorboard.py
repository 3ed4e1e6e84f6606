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
    with pytest.raises(NotImplementedError, match="add_audio is not supported by fiamma"):
        w.add_audio("a", fiamma.zeros(10))
    with pytest.raises(ValueError, match="single value"):
        w.add_scalar("x", fiamma.ones(2))
    with pytest.raises(ValueError, match="inf or NaN"):
        w.add_histogram("h", fiamma.tensor([float("nan")]))
    with pytest.raises(ValueError, match="dataformats"):
        w.add_image("i", fiamma.ones(2, 2), dataformats="CHW")
    w.close()


def test_add_hparams_reads_back_with_the_hparams_plugin(tmp_path):
    from tensorboard.plugins.hparams import metadata

    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.001, "bsize": 256, "opt": "adam", "bn": True,
                       "wd": fiamma.tensor(0.5)},
                      {"accuracy": 0.75, "loss": fiamma.tensor(0.25)}, run_name="trial")
    acc = load(tmp_path / "trial")
    content = acc.PluginTagToContent("hparams")
    exp = metadata.parse_experiment_plugin_data(content["_hparams_/experiment"])
    assert [(h.name, h.type) for h in exp.hparam_infos] == [
        ("lr", 3), ("bsize", 3), ("opt", 1), ("bn", 2), ("wd", 3)]   # FLOAT64, STRING, BOOL
    assert [m.name.tag for m in exp.metric_infos] == ["accuracy", "loss"]
    start = metadata.parse_session_start_info_plugin_data(
        content["_hparams_/session_start_info"])
    assert start.hparams["lr"].number_value == 0.001
    assert start.hparams["bsize"].number_value == 256
    assert start.hparams["opt"].string_value == "adam" and start.hparams["bn"].bool_value
    assert start.hparams["wd"].number_value == 0.5
    end = metadata.parse_session_end_info_plugin_data(content["_hparams_/session_end_info"])
    assert end.status == 1                                            # STATUS_SUCCESS
    assert [e.value for e in acc.Scalars("accuracy")] == [0.75]
    assert [e.value for e in acc.Scalars("loss")] == [0.25]


def test_add_hparams_bad_input(tmp_path):
    w = SummaryWriter(tmp_path)
    with pytest.raises(TypeError, match="dictionaries"):
        w.add_hparams([("lr", 1)], {})
    with pytest.raises(ValueError, match="'lr' should be an int, float, str, bool"):
        w.add_hparams({"lr": [1, 2]}, {"m": 1.0})
    with pytest.raises(ValueError, match="tensor of 2 elements"):
        w.add_hparams({"lr": fiamma.ones(2)}, {"m": 1.0})
    with pytest.raises(TypeError, match="hparam_domain_discrete"):
        w.add_hparams({"lr": 0.1}, {"m": 1.0}, hparam_domain_discrete={"lr": ["a"]})
    w.close()


def test_add_graph_traces_with_fx(tmp_path):
    pytest.importorskip("fiamma.fx")
    nn = fiamma.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 4 * 4, 3)

        def forward(self, x):
            x = fiamma.relu(self.conv(x))
            return self.fc(x.reshape(x.shape[0], -1))

    with SummaryWriter(tmp_path) as w:
        w.add_graph(Net(), fiamma.zeros(2, 1, 4, 4))
    g = load(tmp_path).Graph()
    by_name = {n.name: n for n in g.node}
    conv = by_name["Net/Conv2d[conv]/conv"]
    assert conv.op == "Conv2d" and list(conv.input) == ["Net/x"]
    assert [d.size for d in conv.attr["_output_shapes"].list.shape[0].dim] == [2, 4, 4, 4]
    fc = by_name["Net/Linear[fc]/fc"]
    assert [d.size for d in fc.attr["_output_shapes"].list.shape[0].dim] == [2, 3]
    assert by_name["Net/x"].op == "IO Node" and by_name["Net/output"].input == [fc.name]
    assert by_name["Net/relu"].op == "relu"


def test_add_embedding_projector_files(tmp_path):
    from google.protobuf import text_format
    from tensorboard.plugins.projector import projector_config_pb2

    mat = fiamma.arange(12, dtype=fiamma.float32).reshape(3, 4) / 7
    img = fiamma.linspace(0, 1, 12).reshape(3, 1, 2, 2)
    with SummaryWriter(tmp_path) as w:
        w.add_embedding(mat, metadata=["a", "b", "c"], label_img=img, global_step=7,
                        tag="my/emb")
        w.add_embedding(mat.double(), metadata=[[1, "x"], [2, "y"], [3, "z"]],
                        metadata_header=["n", "s"])
    config = text_format.Parse((tmp_path / "projector_config.pbtxt").read_text(),
                               projector_config_pb2.ProjectorConfig())
    first, second = config.embeddings
    assert first.tensor_name == "my/emb:00007" and first.tensor_path == "00007/my%2femb/tensors.tsv"
    assert first.metadata_path == "00007/my%2femb/metadata.tsv"
    assert first.sprite.image_path == "00007/my%2femb/sprite.png"
    assert list(first.sprite.single_image_dim) == [2, 2]
    assert second.tensor_name == "default:00000"        # no global_step: step 0, as PyTorch
    d = tmp_path / "00007" / "my%2femb"
    rows = [[float(x) for x in line.split("\t")]
            for line in (d / "tensors.tsv").read_text().splitlines()]
    np.testing.assert_array_equal(np.array(rows, np.float32), mat.numpy())
    assert (d / "metadata.tsv").read_text() == "a\nb\nc\n"
    header_rows = (tmp_path / "00000" / "default" / "metadata.tsv").read_text()
    assert header_rows == "n\ts\n1\tx\n2\ty\n3\tz\n"
    png = (d / "sprite.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w_, h_ = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (w_, h_, png[25]) == (4, 4, 2)               # a 2 x 2 sheet of 2 x 2 images, RGB
    raw = zlib.decompress(png[png.index(b"IDAT") + 4:])
    # row 0: image 0's first row then image 1's, each grey value x*255 truncated, as RGB
    vals = [int(v * 255) for v in np.linspace(0, 1, 12, dtype=np.float32)]
    assert list(raw[1:13]) == [vals[0]] * 3 + [vals[1]] * 3 + [vals[4]] * 3 + [vals[5]] * 3


def test_add_embedding_bad_input(tmp_path):
    w = SummaryWriter(tmp_path)
    with pytest.raises(ValueError, match="2-D"):
        w.add_embedding(fiamma.ones(2, 3, 4))
    with pytest.raises(ValueError, match="2 metadata rows for 3 embeddings"):
        w.add_embedding(fiamma.ones(3, 2), metadata=["a", "b"])
    with pytest.raises(ValueError, match="label_img"):
        w.add_embedding(fiamma.ones(3, 2), label_img=fiamma.ones(2, 1, 2, 2))
    w.close()
