"""``SummaryWriter``: scalars, histograms, images and text into TensorBoard event files."""

import os
import socket
import struct
import time
import zlib
from datetime import datetime

import numpy as np
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

__all__ = ["SummaryWriter"]


def _numpy(x, what):
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "numpy"):
        return x.numpy()
    try:
        return np.asarray(x)
    except Exception:  # noqa: BLE001 - any conversion failure is reported the same way
        raise TypeError(f"SummaryWriter.{what}: expected a tensor, an array or numbers, got "
                        f"{type(x).__name__}") from None


def _scalar(x, what):
    a = _numpy(x, what)
    if a.size != 1:
        raise ValueError(f"SummaryWriter.{what}: expected a single value, got shape "
                         f"{tuple(a.shape)}")
    return a.reshape(()).item()


def _tf_bucket_limits():
    """TensorFlow's default histogram buckets (exponential, 10% apart, mirrored)."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-x for x in reversed(pos)] + [0.0] + pos


def _histogram(values, bins, max_bins):
    v = _numpy(values, "add_histogram").astype(np.float64).reshape(-1)
    if v.size == 0:
        raise ValueError("SummaryWriter.add_histogram: the input has no values")
    if not np.isfinite(v).all():
        raise ValueError("SummaryWriter.add_histogram: the input holds inf or NaN")
    edges = np.array(_tf_bucket_limits()) if bins == "tensorflow" else bins
    counts, limits = np.histogram(v, bins=edges)
    if max_bins is not None and len(counts) > max_bins:
        k = -(-len(counts) // max_bins)
        pad = (-len(counts)) % k
        counts = np.pad(counts, (0, pad)).reshape(-1, k).sum(1)
        limits = np.concatenate([limits[:-1:k], limits[-1:]])
    nz = np.nonzero(counts)[0]
    lo, hi = nz[0], nz[-1] + 1  # keep the buckets from the first to the last non-empty one
    return summary_pb2.HistogramProto(
        min=float(v.min()), max=float(v.max()), num=int(v.size), sum=float(v.sum()),
        sum_squares=float(v.dot(v)), bucket_limit=[float(x) for x in limits[lo + 1:hi + 1]],
        bucket=[float(c) for c in counts[lo:hi]])


def _png(img):
    """PNG bytes of an HWC uint8 image with 1, 3 or 4 channels (zlib, no imaging library)."""
    h, w, c = img.shape
    color = {1: 0, 3: 2, 4: 6}[c]
    rows = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def _image_hwc(img, dataformats, what):
    a = _numpy(img, what)
    fmt = dataformats.upper()
    if sorted(fmt) != sorted(set(fmt)) or not set(fmt) <= set("NCHW") or len(fmt) != a.ndim:
        raise ValueError(f"SummaryWriter.{what}: dataformats {dataformats!r} does not describe "
                         f"an image of shape {tuple(a.shape)}")
    if "N" in fmt:  # a batch: tiled into one image in a near-square grid, as PyTorch does
        a = np.moveaxis(a, [fmt.index(x) for x in "N" + ("C" if "C" in fmt else "") + "HW"],
                        range(4 if "C" in fmt else 3))
        if "C" not in fmt:
            a = a[:, None]
        n, ch, h, w = a.shape
        cols = int(np.ceil(np.sqrt(n)))
        rows = -(-n // cols)
        grid = np.zeros((ch, rows * h, cols * w), dtype=a.dtype)
        for i in range(n):
            r, col = divmod(i, cols)
            grid[:, r * h:(r + 1) * h, col * w:(col + 1) * w] = a[i]
        a, fmt = grid, "CHW"
    if "C" not in fmt:
        a = a[None] if fmt == "HW" else a
        fmt = "CHW"
    a = np.moveaxis(a, [fmt.index("H"), fmt.index("W"), fmt.index("C")], [0, 1, 2])
    if a.shape[2] not in (1, 3, 4):
        raise ValueError(f"SummaryWriter.{what}: expected 1, 3 or 4 channels, got {a.shape[2]}")
    if a.dtype != np.uint8:  # floats in [0, 1], as PyTorch reads them
        a = (np.clip(a.astype(np.float64), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return np.ascontiguousarray(a)


def _hparam_value(key, v):
    """(field, value, data type) of one hyper-parameter for the hparams plugin's protos."""
    if hasattr(v, "numel") and hasattr(v, "item"):      # a tensor
        if v.numel() != 1:
            raise ValueError(f"add_hparams: hyper-parameter {key!r} is a tensor of "
                             f"{v.numel()} elements; expected one element")
        v = v.item()
    if isinstance(v, bool):
        return "bool_value", v, "DATA_TYPE_BOOL"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return "number_value", float(v), "DATA_TYPE_FLOAT64"
    if isinstance(v, str):
        return "string_value", v, "DATA_TYPE_STRING"
    raise ValueError(f"add_hparams: hyper-parameter {key!r} should be an int, float, str, bool "
                     f"or one-element tensor, got {type(v).__name__}")


