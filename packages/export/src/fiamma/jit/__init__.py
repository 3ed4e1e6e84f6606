"""fiamma.jit: tracing an eager model into a graph that runs without the model's code.

PyTorch's ``torch.jit.trace`` / ``torch.jit.save`` / ``torch.jit.load``. TorchScript's
scripting language (deprecated upstream) is not built: :func:`script` returns a module or
function that runs its own Python and saves as a trace of its last call (see
:func:`script`). :func:`load` reads fiamma's files only, not PyTorch's TorchScript archives.

>>> import fiamma, fiamma.nn as nn, fiamma.jit
>>> m = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
>>> x = fiamma.randn(2, 4)
>>> tm = fiamma.jit.trace(m, x)
>>> bool((tm(x) - m(x)).abs().max() < 1e-6)
True
>>> print(tm.code.splitlines()[0])
def forward(self, input_0):
"""

import io
import os
import warnings
import zipfile

import fiamma

from ._graph import Graph, Node, Value
from ._interp import OPS, Program
from ._script import ScriptFunction, ScriptModule, script_object
from ._tracer import TracerWarning, TracingError, trace_graph
from ._version import __version__

__all__ = ["trace", "load", "save", "script", "TracedModule", "ScriptModule", "ScriptFunction",
           "RecursiveScriptModule", "TracerWarning", "TracingError", "Graph", "Node", "Value",
           "is_tracing", "is_scripting", "ignore", "unused", "export", "annotate", "Final",
           "interface",
           "freeze", "optimize_for_inference", "enable_onednn_fusion", "onednn_fusion_enabled",
           "__version__"]

RecursiveScriptModule = ScriptModule  # the type of torch.jit.script(module) in PyTorch


_onednn_fusion = [False]


def enable_onednn_fusion(enabled):
    """PyTorch's switch for oneDNN Graph fusion of traced models: recorded; fiamma's runner
    has no oneDNN fusion pass (its traced calls run fiamma's own kernels either way)."""
    _onednn_fusion[0] = bool(enabled)


def onednn_fusion_enabled():
    """Whether :func:`enable_onednn_fusion` was last set to True."""
    return _onednn_fusion[0]


def _check_scripted(mod, op):
    if not isinstance(mod, (ScriptModule, TracedModule)):
        raise RuntimeError(f"{op} expects a ScriptModule as input. Please use torch.jit.script "
                           "or torch.jit.trace to script your 'nn.Module'.")


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """``torch.jit.freeze``: a scripted or traced module in eval mode, ready for inference.
    PyTorch inlines the weights as constants; fiamma returns the module itself (a traced
    module already runs its recorded ops with its weights' views computed once), so later
    changes to its weights still show. Raises as PyTorch for a plain module or one in
    training mode."""
    _check_scripted(mod, "Freezing")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. "
                           "Please call .eval() on your module before freezing.")
    return mod


def optimize_for_inference(mod, other_methods=None):
    """``torch.jit.optimize_for_inference``: the module in eval mode, frozen (see
    :func:`freeze`)."""
    _check_scripted(mod, "optimize_for_inference")
    if mod.training:
        mod = mod.eval()
    return freeze(mod, preserved_attrs=other_methods)


def is_tracing():
    """Whether a trace is recording in this thread (as torch.jit.is_tracing)."""
    from fiamma import autograd_hook

    prev = autograd_hook.set_trace_hook(None)
    autograd_hook.set_trace_hook(prev)
    return prev is not None


def is_scripting():
    """Always False: scripting is not built (model code that asks takes its eager path)."""
    return False


def _passthrough(fn=None, **kwargs):
    return fn if fn is not None else (lambda f: f)


# TorchScript's decorators and annotations, for model code that carries them: no-ops here
ignore = unused = export = _passthrough


def interface(obj):
    """``obj`` unchanged: a TorchScript interface declaration (a class whose methods other
    classes implement) is an ordinary class when nothing is scripted."""
    return obj


def annotate(the_type, the_value):
    """``the_value`` unchanged (a TorchScript type hint)."""
    return the_value


Final = __import__("typing").Final


def _rebuild(spec, flat):
    if isinstance(spec, int):
        return flat[spec]
    if isinstance(spec, tuple):
        return tuple(_rebuild(s, flat) for s in spec)
    if isinstance(spec, list):
        return [_rebuild(s, flat) for s in spec]
    if isinstance(spec, dict):
        return {k: _rebuild(v, flat) for k, v in spec.items()}
    return spec


