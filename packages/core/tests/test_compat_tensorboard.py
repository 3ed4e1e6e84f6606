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


def test_add_embedding_writes_the_projector_files(tmp_path):
    mat = fiamma.tensor([[0.5, 1.0], [2.0, -1.0], [0.0, 3.0]])
    imgs = np.zeros((3, 1, 2, 2), np.uint8)
    imgs[1] = 200
    with SummaryWriter(tmp_path) as w:
        w.add_embedding(mat, metadata=["a", "b", "c"], label_img=imgs)
        w.add_embedding(fiamma.ones(2, 3), metadata=[["x", 1], ["y", 2]],
                        metadata_header=["name", "n"], global_step=7, tag="fe/at")
    d = tmp_path / "00000" / "default"
    assert (d / "tensors.tsv").read_text() == "0.5\t1.0\n2.0\t-1.0\n0.0\t3.0\n"
    assert (d / "metadata.tsv").read_text() == "a\nb\nc\n"
    png = (d / "sprite.png").read_bytes()
    assert png.startswith(b"\x89PNG") and png[16:24] == bytes([0, 0, 0, 4, 0, 0, 0, 4])
    d2 = tmp_path / "00007" / "fe%2fat"
    assert (d2 / "metadata.tsv").read_text() == "name\tn\nx\t1\ny\t2\n"
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    cfg = text_format.Parse((tmp_path / "projector_config.pbtxt").read_text(), ProjectorConfig())
    e0, e1 = cfg.embeddings
    assert (e0.tensor_name, e0.tensor_path, e0.metadata_path) == (
        "default:00000", "00000/default/tensors.tsv", "00000/default/metadata.tsv")
    assert e0.sprite.image_path == "00000/default/sprite.png"
    assert list(e0.sprite.single_image_dim) == [2, 2]
    assert (e1.tensor_name, e1.tensor_path) == ("fe/at:00007", "00007/fe%2fat/tensors.tsv")
    assert not e1.sprite.image_path
    with SummaryWriter(tmp_path / "bad") as w:
        with pytest.raises(ValueError, match="2 labels for 3 data points"):
            w.add_embedding(mat, metadata=["a", "b"])
        with pytest.raises(ValueError, match="mat should be 2-D"):
            w.add_embedding(fiamma.ones(3))


def test_sprite_tiles_images_in_a_square():
    from fiamma.utils.tensorboard.writer import _sprite

    imgs = np.stack([np.full((1, 2, 3), v, np.uint8) for v in (10, 20, 30, 40, 50)])
    sp = _sprite(imgs)                       # 5 images -> 3 x 3 tiles of 2 x 3
    assert sp.shape == (6, 9, 3)
    assert sp[0, 0, 0] == 10 and sp[0, 3, 1] == 20 and sp[2, 0, 2] == 40 and sp[2, 3, 0] == 50
    assert sp[4:, :, :].max() == 0 and sp[2:4, 6:, :].max() == 0
    assert _sprite(np.ones((1, 3, 2, 2), np.float32)).max() == 255


def test_add_graph_writes_the_traced_graph(tmp_path):
    pytest.importorskip("fiamma.jit")
    nn = pytest.importorskip("fiamma.nn")
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    with SummaryWriter(tmp_path) as w:
        w.add_graph(net, fiamma.randn(5, 4))
        with pytest.raises(ValueError, match="input_to_model is required"):
            w.add_graph(net)
    g = load(tmp_path).Graph()
    nodes = {n.name: n for n in g.node}
    assert nodes["input/input_0"].op == "IO Node"
    assert nodes["Sequential/0/weight"].op == "Parameter"
    ops = [n for n in g.node if n.op.startswith("aten::")]
    assert [n.name.rsplit("/", 1)[0] for n in ops if "addmm" in n.op] == [
        "Sequential/0", "Sequential/2"]
    out = [n for n in g.node if n.name.startswith("output/")]
    assert len(out) == 1 and list(out[0].input) == [ops[-1].name]
    shape = out[0].attr["_output_shapes"].list.shape[0]
    assert [d.size for d in shape.dim] == [5, 2]


def test_sprite_float_values_truncated_as_pytorch():
    from fiamma.utils.tensorboard.writer import _sprite

    # PyTorch 2.13 writes linspace(0, 1, 12) label images as 0, 23, 46, 69, 92, ...
    # (x * 255 truncated): 4/11 gives 92 where rounding would give 93
    imgs = np.linspace(0, 1, 12, dtype=np.float32).reshape(12, 1, 1, 1)
    sp = _sprite(imgs)
    assert list(sp[0, :4, 0]) == [0, 23, 46, 69] and sp[1, 0, 0] == 92


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


def test_summary_hparams_through_the_file_writer(tmp_path):
    # what PyTorch Lightning's TensorBoardLogger does: make the summaries, add them itself
    from tensorboard.plugins.hparams import metadata

    from fiamma.utils.tensorboard.summary import hparams

    exp, ssi, sei = hparams({"lr": 0.1, "opt": "sgd"}, {"hp_metric": -1})
    with SummaryWriter(tmp_path) as w:
        fw = w._get_file_writer()
        assert fw.get_logdir() == str(tmp_path)
        for s in (exp, ssi, sei):
            fw.add_summary(s, 3)
        with pytest.raises(TypeError, match="expected a tensorboard Summary proto"):
            fw.add_summary("nope")
    content = load(tmp_path).PluginTagToContent("hparams")
    start = metadata.parse_session_start_info_plugin_data(
        content["_hparams_/session_start_info"])
    assert start.hparams["lr"].number_value == 0.1 and start.hparams["opt"].string_value == "sgd"
    exp = metadata.parse_experiment_plugin_data(content["_hparams_/experiment"])
    assert [m.name.tag for m in exp.metric_infos] == ["hp_metric"]
    with pytest.raises(TypeError, match="should be dictionaries"):
        hparams([("lr", 1)], {})