def _hparams_summaries(hparam_dict, metric_dict, domain_discrete):
    """The experiment, session-start and session-end summaries of the hparams plugin."""
    from google.protobuf import struct_pb2
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    domain_discrete = domain_discrete or {}
    for k, vals in domain_discrete.items():
        if k not in hparam_dict or not isinstance(vals, list) or not all(
                isinstance(x, type(hparam_dict[k])) for x in vals):
            raise TypeError(f"add_hparams: hparam_domain_discrete[{k!r}] should be a list of "
                            "values of the type of that hyper-parameter in hparam_dict")
    start = plugin_data_pb2.SessionStartInfo()
    infos = []
    for k, v in hparam_dict.items():
        field, value, dtype = _hparam_value(k, v)
        setattr(start.hparams[k], field, value)
        info = api_pb2.HParamInfo(name=k, type=api_pb2.DataType.Value(dtype))
        if k in domain_discrete:
            info.domain_discrete.CopyFrom(struct_pb2.ListValue(values=[
                struct_pb2.Value(**{field: _hparam_value(k, x)[1]})
                for x in domain_discrete[k]]))
        infos.append(info)
    experiment = api_pb2.Experiment(hparam_infos=infos, metric_infos=[
        api_pb2.MetricInfo(name=api_pb2.MetricName(tag=k)) for k in metric_dict])
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))

    def summary(tag, **data):
        content = plugin_data_pb2.HParamsPluginData(version=0, **data).SerializeToString()
        meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name="hparams", content=content))
        return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=meta)])

    return [summary("_hparams_/experiment", experiment=experiment),
            summary("_hparams_/session_start_info", session_start_info=start),
            summary("_hparams_/session_end_info", session_end_info=end)]


def _sprite(img):
    """(N, C, H, W) images (uint8, or floats in [0, 1]) tiled row by row into a square RGB
    HWC uint8 image ceil(sqrt(N)) images wide, as the projector reads sprites."""
    n, c, h, w = img.shape
    if img.dtype != np.uint8:     # x * 255 truncated, as PyTorch's sprite (add_image rounds)
        img = (np.clip(img.astype(np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)
    if c == 1:
        img = np.repeat(img, 3, axis=1)
    cols = int(np.ceil(np.sqrt(n)))
    out = np.zeros((cols * h, cols * w, 3), np.uint8)
    for i in range(n):
        r, col = divmod(i, cols)
        out[r * h:(r + 1) * h, col * w:(col + 1) * w] = img[i].transpose(1, 2, 0)
    return out


def _graph_def(graph, root):
    """A TensorBoard GraphDef of a ``fiamma.jit`` graph: inputs and outputs as ``IO Node``s,
    parameters as ``Parameter`` nodes and ops as ``aten::<op>`` nodes, each named under the
    module path of the parameters it reads (TensorBoard groups nodes by the ``/`` in names)."""
    from tensorboard.compat.proto import attr_value_pb2, graph_pb2, node_def_pb2, versions_pb2

    def shape_attr(value):
        m = graph.meta.get(value)
        if not m:
            return {}
        dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=int(d)) for d in m[0]]
        shp = tensor_shape_pb2.TensorShapeProto(dim=dims)
        return {"_output_shapes": attr_value_pb2.AttrValue(
            list=attr_value_pb2.AttrValue.ListValue(shape=[shp]))}

    names, nodes = {}, []
    for i, v in enumerate(graph.inputs):
        names[v] = f"input/{v}"
        nodes.append(node_def_pb2.NodeDef(name=names[v], op="IO Node", attr=shape_attr(v)))
    for p in graph.params:
        names[p] = f"{root}/" + p.replace(".", "/")
        nodes.append(node_def_pb2.NodeDef(name=names[p], op="Parameter", attr=shape_attr(p)))
    for k, n in enumerate(graph.nodes):
        ins = n.inputs()
        mods = [p.rsplit(".", 1)[0] for p in ins if p in graph.params and "." in p]
        scope = "/".join([root] + (mods[0].split(".") if mods else []))
        name = f"{scope}/{n.op}.{k}"
        for o in n.outputs:
            names[o] = name
        attr = shape_attr(n.outputs[0]) if n.outputs else {}
        nodes.append(node_def_pb2.NodeDef(name=name, op=f"aten::{n.op}",
                                          input=[names[x] for x in ins if x in names],
                                          attr=attr))
    for i, o in enumerate(graph.outputs):
        nodes.append(node_def_pb2.NodeDef(name=f"output/output.{i + 1}", op="IO Node",
                                          input=[names[o]] if o in names else [],
                                          attr=shape_attr(o)))
    return graph_pb2.GraphDef(node=nodes, versions=versions_pb2.VersionDef(producer=22))


