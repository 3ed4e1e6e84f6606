"""fiamma.onnx: export a model to ONNX (PyTorch's ``torch.onnx.export``).

The model is traced with :func:`fiamma.jit.trace`; each op of the graph goes through a
converter (opset 17 or newer). Needs the ``onnx`` package (``pip install fiamma-export[onnx]``).

>>> import io, fiamma, fiamma.nn as nn, fiamma.onnx
>>> buf = io.BytesIO()
>>> prog = fiamma.onnx.export(nn.Linear(4, 2), fiamma.randn(1, 4), buf, input_names=["x"])
>>> buf.getvalue()[:2] != b"", [i.name for i in prog.model_proto.graph.input]
(True, ['x'])
"""

import functools
import os
import threading

import numpy as np

import fiamma
from fiamma.jit import Value
from fiamma.jit._interp import OPS
from fiamma.jit._tracer import flat_inputs, rebuild_inputs, trace_graph

from . import _detect, _extra, _fft, _io, _keypoints, _losses, _nn, _reduce, _searching, _shape  # noqa: F401, I001, E501
from ._context import Context, UnsupportedOpError
from ._converters import CONVERTERS
from ._program import ONNXProgram

__all__ = ["export", "ONNXProgram", "UnsupportedOpError", "is_supported", "supported_ops",
           "is_in_onnx_export"]

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
        if ins and all(i in consts for i in ins) and n.op in OPS and n.op != "rnn" and \
                "sym" not in n.kwargs:
            from fiamma.jit._interp import _resolve

            env = {i: fiamma.from_numpy(np.asarray(consts[i], order="C")) for i in ins}
            with fiamma.no_grad():
                r = OPS[n.op](*_resolve(n.args, env),
                              **{k: _resolve(v, env) for k, v in n.kwargs.items()})
            rs = r if isinstance(r, (tuple, list)) else (r,)
            for o, t in zip(n.outputs, rs):
                consts[o] = t.cpu().numpy().copy()
            continue
        kept.append(n)
    graph.nodes = kept


_exporting = threading.local()


def is_in_onnx_export():
    """Whether :func:`export` is running in this thread (code that the model runs may take an
    ONNX-friendly path; PyTorch's ``torch.onnx.is_in_onnx_export``).

    >>> import fiamma.onnx
    >>> fiamma.onnx.is_in_onnx_export()
    False
    """
    return getattr(_exporting, "depth", 0) > 0


def _marks_export(fn):
    @functools.wraps(fn)
    def export(*args, **kwargs):
        _exporting.depth = getattr(_exporting, "depth", 0) + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _exporting.depth -= 1
    return export


