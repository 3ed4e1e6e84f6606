"""``save`` / ``load``: an exported program as a zip of JSON and safetensors.

The layout follows PyTorch's ``.pt2`` archive in spirit, not in format (PyTorch can't read it
and fiamma can't read PyTorch's): ``<name>/archive_format`` (``fiamma-pt2``),
``<name>/version``, ``<name>/models/model.json`` (graph nodes, signature, input/output specs,
dims, range constraints, guards), ``<name>/data/weights/model.safetensors`` (state_dict),
``<name>/data/constants/model.safetensors`` (constants),
``<name>/data/sample_inputs/model.safetensors`` (the example's tensors) and
``<name>/extra/<file>`` (``extra_files``). Loading reads JSON and tensors only: graph nodes name
ops of fiamma's table (:class:`fiamma.export.ExportOp`), never code.
"""

import io
import json
import operator
import os
import zipfile

import fiamma
import fiamma.fx as fx
from fiamma.jit._graph import Value, _dec, _enc
from fiamma.jit._interp import OPS

from . import _pytree
from ._dims import Range
from ._program import ExportedProgram, ExportOp, map_values, op
from ._signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)

__all__ = ["save", "load"]

FORMAT = "fiamma-pt2"
VERSION = 1
_ROOT = "archive"


def _json_value(v, what):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise TypeError(f"fiamma.export.save: {what} is a {type(v).__name__}; only None, bool, "
                    "int, float and str constants can be saved")


def _node_rows(graph):
    rows = []
    for n in graph.nodes:
        def ref(x):
            return Value(x.name)
        args = fx.map_arg(n.args, ref)
        kwargs = fx.map_arg(n.kwargs, ref)
        if n.op == "placeholder":
            target = n.target
        elif n.op == "output":
            target = None
        elif n.op == "call_function" and isinstance(n.target, ExportOp):
            target = n.target.name
        elif n.op == "call_function" and n.target is operator.getitem:
            target = "getitem"
        else:
            raise TypeError(f"fiamma.export.save: node {n.name} ({n.op} {n.target!r}) is not "
                            "one of fiamma.export's ops; only graphs of fiamma.export.ops can "
                            "be saved")
        meta = {}
        if "fiamma_shape" in n.meta:
            shape, dt = n.meta["fiamma_shape"]
            meta["shape"] = [list(shape), dt]
        if "stack_trace" in n.meta:
            meta["stack_trace"] = n.meta["stack_trace"]
        rows.append({"name": n.name, "op": n.op, "target": target, "args": _enc(args),
                     "kwargs": _enc(kwargs), "meta": meta})
    return rows


def _arg_json(a):
    if isinstance(a, ConstantArgument):
        return {"constant": a.name, "value": _json_value(a.value, f"constant input {a.name}")}
    return {"tensor": a.name}


def _write_tensors(z, path, tensors):
    from fiamma.safetensors import save as st_save

    z.writestr(path, st_save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}))


def save(ep, f, *, extra_files=None, opset_version=None, pickle_protocol=2):
    """Write ``ep`` to ``f`` (a path or a binary file object) as a zip archive
    (see this module's notes for the layout)."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"fiamma.export.save: expected an ExportedProgram, got "
                        f"{type(ep).__name__}")
    sig = ep.graph_signature
    args, kwargs = ep.example_inputs or ((), {})
    leaves, _ = _pytree.flatten((args, kwargs))
    sample = {str(i): t for i, t in enumerate(leaves) if isinstance(t, fiamma.Tensor)}
    model = {
        "format": FORMAT, "version": VERSION,
        "nodes": _node_rows(ep.graph),
        "input_specs": [{"kind": s.kind.name, "arg": _arg_json(s.arg), "target": s.target,
                         "persistent": s.persistent} for s in sig.input_specs],
        "output_specs": [{"kind": s.kind.name, "arg": _arg_json(s.arg), "target": s.target}
                         for s in sig.output_specs],
        "in_spec": ep._in_spec, "out_spec": ep._out_spec,
        "input_shapes": ep._input_shapes,
        "range_constraints": {k: [r.lower, None if r.upper == float("inf") else r.upper]
                              for k, r in ep.range_constraints.items()},
        "symbols": ep._symbols,
        "guards": [[o, _enc(lhs), _enc(rhs), res, where] for o, lhs, rhs, res, where
                   in ep._guards],
        "sample_constants": {str(i): _json_value(v, f"example input {i}")
                             for i, v in enumerate(leaves) if not isinstance(v, fiamma.Tensor)},
        "module_fqns": ep._module_fqns, "forward_arg_names": ep._forward_arg_names,
        "training": ep._training,
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{_ROOT}/archive_format", FORMAT)
        z.writestr(f"{_ROOT}/version", str(VERSION))
        z.writestr(f"{_ROOT}/models/model.json", json.dumps(model))
        _write_tensors(z, f"{_ROOT}/data/weights/model.safetensors", ep.state_dict)
        _write_tensors(z, f"{_ROOT}/data/constants/model.safetensors", ep.constants)
        _write_tensors(z, f"{_ROOT}/data/sample_inputs/model.safetensors", sample)
        for name, text in (extra_files or {}).items():
            z.writestr(f"{_ROOT}/extra/{name}", text)
    data = buf.getvalue()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


def _arg_from(d):
    if "constant" in d:
        return ConstantArgument(d["constant"], d["value"])
    return TensorArgument(d["tensor"])


def _tuples(x):
    """JSON turned the specs' lists into lists: specs are lists anyway (no change)."""
    return x