class _FileWriter:
    """PyTorch's ``FileWriter`` of a SummaryWriter: events and ready-made summaries into its
    ``log_dir``."""

    def __init__(self, owner):
        self._owner = owner

    def get_logdir(self):
        return self._owner.log_dir

    def add_event(self, event, step=None, walltime=None):
        event.wall_time = time.time() if walltime is None else float(walltime)
        if step is not None:
            event.step = int(step)
        self._owner._open().add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        if not isinstance(summary, summary_pb2.Summary):
            raise TypeError(f"add_summary: expected a tensorboard Summary proto, got "
                            f"{type(summary).__name__}")
        self.add_event(event_pb2.Event(summary=summary), global_step, walltime)

    def flush(self):
        self._owner.flush()

    def close(self):
        self._owner.close()


class SummaryWriter:
    """Write TensorBoard event files to ``log_dir`` (default
    ``runs/<Mon>DD_HH-MM-SS_<host><comment>``), as PyTorch's SummaryWriter does.

    Supported: ``add_scalar``, ``add_scalars`` (one sub-directory per scalar, as PyTorch),
    ``add_histogram``, ``add_image``, ``add_images``, ``add_text``, ``flush``, ``close``, use as a
    context manager, ``add_graph`` (a ``fiamma.jit`` trace as a GraphDef), ``add_embedding``
    (the projector's files) and ``add_hparams`` (the hparams plugin's summaries). Not
    supported (they raise ``NotImplementedError`` saying so): ``add_audio``, ``add_video``,
    ``add_figure``, ``add_pr_curve``, ``add_mesh``.

    >>> import tempfile, fiamma
    >>> from fiamma.utils.tensorboard import SummaryWriter
    >>> with SummaryWriter(tempfile.mkdtemp()) as w:
    ...     for step in range(3):
    ...         w.add_scalar("loss", 1.0 / (step + 1), step)
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", stamp + "_" + socket.gethostname() + comment)
        self.log_dir = os.fspath(log_dir)
        self.purge_step = purge_step
        self.max_queue, self.flush_secs, self.filename_suffix = (max_queue, flush_secs,
                                                                 filename_suffix)
        self._writer = None
        self._sub = {}
        self._open()

    def _open(self):
        if self._writer is None:
            self._writer = EventFileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                           self.filename_suffix)
            if self.purge_step is not None:
                # events from a crashed run at or after purge_step are hidden by TensorBoard
                self._writer.add_event(event_pb2.Event(
                    step=int(self.purge_step), file_version="brain.Event:2",
                    session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)))
                self.purge_step = None
        return self._writer

    def get_logdir(self):
        return self.log_dir

    def _get_file_writer(self):
        """The writer of ``log_dir``'s event file (PyTorch's ``FileWriter``: ``add_summary``,
        ``add_event``, ``flush``, ``close``), for summaries made elsewhere (``summary.hparams``)."""
        return _FileWriter(self)

    def _summary(self, value, global_step, walltime, writer=None):
        event = event_pb2.Event(summary=summary_pb2.Summary(value=[value]),
                                wall_time=time.time() if walltime is None else float(walltime))
        if global_step is not None:
            event.step = int(global_step)
        (writer or self._open()).add_event(event)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """Log one number under ``tag`` at ``global_step``."""
        v = float(_scalar(scalar_value, "add_scalar"))
        if new_style:
            dtype = "DT_DOUBLE" if double_precision else "DT_FLOAT"
            tensor = tensor_pb2.TensorProto(
                dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                **({"double_val": [v]} if double_precision else {"float_val": [v]}))
            meta = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
            value = summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=meta)
        else:
            value = summary_pb2.Summary.Value(tag=tag, simple_value=v)
        self._summary(value, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Log several numbers, each into ``log_dir/<main_tag>_<tag>`` under ``main_tag``."""
        for tag, value in tag_scalar_dict.items():
            d = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{tag}")
            w = self._sub.get(d)
            if w is None:
                w = self._sub[d] = EventFileWriter(d, self.max_queue, self.flush_secs,
                                                   self.filename_suffix)
            v = summary_pb2.Summary.Value(tag=main_tag,
                                          simple_value=float(_scalar(value, "add_scalars")))
            self._summary(v, global_step, walltime, w)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        """Log the distribution of ``values`` (TensorFlow's buckets by default, or ``bins``
        as NumPy's ``histogram`` takes it)."""
        histo = _histogram(values, bins, max_bins)
        self._summary(summary_pb2.Summary.Value(tag=tag, histo=histo), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """Log an image (uint8, or floats in [0, 1]) laid out as ``dataformats``."""
        img = _image_hwc(img_tensor, dataformats, "add_image")
        h, w, c = img.shape
        image = summary_pb2.Summary.Image(height=h, width=w, colorspace=c,
                                          encoded_image_string=_png(img))
        self._summary(summary_pb2.Summary.Value(tag=tag, image=image), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """Log a batch of images as one grid image."""
        self.add_image(tag, img_tensor, global_step, walltime, dataformats)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Log a (Markdown) string."""
        tensor = tensor_pb2.TensorProto(
            dtype="DT_STRING", string_val=[str(text_string).encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]))
        meta = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        value = summary_pb2.Summary.Value(tag=tag + "/text_summary", metadata=meta,
                                          tensor=tensor)
        self._summary(value, global_step, walltime)

    def _unsupported(self, name, why):
        raise NotImplementedError(f"SummaryWriter.{name} is not supported by fiamma: {why}")

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Write ``model``'s graph for TensorBoard's Graphs tab: ``model`` is traced on
        ``input_to_model`` (a tensor or a tuple of them) by ``fiamma.jit.trace`` (fiamma-export)
        and its ops become the nodes of a GraphDef, each named under the module whose
        parameters it reads (``Net/conv1/conv2d``), with its output shapes."""
        try:
            import fiamma.jit as jit
        except ImportError:
            self._unsupported("add_graph", "tracing the model needs fiamma.jit (the "
                              "fiamma-export package)")
        if input_to_model is None:
            raise ValueError("SummaryWriter.add_graph: input_to_model is required to trace "
                             "the model")
        import warnings

        with warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore")
            traced = jit.trace(model, input_to_model, check_trace=False)
        graph_def = _graph_def(traced.graph, type(model).__name__)
        if verbose:
            print(graph_def)
        self._open().add_event(event_pb2.Event(graph_def=graph_def.SerializeToString(),
                                               wall_time=time.time()))

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None,
                      tag="default", metadata_header=None):
        """Write an embedding for TensorBoard's Projector tab, in PyTorch's layout:
        ``<log_dir>/<global_step:05>/<tag>/`` holds ``tensors.tsv`` (one row of ``mat`` per
        line), ``metadata.tsv`` (the labels; a header row first with ``metadata_header``) and
        ``sprite.png`` (``label_img`` (N, C, H, W) tiled in a square); ``projector_config.pbtxt``
        in ``log_dir`` lists every embedding written so far."""
        from google.protobuf import text_format
        from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

        m = _numpy(mat, "add_embedding")
        if m.ndim != 2:
            raise ValueError("SummaryWriter.add_embedding: mat should be 2-D (one row per data "
                             f"point), got shape {tuple(m.shape)}")
        step = 0 if global_step is None else int(global_step)
        enc = tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")
        subdir = f"{str(step).zfill(5)}/{enc}"
        path = os.path.join(self.log_dir, subdir)
        if os.path.isdir(path):
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        elif os.path.exists(path):
            raise NotADirectoryError(f"Path: `{path}` exists, but is a file. Cannot proceed.")
        else:
            os.makedirs(path)
        if metadata is not None:
            if len(metadata) != m.shape[0]:
                raise ValueError(f"SummaryWriter.add_embedding: {len(metadata)} labels for "
                                 f"{m.shape[0]} data points")
            if metadata_header:
                if len(metadata_header) != len(metadata[0]):
                    raise ValueError("SummaryWriter.add_embedding: metadata_header has "
                                     f"{len(metadata_header)} columns, the metadata "
                                     f"{len(metadata[0])}")
                lines = ["\t".join(str(e) for e in row) for row in [metadata_header, *metadata]]
            else:
                lines = [str(x) for x in metadata]
            with open(os.path.join(path, "metadata.tsv"), "wb") as f:
                f.write(("\n".join(lines) + "\n").encode("utf-8"))
        if label_img is not None:
            img = _numpy(label_img, "add_embedding")
            if img.ndim != 4 or img.shape[0] != m.shape[0] or img.shape[1] not in (1, 3):
                raise ValueError("SummaryWriter.add_embedding: label_img must be (N, 1 or 3, H, "
                                 f"W) with N = {m.shape[0]}, got shape {tuple(img.shape)}")
            with open(os.path.join(path, "sprite.png"), "wb") as f:
                f.write(_png(_sprite(img)))
        with open(os.path.join(path, "tensors.tsv"), "wb") as f:
            for row in m.tolist():
                f.write(("\t".join(str(x) for x in row) + "\n").encode("utf-8"))
        if not hasattr(self, "_projector_config"):
            self._projector_config = ProjectorConfig()
        info = self._projector_config.embeddings.add()
        info.tensor_name = f"{tag}:{str(step).zfill(5)}"
        info.tensor_path = f"{subdir}/tensors.tsv"
        if metadata is not None:
            info.metadata_path = f"{subdir}/metadata.tsv"
        if label_img is not None:
            info.sprite.image_path = f"{subdir}/sprite.png"
            info.sprite.single_image_dim.extend([img.shape[3], img.shape[2]])
        with open(os.path.join(self.log_dir, "projector_config.pbtxt"), "wb") as f:
            f.write(text_format.MessageToString(self._projector_config).encode("utf-8"))

    def add_audio(self, *args, **kwargs):
        self._unsupported("add_audio", "audio summaries are not written")

    def add_video(self, *args, **kwargs):
        self._unsupported("add_video", "video summaries are not written")

    def add_figure(self, *args, **kwargs):
        self._unsupported("add_figure", "matplotlib figures are not rendered")

    def add_pr_curve(self, *args, **kwargs):
        self._unsupported("add_pr_curve", "PR-curve summaries are not written")

    def add_mesh(self, *args, **kwargs):
        self._unsupported("add_mesh", "mesh summaries are not written")

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        """Log one trial for TensorBoard's HParams tab, as PyTorch: the hyper-parameters
        (numbers, strings, bools or one-element tensors) and metrics go to the run
        ``log_dir/<run_name>`` (default: the current time), each metric also as a scalar
        there."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("add_hparams: hparam_dict and metric_dict should be dictionaries, "
                            f"got {type(hparam_dict).__name__} and {type(metric_dict).__name__}")
        summaries = _hparams_summaries(hparam_dict, metric_dict, hparam_domain_discrete)
        run = os.path.join(self.log_dir, run_name or str(time.time()))
        with SummaryWriter(run, max_queue=self.max_queue, flush_secs=self.flush_secs,
                           filename_suffix=self.filename_suffix) as w:
            for summary in summaries:
                w._open().add_event(event_pb2.Event(summary=summary, wall_time=time.time()))
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def flush(self):
        """Write pending events to disk."""
        for w in [self._writer, *self._sub.values()]:
            if w is not None:
                w.flush()

    def close(self):
        """Flush and close the event files (a later add_* opens a new file)."""
        for w in [self._writer, *self._sub.values()]:
            if w is not None:
                w.flush()
                w.close()
        self._writer = None
        self._sub = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