@_marks_export
def export(model, args=(), f=None, *, kwargs=None, verbose=None, input_names=None,
           output_names=None, opset_version=None, dynamo=True, external_data=True,
           dynamic_shapes=None, custom_translation_table=None, report=False, optimize=True,
           verify=False, profile=False, dump_exported_program=False, artifacts_dir=".",
           export_params=True, keep_initializers_as_inputs=False, dynamic_axes=None,
           training=None, operator_export_type=None, do_constant_folding=True,
           custom_opsets=None, export_modules_as_functions=False, autograd_inlining=True):
    """Export ``model`` run on ``args`` to the ONNX file ``f`` (a path or a binary file), with
    torch.onnx.export's signature.

    ``args``: a tensor or a tuple of inputs (tuples, lists and dicts of tensors nest: their
    tensors become the graph's inputs in order); without ``kwargs=``, a dict at the end of
    ``args`` holds keyword inputs (``{}`` for none), and ``kwargs`` passes them explicitly.
    ``input_names``/``output_names`` name the graph's inputs and outputs (default
    ``input_0``..., ``output_0``...; tensors under a dict key or keyword are named by it:
    ``mask``, ``hidden_0``; dict outputs by their keys). ``dynamic_axes`` maps a name to
    ``{axis: "symbol"}`` or a list of axes; ``dynamic_shapes`` (torch.export's form: a tuple
    matching the inputs or a dict by the forward's parameter names, per tensor ``{axis: name}``
    or a list per axis, names as strings or ``Dim``-like objects with ``__name__``) marks input
    axes, and the output axes that follow them are found and named. Sizes the model reads from
    ``x.shape``/``x.size()`` are symbolic in the trace: in a file with dynamic axes they are
    computed from the inputs' shapes (Shape/Gather nodes). The graph is run once with the
    dynamic axes grown, and a :class:`fiamma.jit.TracerWarning` says if a size is still baked
    in (``len(x)``, a size through ``int()``). ``opset_version``: default the newest the
    installed onnx knows; fiamma writes opset 17 or newer, and an older one asked for is
    reached through ONNX's version converter where it can convert every op (else the file
    keeps opset 17, with a warning, as PyTorch's exporter keeps 18). ``export_params=False``
    leaves the weights out as graph inputs. ``verify=True`` runs the file in ONNX Runtime (when
    installed) and raises if it differs from eager. There is one
    exporter (a trace): ``dynamo``, ``optimize``, ``report``, ``profile``,
    ``dump_exported_program`` and ``artifacts_dir`` are accepted and have no effect; a
    ``custom_translation_table`` is not supported. Complex tensors (fiamma.fft results) are
    (real, imag) float pairs in the file. An op without a converter raises
    :class:`UnsupportedOpError` naming it and the model's line.

    Returns an :class:`ONNXProgram` (PyTorch's exporter object: ``model_proto``, ``save``,
    ``optimize``, running it on tensors through ONNX Runtime; it also answers the proto's own
    attributes, ``prog.graph``), also when ``f`` is given; with ``dynamo=False`` and a file,
    None (the old exporter's return value).
    """
    onnx = _onnx()
    from onnx import helper, numpy_helper

    exported = None
    if _is_exported_program(model):
        exported = model
        model, args, kwargs, input_names, dynamic_shapes = _from_exported(
            model, args, kwargs, input_names, dynamic_axes, dynamic_shapes)
    source = (model, args, kwargs)

    if custom_translation_table:
        raise ValueError("fiamma.onnx.export: custom_translation_table is not supported")
    if export_modules_as_functions:
        raise ValueError("fiamma.onnx.export: export_modules_as_functions is not supported")
    newest = onnx.defs.onnx_opset_version()
    opset = int(opset_version) if opset_version is not None else newest
    if opset > newest:
        raise ValueError(f"fiamma.onnx.export: opset_version must be at most {newest} (the "
                         f"installed onnx's newest), got {opset}")
    wanted = opset
    if opset < MIN_OPSET:
        # PyTorch's exporter does the same: write the oldest opset it knows, then try ONNX's
        # version converter down to the one asked for (see _convert_down)
        opset = MIN_OPSET
    if training not in (None, False) and str(training).split(".")[-1] not in ("EVAL", "False"):
        raise ValueError("fiamma.onnx.export: only inference graphs (training=None/EVAL)")
    if dynamic_axes and dynamic_shapes is not None:
        raise ValueError("fiamma.onnx.export: give dynamic_axes or dynamic_shapes, not both")
    args, kwargs = _io.split_args(args, kwargs)
    import fiamma.nn as nn

    module = model if isinstance(model, nn.Module) else None
    was_training = module.training if module is not None else False
    if module is not None:
        module.eval()
    try:
        graph, eager = trace_graph(model, args, module, kwargs)
    finally:
        if module is not None and was_training:
            module.train()
    flat_args = flat_inputs(args, kwargs)
    in_names = _io.input_names(args, kwargs, input_names, len(graph.inputs))
    out_names = _io.output_names(graph.out_spec, output_names, len(graph.outputs))
    if dynamic_shapes is not None:
        dyn_in = _io.dynamic_from_shapes(dynamic_shapes, model, args, kwargs, in_names)
        dynamic_axes = dict(dyn_in)
        dynamic_axes.update(_output_axes(graph, flat_args, dyn_in, in_names, out_names))
    if dynamic_axes:
        dyn0 = _dynamic(dynamic_axes, in_names, out_names)
        problem = _check_dynamic(graph, flat_args, dyn0, in_names, out_names)
        if problem:
            # sizes read in Python that the symbolic sizes did not follow (len(x), a size
            # through int()): trace at two other sizes and make the reshape/expand sizes that
            # move with the axis follow it in the file
            sym = _symbolic(model, module, args, kwargs, dyn0, in_names)
            if sym is None:
                import warnings

                from fiamma.jit import TracerWarning

                warnings.warn(problem, TracerWarning, stacklevel=2)
            else:
                graph = sym
    consts = {k: v.detach().cpu().numpy().copy() for k, v in graph.params.items()}
    if do_constant_folding:
        _fold(graph, consts)
    opset_id = helper.make_opsetid("", opset)
    ctx = Context(onnx, graph, opset, consts)
    from fiamma.jit._dynamic import DATA_DEPENDENT

    data_dependent = _data_dependent(graph, DATA_DEPENDENT)
    ctx.dynamic = bool(dynamic_axes) or bool(data_dependent)
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
        if node.op not in _fft.FFT_OPS and any(
                graph.meta.get(v, ((), ""))[1].startswith("complex")
                for v in node.inputs() + node.outputs):
            conv = _fft.COMPLEX_CONVERTERS.get(node.op)
            if conv is None:
                ctx.unsupported(f"op '{node.op}' on a complex tensor has no converter (complex "
                                "values are (real, imag) pairs in the file: only the fiamma.fft "
                                "transforms, abs, real, imag and view_as_real/complex take them)")
        if conv is None:
            why = _extra.no_converter_reason(node.op)
            ctx.unsupported(why or f"no ONNX converter for op '{node.op}'")
        conv(ctx, node, [ctx.name(o) for o in node.outputs])
        if node.op in _fft.COMPLEX_RESULT:
            ctx.pairs.update(node.outputs)
    ctx.node = None
    for v, n in late:
        ctx.add("Identity", [ctx.name(v)], n)

    dyn = _dynamic(dynamic_axes, in_names, out_names)

    def vinfo(name, value):
        shape, dt = graph.meta[value]
        dims = [dyn.get(name, {}).get(i, d) for i, d in enumerate(shape)]
        if value in data_dependent and dims and name not in dyn:
            dims[0] = f"{name}_num"  # a count the values decide (boxes kept, ...)
        if dt.startswith("complex"):  # (real, imag) pairs: ONNX runtimes compute no complex
            dt, dims = {"complex64": "float32", "complex128": "float64"}[dt], dims + [2]
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), dims)

    used = _used_names(ctx.nodes)
    inits, extra_inputs = [], []
    for name, arr in consts.items():
        on = ctx.names.get(name, name)
        if on not in used:
            continue
        t = numpy_helper.from_array(np.asarray(arr, order="C"), on)
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
    if wanted < opset:
        m = _convert_down(onnx, m, wanted)
    if verify:
        _verify(m, flat_args, eager, in_names)
    kept = {t.name for t in m.graph.initializer}
    program = ONNXProgram(
        m, input_names=in_names, output_names=out_names,
        complex_outputs=[n for v, n in zip(graph.outputs, out_names)
                         if graph.meta[v][1].startswith("complex")],
        folded=[k for k in graph.params if k not in kept],
        flatten=lambda a, k: flat_inputs(a, k))
    program._exported_program = exported
    if exported is None:
        program._export_source = source
    if verbose:
        print(onnx.helper.printable_graph(m.graph))
    if f is None:
        return program
    data = m.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        tmp = os.fspath(f) + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, f)
    else:
        f.write(data)
    return program if dynamo else None