def load(f, *, extra_files=None, expected_opset_version=None):
    """Read a program written by :func:`save` (only fiamma's own archives; PyTorch's ``.pt2``
    files are refused with an error saying so)."""
    from fiamma.safetensors import load as st_load

    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise RuntimeError("fiamma.export.load: not an exported-program archive (not a zip "
                           "file)") from None
    with z:
        names = z.namelist()
        fmt_files = [n for n in names if n.endswith("/archive_format")]
        if not fmt_files:
            raise RuntimeError("fiamma.export.load: not an exported-program archive (no "
                               "archive_format)")
        root = fmt_files[0].rsplit("/", 1)[0]
        fmt = z.read(fmt_files[0]).decode().strip()
        if fmt != FORMAT:
            raise RuntimeError(f"fiamma.export.load: the archive's format is {fmt!r}: it was "
                               "written by PyTorch's torch.export.save, whose graphs of ATen "
                               "ops fiamma cannot read; export the model with fiamma.export "
                               "(or save its state_dict) instead")
        model = json.loads(z.read(f"{root}/models/model.json"))
        if model.get("version", 0) > VERSION:
            raise RuntimeError(f"fiamma.export.load: archive version {model.get('version')} is "
                               f"newer than this fiamma reads ({VERSION})")
        weights = st_load(z.read(f"{root}/data/weights/model.safetensors"))
        constants = st_load(z.read(f"{root}/data/constants/model.safetensors"))
        sample = st_load(z.read(f"{root}/data/sample_inputs/model.safetensors"))
        if extra_files is not None:
            for k in list(extra_files):
                p = f"{root}/extra/{k}"
                if p in names:
                    extra_files[k] = z.read(p).decode()

    g = fx.Graph()
    env = {}

    def look(a):
        if a.name not in env:
            raise RuntimeError(f"fiamma.export.load: a node reads {a.name!r} before it "
                               "is defined")
        return env[a.name]

    def res(a):
        return map_values(a, look)

    for row in model["nodes"]:
        kind = row["op"]
        args, kwargs = res(_dec(row["args"])), res(_dec(row["kwargs"]))
        if kind == "placeholder":
            n = g.placeholder(row["target"])
            if n.name != row["name"] and row["name"].isidentifier() and \
                    row["name"] not in env:
                n.name = row["name"]  # an argument's own name (``input``), as exported
                g._graph_namespace._used.add(n.name)
        elif kind == "output":
            n = g.output(args[0])
        elif kind == "call_function":
            t = row["target"]
            if t == "getitem":
                target = operator.getitem
            elif t in OPS:
                target = op(t)
            else:
                raise RuntimeError(f"fiamma.export.load: the archive uses op {t!r}, which "
                                   "this version of fiamma cannot run")
            n = g.create_node("call_function", target, tuple(args), kwargs, name=row["name"])
        else:
            raise RuntimeError(f"fiamma.export.load: unknown node kind {kind!r}")
        if n.name != row["name"] and kind != "output":
            raise RuntimeError(f"fiamma.export.load: duplicate node name {row['name']!r}")
        m = row.get("meta", {})
        if "shape" in m:
            n.meta["fiamma_shape"] = (m["shape"][0], m["shape"][1])
        if "stack_trace" in m:
            n.meta["stack_trace"] = m["stack_trace"]
        env[row["name"]] = n
    gm = fx.GraphModule({}, g, "GraphModule")

    in_specs = [InputSpec(InputKind[s["kind"]], _arg_from(s["arg"]), s["target"],
                          s["persistent"]) for s in model["input_specs"]]
    out_specs = [OutputSpec(OutputKind[s["kind"]], _arg_from(s["arg"]), s["target"])
                 for s in model["output_specs"]]
    sig = ExportGraphSignature(in_specs, out_specs)
    for s in in_specs:
        if s.kind == InputKind.PARAMETER and s.target in weights:
            weights[s.target] = fiamma.nn.Parameter(weights[s.target])
    state_dict = {s.target: weights[s.target] for s in in_specs
                  if s.kind in (InputKind.PARAMETER, InputKind.BUFFER) and s.target in weights}
    ranges = {k: Range(lo, float("inf") if hi is None else hi)
              for k, (lo, hi) in model["range_constraints"].items()}
    guards = [(o, _dec(lhs), _dec(rhs), r, w) for o, lhs, rhs, r, w in model["guards"]]
    leaves, in_spec = [], model["in_spec"]
    n_leaves = len(_pytree.leaf_paths(in_spec))
    consts = model.get("sample_constants", {})
    for i in range(n_leaves):
        leaves.append(sample[str(i)] if str(i) in sample else consts.get(str(i)))
    example = _pytree.unflatten(leaves, in_spec)
    return ExportedProgram(
        gm, sig, state_dict, constants, ranges, in_spec=in_spec, out_spec=model["out_spec"],
        input_shapes=model["input_shapes"], guards=guards, symbols=model.get("symbols"),
        example_inputs=example, module_fqns=model.get("module_fqns", ()),
        forward_arg_names=model.get("forward_arg_names", ()),
        training=model.get("training", False))