class TracedModule:
    """A traced function or module: call it like the original (tensors in, tensors out).

    ``graph`` is the recorded :class:`Graph` (printable), ``code`` a Python-like listing,
    ``save(path)`` writes one file that :func:`fiamma.jit.load` reads without the model's code.
    """

    def __init__(self, graph, name="forward"):
        self.graph = graph
        self._name = name
        self._prog = Program(graph)
        self.training = False

    def __getattr__(self, name):
        # a direct submodule of the traced module that the trace ran: traced on the inputs
        # it got there (PyTorch's TracedModule keeps its submodules as traced modules)
        children = self.__dict__.get("_children") or {}
        if name in children:
            cache = self.__dict__.setdefault("_child_traces", {})
            if name not in cache:
                mod, args = children[name]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", TracerWarning)
                    cache[name] = trace(mod, tuple(args), check_trace=False)
            return cache[name]
        raise AttributeError(f"'TracedModule' object has no attribute '{name}' (a traced "
                             "module has the submodules its trace ran: "
                             f"{sorted(children) or 'none'})")

    def __call__(self, *inputs, **kwargs):
        flat = self._prog.run(inputs, self.graph.params, kwargs)
        return _rebuild(self.graph.out_spec, flat)

    forward = __call__

    @property
    def code(self):
        g = self.graph
        lines = ["def forward(" + ", ".join(["self"] + g.inputs) + "):"]
        for n in g.nodes:
            args = [_code_arg(a) for a in n.args]
            args += [f"{k}={_code_arg(v)}" for k, v in n.kwargs.items()]
            lhs = ", ".join(_ident(o) for o in n.outputs)
            lines.append(f"    {lhs} = {n.op}({', '.join(args)})")
        lines.append("    return " + ", ".join(_ident(o) for o in g.outputs))
        return "\n".join(lines)

    def state_dict(self):
        return dict(self.graph.params)

    def parameters(self):
        return iter(self.graph.params.values())

    def load_state_dict(self, state_dict, strict=True):
        """Copy tensors into the graph's initializers by name (shapes must match)."""
        own = self.graph.params
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"load_state_dict: missing keys {missing[:5]}, unexpected keys "
                               f"{unexpected[:5]}")
        with fiamma.no_grad():
            for k, v in state_dict.items():
                if k in own:
                    if tuple(own[k].shape) != tuple(v.shape):
                        raise RuntimeError(f"load_state_dict: {k} has shape "
                                           f"{list(own[k].shape)}, got {list(v.shape)}")
                    own[k].copy_(v)

    def to(self, device):
        """The traced module with its tensors on ``device`` (a new object; this one is kept)."""
        g = Graph()
        g.inputs, g.nodes, g.outputs = self.graph.inputs, self.graph.nodes, self.graph.outputs
        g.out_spec, g.meta = self.graph.out_spec, self.graph.meta
        g.kwarg_names = self.graph.kwarg_names
        g.params = {k: v.to(device) for k, v in self.graph.params.items()}
        return TracedModule(g, self._name)

    def cpu(self):
        return self.to("cpu")

    def eval(self):
        return self

    def save(self, f):
        """Write the graph (JSON) and its tensors (safetensors) into one zip file."""
        save(self, f)

    def __repr__(self):
        tree = self.__dict__.get("_tree")
        if tree is not None:  # PyTorch's printout of a traced module: the module hierarchy
            return _format_tree(tree)
        return f"TracedModule(inputs={len(self.graph.inputs)}, nodes={len(self.graph.nodes)})"


def _module_tree(m):
    """(class name, [(child name, subtree)]) of a module, as the trace saw it."""
    return (type(m).__name__, [(n, _module_tree(c)) for n, c in m.named_children()])


def _format_tree(tree, indent=""):
    name, kids = tree
    if not kids:
        return f"{name}(original_name={name})"
    inner = indent + "  "
    lines = [f"{name}(", f"{inner}original_name={name}"]
    lines += [f"{inner}({k}): {_format_tree(t, inner)}" for k, t in kids]
    return "\n".join(lines + [indent + ")"])


def _ident(name):
    if name.startswith("%"):
        return "v" + name[1:]
    return name.replace(".", "_")


def _code_arg(a):
    if isinstance(a, Value):
        n = a.name
        return _ident(n) if n.startswith("%") or n.startswith("input_") \
            else f"self.{n}"
    if isinstance(a, tuple):
        return "(" + ", ".join(_code_arg(x) for x in a) + ("," if len(a) == 1 else "") + ")"
    if isinstance(a, list):
        return "[" + ", ".join(_code_arg(x) for x in a) + "]"
    if isinstance(a, fiamma.dtype):
        return "fiamma." + str(a).split(".")[-1]
    return repr(a)