def _is_exported_program(model):
    try:
        from fiamma.export import ExportedProgram
    except ImportError:
        return False
    return isinstance(model, ExportedProgram)


def _from_exported(ep, args, kwargs, input_names, dynamic_axes, dynamic_shapes):
    """An ExportedProgram as a module of its tensor inputs (the program's ``module()``, its
    constant inputs filled in), the example inputs (unless others are given), the graph's
    input names and the dims the program declared dynamic as ``dynamic_axes``."""
    import fiamma.nn as nn
    from fiamma.export import _pytree
    from fiamma.export._signature import InputKind, TensorArgument

    if (args is None or (isinstance(args, tuple) and not args)) and not kwargs:
        args, kwargs = ep.example_inputs
    else:
        args, kwargs = _io.split_args(args, kwargs)
    leaves, _ = _pytree.flatten((tuple(args), dict(kwargs or {})))
    pos = [i for i, v in enumerate(leaves) if isinstance(v, fiamma.Tensor)]
    module = ep.module()
    module.__dict__["_apply_mutations"] = False  # the ONNX trace must not update buffers

    class ExportedProgramModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.program = module

        def train(self, mode=True):
            self.training = mode  # the program keeps the mode it was exported in
            return self

        def forward(self, *tensors):
            lv = list(leaves)
            for i, t in zip(pos, tensors):
                lv[i] = t
            a, k = _pytree.unflatten(lv, ep._in_spec, ep._types)
            return self.program(*a, **k)

    names = [s.arg.name for s in ep.graph_signature.input_specs
             if s.kind == InputKind.USER_INPUT and isinstance(s.arg, TensorArgument)]
    if input_names is None:
        input_names = names
    if dynamic_axes is None and dynamic_shapes is None:
        # the program's dynamic dims, by position (output axes that follow them are found)
        dynamic_shapes = tuple(
            {ax: ep._symbols.get(d[0], d[0]) if list(d[1:]) == [1, 0] else
             f"{d[1]}*{ep._symbols.get(d[0], d[0])}+{d[2]}"
             for ax, d in enumerate(shape) if not isinstance(d, int)} or None
            for shape in ep._input_shapes)
        if not any(dynamic_shapes):
            dynamic_shapes = None
    return ExportedProgramModule(), tuple(leaves[i] for i in pos), {}, input_names, \
        dynamic_shapes


