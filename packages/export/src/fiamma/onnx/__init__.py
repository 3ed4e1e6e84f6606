"""fiamma.onnx: export a model to ONNX (PyTorch's ``torch.onnx.export``).

The model is traced with :func:`fiamma.jit.trace`; each op of the graph goes through a
converter (opset 17 or newer). Needs the ``onnx`` package (``pip install fiamma-export[onnx]``).

>>> import io, fiamma, fiamma.nn as nn, fiamma.onnx
>>> buf = io.BytesIO()
>>> fiamma.onnx.export(nn.Linear(4, 2), fiamma.randn(1, 4), buf, input_names=["x"])
>>> buf.getvalue()[:2] != b""
True
"""

import os

import numpy as np

import fiamma
from fiamma.jit import Value
from fiamma.jit._interp import OPS
from fiamma.jit._tracer import trace_graph

from . import _nn  # noqa: F401  (registers its converters)
from ._context import Context, UnsupportedOpError
from ._converters import CONVERTERS

__all__ = ["export", "UnsupportedOpError", "is_supported", "supported_ops"]

MIN_OPSET = 17


def _onnx():
    try:
        import onnx
    except ImportError as e:
        raise ImportError("fiamma.onnx.export needs the onnx package: pip install "
                          f"fiamma-export[onnx] (import failed: {e})") from None
    return onnx


def supported_ops():
    """The names of the traced ops that have an ONNX converter."""
    return sorted(CONVERTERS)


def is_supported(op):
    return op in CONVERTERS


def _fold(graph, consts):
    """Evaluate (with fiamma) every node whose inputs are all constants: weight transposes
    and the like become initializers, as torch.onnx's do_constant_folding does."""
    kept = []
    for n in graph.nodes:
        ins = n.inputs()
        if ins and all(i in consts for i in ins) and n.op in OPS and n.op != "rnn":
            from fiamma.jit._interp import _resolve

            env = {i: fiamma.from_numpy(np.ascontiguousarray(consts[i])) for i in ins}
            with fiamma.no_grad():
                r = OPS[n.op](*_resolve(n.args, env),
                              **{k: _resolve(v, env) for k, v in n.kwargs.items()})
            rs = r if isinstance(r, (tuple, list)) else (r,)
            for o, t in zip(n.outputs, rs):
                consts[o] = t.numpy().copy()
            continue
        kept.append(n)
    graph.nodes = kept