def trace(func, example_inputs=None, check_trace=True, check_tolerance=1e-5, strict=True,
          example_kwarg_inputs=None):
    """Run ``func`` once on ``example_inputs`` and record its ops as a :class:`TracedModule`.

    ``func`` is an ``nn.Module`` (its parameters and buffers become the graph's named
    initializers) or a function of tensors. ``example_inputs`` is a tensor or a tuple of them
    (tuples, lists and dicts of tensors nest); ``example_kwarg_inputs`` a dict of keyword
    inputs (the traced module then takes them by name). Sizes read from the inputs' shapes
    (``x.view(x.size(0), -1)``) stay symbolic: the traced module runs other sizes.
    Python control flow is baked in for these inputs; ``.item()``, ``.tolist()`` and tensors
    used as Python bools raise :class:`TracerWarning`. With ``check_trace`` the traced module is
    run on the same inputs and must match the eager outputs (a TracerWarning says if not).

    >>> import fiamma, fiamma.jit
    >>> tm = fiamma.jit.trace(lambda x: (x * 2).relu(), fiamma.tensor([-1.0, 3.0]))
    >>> tm(fiamma.tensor([2.0, -5.0])).tolist()
    [4.0, 0.0]
    """
    if isinstance(example_inputs, fiamma.Tensor):
        example_inputs = (example_inputs,)
    elif example_inputs is None:
        if example_kwarg_inputs is None:
            raise TypeError("fiamma.jit.trace: example_inputs (or example_kwarg_inputs) is "
                            "required")
        example_inputs = ()
    example_inputs = tuple(example_inputs)
    kwargs = dict(example_kwarg_inputs or {})
    module = None
    try:
        import fiamma.nn as nn

        if isinstance(func, nn.Module):
            module = func
    except ImportError:
        pass
    seen, handles = {}, []
    if module is not None:
        # the first inputs each direct submodule gets, so that ``traced.<child>`` can be
        # traced on them when asked for (references only: no op runs inside the trace)
        for cname, child in module.named_children():
            def pre(mod, args, _name=cname):
                seen.setdefault(_name, (mod, args))
            handles.append(child.register_forward_pre_hook(pre))
    try:
        graph, out = trace_graph(func, example_inputs, module, kwargs)
    finally:
        for h in handles:
            h.remove()
    tm = TracedModule(graph, type(func).__name__ if module is not None else "forward")
    tm._children = seen
    if module is not None:
        tm.original_name = type(module).__name__
        tm._tree = _module_tree(module)
    if check_trace:
        _check(tm, example_inputs, kwargs, out, check_tolerance)
    return tm


def _check(tm, inputs, kwargs, eager, tol):
    flat_e = []
    from ._tracer import _flatten_out

    _flatten_out(eager, flat_e)
    got = tm._prog.run(inputs, tm.graph.params, kwargs)
    for i, (a, b) in enumerate(zip(got, flat_e)):
        if a.shape != b.shape or a.dtype != b.dtype:
            warnings.warn(f"fiamma.jit.trace: output {i} of the traced function has shape "
                          f"{list(a.shape)} {a.dtype}, eager gave {list(b.shape)} {b.dtype}",
                          TracerWarning, stacklevel=3)
        elif a.numel() and a.dtype.is_floating_point:
            err = float((a.double() - b.double()).abs().max())
            scale = float(b.double().abs().max()) + 1.0
            if err > tol * scale:
                warnings.warn(f"fiamma.jit.trace: output {i} of the traced function does not "
                              f"match the eager output (max abs difference {err:.3g})",
                              TracerWarning, stacklevel=3)
        elif a.numel() and not bool((a == b).all()):
            warnings.warn(f"fiamma.jit.trace: output {i} of the traced function does not match "
                          "the eager output", TracerWarning, stacklevel=3)


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """A scripted ``obj`` that runs its own Python, eagerly (TorchScript's language is a
    subset of Python whose programs compute the same values when Python runs them, so
    ``@torch.jit.script`` functions and ``torch.jit.script(model)`` in model code keep working).

    A module gives a :class:`ScriptModule` (the module's class with ``save``/``code``/``graph``
    mixed in, sharing the original's parameters, buffers and submodules); a function gives a
    :class:`ScriptFunction`; any other callable comes back as it is. ``.save(f)`` /
    :func:`save` write a trace of the most recent call (or of ``example_inputs``: a tensor, a
    tuple of inputs or PyTorch's list of tuples) that :func:`load` runs without the model's
    code, sizes symbolic. Python branches on tensor values can't be traced faithfully: save
    then raises instead of baking the branch in. (Decision where the API was silent: fiamma has
    no TorchScript compiler; a trace of a real call keeps every op and shape rule and is what
    the saved file can hold.)

    >>> import fiamma, fiamma.jit, fiamma.nn as nn, io
    >>> @fiamma.jit.script
    ... def scaled_relu(x, s: float):
    ...     return fiamma.relu(x) * s
    >>> scaled_relu(fiamma.tensor([-1.0, 2.0]), 3.0).tolist()
    [0.0, 6.0]
    >>> sm = fiamma.jit.script(nn.Sequential(nn.Linear(3, 2), nn.ReLU()))
    >>> y = sm(fiamma.ones(4, 3))
    >>> buf = io.BytesIO(); sm.save(buf); _ = buf.seek(0)
    >>> bool((fiamma.jit.load(buf)(fiamma.ones(4, 3)) == y).all())
    True
    """
    if obj is None:
        raise TypeError("fiamma.jit.script: expected a function or a module to script")
    if not callable(obj):
        raise TypeError(f"fiamma.jit.script: expected a function or a module, got "
                        f"{type(obj).__name__}")
    return script_object(obj, example_inputs)


