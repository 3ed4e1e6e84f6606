"""The exported graph's inputs and outputs: torch.onnx's argument conventions (a trailing
dict of keyword inputs, ``kwargs=``), default names for nested inputs and outputs, and
``dynamic_shapes`` turned into dynamic axes."""

import inspect

import fiamma
from fiamma.jit._tracer import input_leaves

__all__ = ["split_args", "input_names", "output_names", "dynamic_from_shapes"]


def split_args(args, kwargs):
    """(positional inputs, keyword inputs) as torch.onnx.export reads them: without
    ``kwargs=``, a dict at the end of ``args`` holds the keyword inputs (``{}`` for none, which
    lets a dict be the last positional input)."""
    if isinstance(args, fiamma.Tensor):
        args = (args,)
    elif isinstance(args, dict):
        args = (args,)
    args = tuple(args)
    if kwargs is None and args and isinstance(args[-1], dict):
        return args[:-1], dict(args[-1])
    return args, dict(kwargs or {})


def _leaf_name(path, i, prefix):
    """``{prefix}_{i}`` for a leaf reached by positions only; else the path from its first dict
    key or keyword name on, joined by ``_`` (``mask``, ``hidden_0``, ``out_logits``)."""
    for j, p in enumerate(path):
        if isinstance(p, str):
            return "_".join(str(q) for q in path[j:])
    return f"{prefix}_{i}"


def _unique(names):
    seen, out = set(), []
    for n in names:
        m, k = n, 1
        while m in seen:
            m, k = f"{n}_{k}", k + 1
        seen.add(m)
        out.append(m)
    return out


def input_names(args, kwargs, given, count):
    paths = [p for p, _ in input_leaves(args, kwargs)]
    names = list(given or [])
    if len(names) > count:
        raise ValueError(f"fiamma.onnx.export: {len(names)} input names for {count} inputs")
    names += [_leaf_name(p, i, "input") for i, p in enumerate(paths)][len(names):]
    return _unique(names)


def _spec_paths(spec, path=(), out=None):
    out = {} if out is None else out
    if isinstance(spec, int):
        out[spec] = path
    elif isinstance(spec, dict):
        for k, v in spec.items():
            _spec_paths(v, path + (str(k),), out)
    elif isinstance(spec, (tuple, list)):
        for j, v in enumerate(spec):
            _spec_paths(v, path + (j,), out)
    return out


def output_names(out_spec, given, count):
    """Names of the flattened outputs: ``output_i``, or from the keys of dict outputs."""
    names = list(given or [])
    if len(names) > count:
        raise ValueError(f"fiamma.onnx.export: {len(names)} output names for {count} outputs")
    paths = _spec_paths(out_spec)
    names += [_leaf_name(paths.get(i, ()), i, "output") for i in range(count)][len(names):]
    return _unique(names)


def _axis_name(spec, name, axis):
    if spec is None or spec is False:
        return None
    if isinstance(spec, str):
        return spec
    n = getattr(spec, "__name__", None)  # torch.export.Dim("batch")
    if isinstance(n, str) and n:
        return n
    return f"{name}_dim_{axis}"  # True, Dim.AUTO/DYNAMIC and other markers: a free axis


def _tensor_spec(spec, name, x):
    """{axis: symbol} for one tensor's entry of dynamic_shapes."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        items = spec.items()
    elif isinstance(spec, (tuple, list)):
        items = enumerate(spec)
    else:
        raise ValueError(f"fiamma.onnx.export: dynamic_shapes for input {name!r} must be a "
                         f"dict {{axis: name}} or a list per axis, got {type(spec).__name__}")
    out = {}
    for ax, s in items:
        ax = int(ax)
        if not -x.dim() <= ax < x.dim():
            raise ValueError(f"fiamma.onnx.export: dynamic_shapes names axis {ax} of input "
                             f"{name!r} (shape {list(x.shape)})")
        sym = _axis_name(s, name, ax % x.dim())
        if sym is not None:
            out[ax % x.dim()] = sym
    return out


def dynamic_from_shapes(dynamic_shapes, model, args, kwargs, names):
    """torch.export-style ``dynamic_shapes`` (a tuple/list matching the inputs, or a dict by
    the forward's parameter names; per tensor a dict ``{axis: name or Dim}`` or a list with one
    entry per axis, None for static) as ``{input name: {axis: symbol}}``."""
    leaves = input_leaves(args, kwargs)
    name_of = {id(t): n for (_, t), n in zip(leaves, names)}
    out = {}

    def walk(spec, value, where):
        if isinstance(value, fiamma.Tensor):
            axes = _tensor_spec(spec, name_of[id(value)], value)
            if axes:
                out[name_of[id(value)]] = axes
            return
        if spec is None:
            return
        if isinstance(value, dict):
            if not isinstance(spec, dict):
                raise ValueError(f"fiamma.onnx.export: dynamic_shapes{where} must be a dict "
                                 "like its input")
            for k, v in value.items():
                walk(spec.get(k), v, f"{where}[{k!r}]")
        elif isinstance(value, (tuple, list)):
            if not isinstance(spec, (tuple, list)) or len(spec) != len(value):
                raise ValueError(f"fiamma.onnx.export: dynamic_shapes{where} must be a "
                                 f"tuple/list of {len(value)} entries like its input")
            for j, (s, v) in enumerate(zip(spec, value)):
                walk(s, v, f"{where}[{j}]")

    if isinstance(dynamic_shapes, dict):
        fn = model.forward if hasattr(model, "forward") else model
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as e:
            raise ValueError(f"fiamma.onnx.export: dynamic_shapes is a dict by parameter name, "
                             f"but the inputs do not bind to the forward's signature ({e})") \
                from None
        params = bound.arguments
        unknown = [k for k in dynamic_shapes if k not in params]
        if unknown:
            raise ValueError(f"fiamma.onnx.export: dynamic_shapes names {unknown}, which are "
                             f"not inputs of the forward ({list(params)})")
        for k, spec in dynamic_shapes.items():
            walk(spec, params[k], f"[{k!r}]")
    else:
        spec = tuple(dynamic_shapes)
        values = tuple(args) + tuple(kwargs.values())
        if len(spec) != len(values):
            raise ValueError(f"fiamma.onnx.export: dynamic_shapes has {len(spec)} entries for "
                             f"{len(values)} inputs")
        for j, (s, v) in enumerate(zip(spec, values)):
            walk(s, v, f"[{j}]")
    return out