def export(model, args, f, export_params=True, verbose=False, training=None,
           input_names=None, output_names=None, operator_export_type=None,
           opset_version=None, do_constant_folding=True, dynamic_axes=None,
           keep_initializers_as_inputs=None, custom_opsets=None,
           export_modules_as_functions=False, **kwargs):
    """Export ``model`` run on ``args`` to the ONNX file ``f`` (a path or a binary file).

    ``args``: a tensor or a tuple of tensors. ``input_names``/``output_names`` name the graph's
    inputs and outputs (default ``input_0``..., ``output_0``...); ``dynamic_axes`` maps a name
    to ``{axis: "symbol"}`` or a list of axes (those sizes are left free in the file);
    ``opset_version`` is 17 or newer (default: the newest the installed onnx knows).
    ``export_params=False`` leaves the weights out as graph inputs. An op without a
    converter raises :class:`UnsupportedOpError` naming it and the model's line.
    """
    onnx = _onnx()
    from onnx import helper, numpy_helper

    if kwargs:
        raise TypeError(f"fiamma.onnx.export: unexpected arguments {sorted(kwargs)}")
    newest = onnx.defs.onnx_opset_version()
    opset = int(opset_version) if opset_version is not None else newest
    if opset < MIN_OPSET or opset > newest:
        raise ValueError(f"fiamma.onnx.export: opset_version must be between {MIN_OPSET} and "
                         f"{newest} (the installed onnx's newest), got {opset}")
    if training not in (None, False) and str(training).split(".")[-1] not in ("EVAL", "False"):
        raise ValueError("fiamma.onnx.export: only inference graphs (training=None/EVAL)")
    if isinstance(args, fiamma.Tensor):
        args = (args,)
    args = tuple(args)
    if args and isinstance(args[-1], dict):
        if args[-1]:
            raise ValueError("fiamma.onnx.export: keyword inputs are not supported")
        args = args[:-1]
    import fiamma.nn as nn

    module = model if isinstance(model, nn.Module) else None
    was_training = module.training if module is not None else False
    if module is not None:
        module.eval()
    try:
        graph, _ = trace_graph(model, args, module)
    finally:
        if module is not None and was_training:
            module.train()
    consts = {k: v.detach().numpy().copy() for k, v in graph.params.items()}
    if do_constant_folding:
        _fold(graph, consts)
    opset_id = helper.make_opsetid("", opset)
    ctx = Context(onnx, graph, opset, consts)
    in_names = list(input_names or [])
    in_names += [f"input_{i}" for i in range(len(in_names), len(graph.inputs))]
    out_names = list(output_names or [])
    out_names += [f"output_{i}" for i in range(len(out_names), len(graph.outputs))]
    if len(in_names) > len(graph.inputs) or len(out_names) > len(graph.outputs):
        raise ValueError(f"fiamma.onnx.export: {len(in_names)} input names for "
                         f"{len(graph.inputs)} inputs / {len(out_names)} output names for "
                         f"{len(graph.outputs)} outputs")
    for v, n in zip(graph.inputs, in_names):
        ctx.names[v] = n
    produced = {o for node in graph.nodes for o in node.outputs}
    late = []  # outputs that are inputs, constants or repeated: an Identity each
    for v, n in zip(graph.outputs, out_names):
        if v in produced and v not in ctx.names:
            ctx.names[v] = n
        else:
            late.append((v, n))
    for node in graph.nodes:
        conv = CONVERTERS.get(node.op)
        ctx.node = node
        if conv is None:
            ctx.unsupported(f"no ONNX converter for op '{node.op}'")
        conv(ctx, node, [ctx.name(o) for o in node.outputs])
    ctx.node = None
    for v, n in late:
        ctx.add("Identity", [ctx.name(v)], n)

    dyn = _dynamic(dynamic_axes, in_names, out_names)

    def vinfo(name, value):
        shape, dt = graph.meta[value]
        dims = [dyn.get(name, {}).get(i, d) for i, d in enumerate(shape)]
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), dims)

    used = set()
    for n in ctx.nodes:
        used.update(n.input)
    inits, extra_inputs = [], []
    for name, arr in consts.items():
        on = ctx.names.get(name, name)
        if on not in used:
            continue
        t = numpy_helper.from_array(np.ascontiguousarray(arr), on)
        if export_params or name not in graph.params:
            inits.append(t)
        else:
            extra_inputs.append(helper.make_tensor_value_info(on, t.data_type, list(arr.shape)))
    g = helper.make_graph(
        ctx.nodes, getattr(model, "__class__", type(model)).__name__,
        [vinfo(n, v) for v, n in zip(graph.inputs, in_names)] + extra_inputs,
        [vinfo(n, v) for v, n in zip(graph.outputs, out_names)], inits)
    m = helper.make_model(g, opset_imports=[opset_id], producer_name="fiamma",
                          producer_version=fiamma.__version__)
    m.ir_version = min(m.ir_version, _ir_for(onnx, opset))
    onnx.checker.check_model(m, full_check=True)
    data = m.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        tmp = os.fspath(f) + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, f)
    else:
        f.write(data)
    if verbose:
        print(onnx.helper.printable_graph(m.graph))


def _ir_for(onnx, opset):
    """The IR version the ONNX release that introduced ``opset`` wrote (runtimes accept it)."""
    for row in onnx.helper.VERSION_TABLE:
        if row[2] == opset:
            return row[1]
    return onnx.IR_VERSION


def _dynamic(dynamic_axes, in_names, out_names):
    out = {}
    for name, axes in (dynamic_axes or {}).items():
        if name not in in_names and name not in out_names:
            raise ValueError(f"fiamma.onnx.export: dynamic_axes names {name!r}, which is neither "
                             f"an input ({in_names}) nor an output ({out_names})")
        if isinstance(axes, dict):
            out[name] = {int(k): str(v) for k, v in axes.items()}
        else:
            out[name] = {int(a): f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
    return out


del Value