def save(m, f, _extra_files=None):
    """Save a traced module (:func:`trace`), or a scripted module or function (:func:`script`,
    as a trace of its last call), to ``f`` (a path or a binary file object)."""
    if isinstance(m, (ScriptModule, ScriptFunction)):
        m = m._traced()
    if not isinstance(m, TracedModule):
        raise TypeError(f"fiamma.jit.save: expected a TracedModule or a scripted module, got "
                        f"{type(m).__name__}")
    if _extra_files:
        raise NotImplementedError("fiamma.jit.save: _extra_files is not supported")
    from fiamma.safetensors import save as st_save

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("graph.json", m.graph.to_json())
        z.writestr("name.txt", m._name)
        z.writestr("tensors.safetensors",
                   st_save({k: v.detach().cpu().contiguous() for k, v in m.graph.params.items()}))
    data = buf.getvalue()
    if isinstance(f, (str, os.PathLike)):
        tmp = os.fspath(f) + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, f)
    else:
        f.write(data)


def _not_ours(names):
    """Why a zip that is not a fiamma.jit file can't be loaded (PyTorch's archives)."""
    if any("/code/" in n or n.endswith("constants.pkl") for n in names):
        return ("it is a TorchScript archive written by PyTorch's torch.jit.save, whose "
                "compiled TorchScript code fiamma cannot run; in PyTorch, save the weights "
                "(torch.save(model.state_dict())) for fiamma.load, or export the model with "
                "torch.onnx.export")
    if any(n.endswith("data.pkl") for n in names):
        return "it is a checkpoint written by torch.save / fiamma.save: read it with fiamma.load"
    return None


def load(f, map_location=None):
    """Load a module saved with :func:`save` (a traced or scripted one) as a
    :class:`TracedModule`; runs only known ops. PyTorch's TorchScript archives (and
    ``torch.save`` checkpoints) are refused with a RuntimeError saying what they are.

    >>> import io, fiamma, fiamma.jit
    >>> buf = io.BytesIO()
    >>> fiamma.jit.trace(lambda x: x + 1, fiamma.zeros(2)).save(buf)
    >>> _ = buf.seek(0)
    >>> fiamma.jit.load(buf)(fiamma.ones(2)).tolist()
    [2.0, 2.0]
    """
    from fiamma.safetensors import load as st_load

    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            why = None if "graph.json" in z.namelist() else _not_ours(z.namelist())
            if why:
                raise RuntimeError(f"fiamma.jit.load: can't load this file: {why}")
            text = z.read("graph.json").decode()
            name = z.read("name.txt").decode() if "name.txt" in z.namelist() else "forward"
            tensors = st_load(z.read("tensors.safetensors"))
    except (zipfile.BadZipFile, KeyError) as e:
        raise RuntimeError(f"fiamma.jit.load: not a traced-module file ({e})") from None
    graph = Graph.from_json(text, tensors)
    for n in graph.nodes:
        if n.op not in OPS and "::" not in n.op:  # ns::op: a fiamma.library operator
            raise RuntimeError(f"fiamma.jit.load: the file uses op '{n.op}', which this "
                               "version of fiamma.jit cannot run")
    if map_location is not None:
        graph.params = {k: v.to(map_location) for k, v in graph.params.items()}
    return TracedModule(graph, name)


def __getattr__(name):
    if name == "isinstance":   # not a global here: it would hide the builtin from this module
        from fiamma.jit._checks import _jit_isinstance

        return _jit_isinstance
    raise AttributeError(f"module 'fiamma.jit' has no attribute {name!r}")