def _used_names(nodes):
    """The names ``nodes`` read, in the subgraphs of their attributes (a Loop's body) too."""
    used = set()
    for n in nodes:
        used.update(n.input)
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                used |= _used_names(sub.node)
    return used


def _data_dependent(graph, ops):
    """The values computed from an op whose result size the values decide (nonzero, nms)."""
    out = set()
    for n in graph.nodes:
        if n.op in ops or any(i in out for i in n.inputs()):
            out.update(n.outputs)
    return out


def _grown(flat_args, dyn, in_names, by):
    out = []
    for x, name in zip(flat_args, in_names):
        for ax in sorted(dyn.get(name, {})):
            if ax >= x.dim() or x.shape[ax] == 0:
                raise ValueError(f"fiamma.onnx.export: dynamic axis {ax} of input {name!r} "
                                 f"(shape {list(x.shape)}) does not exist or is empty")
            x = fiamma.cat([x] + [x.narrow(ax, x.shape[ax] - 1, 1)] * by, ax)
        out.append(x)
    return out


def _check_dynamic(graph, flat_args, dyn, in_names, out_names):
    """Run the graph with every dynamic input axis one longer, then three longer: it must
    run, and each dynamic output axis must change size in one of the runs (an output rounded
    up to a multiple, a pad to a multiple of 4, keeps its size under one step). Returns what
    went wrong, or None."""
    from fiamma.jit._interp import Program

    pending = None
    for step in (1, 3):
        grown = _grown(flat_args, dyn, in_names, step)
        if all(a is b for a, b in zip(grown, flat_args)):
            return None
        try:
            outs = Program(graph).run(grown, graph.params)
        except Exception as e:  # noqa: BLE001  (any failure means: does not follow)
            return (f"fiamma.onnx.export: the traced graph fails when the dynamic axes change "
                    f"size ({type(e).__name__}: {e}); a size was baked in by the trace (shapes "
                    "read in Python), so the file only runs with the traced sizes")
        still = set()
        for o, name, v in zip(outs, out_names, graph.outputs):
            traced = graph.meta[v][0]
            for ax in dyn.get(name, {}):
                if ax < len(traced) and tuple(o.shape)[ax] == traced[ax] and \
                        (pending is None or (name, ax) in pending):
                    still.add((name, ax))
        if not still:
            return None
        pending = still
    name, ax = sorted(pending)[0]
    return (f"fiamma.onnx.export: output {name!r} axis {ax} does not follow the dynamic input "
            "axes (a size was baked in by the trace)")


def _output_axes(graph, flat_args, dyn_in, in_names, out_names):
    """The output axes that follow the dynamic input axes (their sizes change when the graph
    runs with those axes one longer), named ``{output}_dim_{axis}``."""
    from fiamma.jit._interp import Program

    res = {}
    for step in (1, 3):  # an axis rounded to a multiple may keep its size under one step
        grown = _grown(flat_args, dyn_in, in_names, step)
        try:
            outs = Program(graph).run(grown, graph.params)
        except Exception:  # noqa: BLE001  (reported by the dynamic check that follows)
            return res
        for o, name, v in zip(outs, out_names, graph.outputs):
            traced = graph.meta[v][0]
            if len(o.shape) != len(traced):
                continue
            for ax, (a, b) in enumerate(zip(o.shape, traced)):
                if a != b:
                    res.setdefault(name, {})[ax] = f"{name}_dim_{ax}"
    return res


def _symbolic(model, module, args, kwargs, dyn, in_names):
    """The graph traced with the one dynamic axis one and two longer, where the two traces
    differ only in reshape/expand sizes that grow with it (k per step, k * size): those sizes
    are marked to be computed from the input's shape in the file. None if that is not so."""
    flat = flat_inputs(args, kwargs)
    axes = [(i, ax) for i, name in enumerate(in_names[:len(flat)]) for ax in dyn.get(name, {})]
    if len(axes) != 1:
        return None
    i, ax = axes[0]
    size1 = flat[i].shape[ax] + 1
    was_training = module.training if module is not None else False
    if module is not None:
        module.eval()
    try:
        graphs = []
        for by in (1, 2):
            a, k = rebuild_inputs(args, kwargs, _grown(flat, dyn, in_names, by))
            graphs.append(trace_graph(model, a, module, k)[0])
        g1, g2 = graphs
    except Exception:  # noqa: BLE001
        return None
    finally:
        if was_training:
            module.train()
    if len(g1.nodes) != len(g2.nodes) or set(g1.params) != set(g2.params):
        return None
    if any(tuple(g1.params[k].shape) != tuple(g2.params[k].shape) for k in g1.params):
        return None
    for n1, n2 in zip(g1.nodes, g2.nodes):
        if n1.op != n2.op or n1.args != n2.args or set(n1.kwargs) != set(n2.kwargs):
            return None
        if n1.kwargs == n2.kwargs:
            continue
        if n1.op not in ("reshape", "expand"):
            return None
        a1, a2 = n1.kwargs["arg"], n2.kwargs["arg"]
        if len(a1) != len(a2):
            return None
        sym = []
        for j, (u, v) in enumerate(zip(a1, a2)):
            if u != v:
                k = v - u
                if k <= 0 or u != k * size1:
                    return None
                sym.append((j, k))
        n1.kwargs["sym"] = (i, ax, tuple(sym))
    return g1


def _verify(model, flat_args, eager, in_names):
    try:
        import onnxruntime as ort
    except ImportError:
        raise ImportError("fiamma.onnx.export(verify=True) needs onnxruntime") from None
    from fiamma.jit._tracer import _flatten_out

    want = []
    _flatten_out(eager, want)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {n: _pairs(x) for n, x in zip(in_names, flat_args)})
    for i, (g, w) in enumerate(zip(got, want)):
        w = _pairs(w)
        scale = float(np.abs(w).max()) if w.size else 0.0
        if g.shape != w.shape or (w.size and float(np.abs(g - w).max()) > 1e-4 * scale + 1e-6):
            raise RuntimeError(f"fiamma.onnx.export(verify=True): output {i} of ONNX Runtime "
                               "differs from the eager model")


def _pairs(t):
    """A tensor as the file holds it: NumPy, a complex tensor as (real, imag) pairs."""
    a = t.detach().cpu().numpy()
    if np.iscomplexobj(a):
        a = np.stack([a.real, a.imag], axis=-1)
    return a


def _convert_down(onnx, model, wanted):
    """``model`` converted to opset ``wanted`` by ONNX's version converter, or, where the
    converter has no adapter for an op, ``model`` unchanged with a warning (PyTorch's exporter
    keeps its newer opset the same way)."""
    import warnings

    have = model.opset_import[0].version
    try:
        from onnx import version_converter

        down = version_converter.convert_version(model, wanted)
        onnx.checker.check_model(down, full_check=True)
        return down
    except Exception as e:  # the converter raises RuntimeError/ValidationError per op
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        warnings.warn(f"fiamma.onnx.export: opset_version {wanted} is older than the opsets "
                      f"fiamma writes ({MIN_OPSET} and newer) and ONNX's version converter could "
                      f"not take the model down to it ({first}); the file uses opset {have}",
                      UserWarning, stacklevel=3)
        return model


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
