"""Tracing: run a function once on example inputs and record every op that depends on them.

The tracer installs itself with ``fiamma.autograd_hook.set_trace_hook`` and marks the example
inputs, the module's parameters and buffers, and every op result with the ``requires_grad``
slot, so core's ops call it exactly where they would call the autograd recorder (nothing runs
on the no-grad fast paths). Tensors that do not depend on those are constants of the graph.
"""

import os
import sys
import threading

import fiamma
from fiamma import Tensor, autograd_hook

from ._errors import TracerWarning, TracingError
from ._graph import Graph, Node, Value
from ._patches import (
    _patch_complex_views,
    _patch_leaf_functions,
    _patch_readbacks,
    _patch_rnns,
    _patch_unrecorded,
    _unpatch,
    _unpatch_unrecorded,
)
from ._symbolic import SymInt, patch_sizes, unpatch_sizes
from ._views import plan_view, step_shape

__all__ = ["TracerWarning", "TracingError", "trace_graph"]


# in-place ops recorded after the write whose result does not depend on the overwritten values
_OVERWRITE = ("masked_fill", "index_fill", "index_copy", "scatter", "index_put")

# kwargs of recorded ops that are saved for backward, not arguments of the computation
_SAVED = {"layer_norm": ("mean", "rstd"), "group_norm": ("mean", "rstd"),
          "rms_norm": ("rstd",), "nll_loss": ("_plain",)}
_VIEW_KEYS = ("shape", "stride", "offset")


def _library_dirs():
    import fiamma.autograd
    import fiamma.nn

    dirs = [os.path.dirname(fiamma.__file__) + os.sep]
    for m in (fiamma.nn, fiamma.autograd):
        dirs.append(os.path.dirname(m.__file__) + os.sep)
    dirs.append(os.path.dirname(os.path.dirname(__file__)) + os.sep)  # fiamma.jit, fiamma.onnx
    # core's directory holds fiamma/__init__.py; siblings installed beside it share it, so the
    # model code of fiamma.vision (a user of the library) is named explicitly as not library
    return tuple(dirs), (os.sep + "vision" + os.sep, os.sep + "audio" + os.sep)


def _shape_dtype(t):
    return tuple(t._shape), t._dtype.name


class Tracer:
    def __init__(self, graph):
        self.g = graph
        self.vals = {}          # id(tensor) -> value name
        self.keep = []          # every tensor seen, alive until the trace ends (ids stay unique)
        self.marked = []        # (tensor, previous requires_grad)
        self.marked_ids = set()  # the tensors whose requires_grad only the trace set
        self.by_storage = {}    # id(storage) -> traced tensors over it
        self.stale = set()      # values overwritten in place through another view
        self.consts = {}        # id(tensor) -> initializer name
        self.names = {}         # id(parameter/buffer) -> state_dict key
        self.n = 0
        self.lib, self.user = _library_dirs()
        self.thread = threading.get_ident()
        self.paused = 0         # > 0 while a leaf op runs its own forward
        self.export = None      # fiamma.export's state: value read-backs raise, not warn

    def here(self):
        """Whether the calling thread is the one being traced (the wrapped class methods are
        shared by every thread while a trace runs)."""
        return threading.get_ident() == self.thread

    # ---- values ----
    def new_name(self):
        self.n += 1
        return f"%{self.n}"

    def bind(self, t, name):
        self.vals[id(t)] = name
        self.keep.append(t)
        self.by_storage.setdefault(id(t._storage), []).append(t)
        self.g.meta[name] = _shape_dtype(t)
        if not t.requires_grad:
            self.marked.append((t, False))
            self.marked_ids.add(id(t))
            t.requires_grad = True

    def alias(self, t, name):
        """``t`` holds the same values as graph value ``name`` (a detach, a same-shape view)."""
        self.vals[id(t)] = name
        self.keep.append(t)
        self.by_storage.setdefault(id(t._storage), []).append(t)
        if not t.requires_grad:
            self.marked.append((t, False))
            self.marked_ids.add(id(t))
            t.requires_grad = True

    def unrecorded(self, kind, src, out, args, kwargs):
        """An op that core does not record for autograd (integer results, detach) ran on a
        traced tensor: record it here, so its result is not baked in as a constant."""
        name = self.vals[id(src)]
        if kind == "detach":
            self.alias(out, name)
            return
        if kind == "cast":
            if out._dtype is src._dtype and out._shape == src._shape:
                self.alias(out, name) if out._storage is src._storage else \
                    self._node("clone", [Value(name)], {}, out)
                return
            return self._node("to", [Value(name)], {"dtype": out._dtype}, out)
        if kind in ("argmax", "argmin"):
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            keep = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
            return self._node(kind, [Value(name)], {"dim": dim, "keepdim": bool(keep)}, out)
        if kind == "one_hot":
            return self._node("one_hot", [Value(name)], {"num_classes": out._shape[-1]}, out)
        raise AssertionError(kind)

    def _node(self, op, args, kw, out):
        oname = self.new_name()
        self.bind(out, oname)
        self.g.nodes.append(Node(op, args, kw, [oname], self.source()))

    def in_library(self, depth=2):
        """Whether the code calling into a patched method is fiamma's own (not the model's)."""
        f = sys._getframe(depth)
        fn = f.f_code.co_filename
        return fn.startswith(self.lib) and not any(u in fn for u in self.user)

    def source(self, depth=2):
        f = sys._getframe(depth)
        while f is not None:
            fn = f.f_code.co_filename
            if not fn.startswith(self.lib) or any(u in fn for u in self.user):
                return f"{os.path.basename(fn)}:{f.f_lineno}"
            f = f.f_back
        return ""

    def ref(self, x, op):
        if isinstance(x, Tensor):
            name = self.vals.get(id(x))
            if name is not None:
                if name in self.stale:
                    raise TracingError(
                        f"fiamma.jit.trace: {op} reads a tensor that an in-place op changed "
                        f"through another view of its memory ({self.source()}); a trace records "
                        "values, not memory: write it out of place")
                return Value(name)
            for k in self.by_storage.get(id(x._storage), ()):
                if k._shape == x._shape and k._stride == x._stride and k._offset == x._offset \
                        and k._dtype is x._dtype:
                    return Value(self.vals[id(k)])  # x.detach() / .data: the same value
            if id(x._storage) in self.by_storage:
                raise TracingError(
                    f"fiamma.jit.trace: {op} reads a view of a traced tensor made without a "
                    f"recorded op (detach()/.data then a view?) at {self.source()}")
            if x.grad_fn is not None:
                raise TracingError(
                    f"fiamma.jit.trace: {op} reads a tensor made by "
                    f"{type(x.grad_fn).__name__}, which the trace cannot see (a custom "
                    f"autograd.Function?) at {self.source()}")
            return Value(self.const(x))
        if isinstance(x, (tuple, list)):
            return type(x)(self.ref(y, op) for y in x)
        if isinstance(x, fiamma.device):
            return str(x)
        if isinstance(x, SymInt):
            return int(x)
        return x

    def const(self, t):
        name = self.consts.get(id(t))
        if name is None:
            name = self.names.get(id(t))
            value = t
            if name is None:
                # a tensor made by the forward: its value now (a later in-place write to it
                # must not reach back into the ops that read it before)
                name = f"const_{len(self.consts)}"
                prev = autograd_hook.set_grad_enabled_flag(False)
                try:
                    value = t.detach().clone()
                finally:
                    autograd_hook.set_grad_enabled_flag(prev)
            self.consts[id(t)] = name
            self.keep.append(t)
            self.g.params[name] = value
            self.g.meta[name] = _shape_dtype(t)
        return name

    # ---- the hook (fiamma.autograd_hook.set_trace_hook contract) ----
    def record(self, op, out, inputs, kwargs):
        if isinstance(out, Tensor) and id(out) in self.vals:
            return  # the op returned a tensor it was given
        if "in_stride" in kwargs or (op == "view" and all(k in kwargs for k in _VIEW_KEYS)):
            return self._view(op, out, inputs[0], kwargs)
        drop = _SAVED.get(op, ())
        if op == "batch_norm" and kwargs.get("training"):
            drop = ("mean", "invstd")  # the batch's statistics: computed in the graph
        args = [self.ref(x, op) for x in inputs]
        kw = {k: self.ref(v, op) for k, v in kwargs.items() if k not in drop}
        outs = out if isinstance(out, (tuple, list)) else (out,)
        names = []
        for o in outs:
            name = self.new_name()
            if isinstance(o, Tensor):
                self.bind(o, name)
            names.append(name)
        self.g.nodes.append(Node(op, args, kw, names, self.source()))

    def _view(self, op, out, x, kwargs):
        src = self.ref(x, op)
        steps = plan_view(x._shape, kwargs.get("in_stride", x._stride),
                          kwargs.get("in_offset", x._offset), out._shape, out._stride,
                          out._offset)
        if steps is None:
            raise TracingError(
                f"fiamma.jit.trace: the view made by {op} (shape {list(out._shape)}, strides "
                f"{list(out._stride)} over an input of shape {list(x._shape)}) is not a "
                f"permute/reshape/slice/expand of its input ({self.source()})")
        if not steps:
            self.alias(out, src.name)
            return
        where = self.source()
        cur = src
        shape, dt = self.g.meta[src.name]
        for sop, arg in steps:
            name = self.new_name()
            self.g.nodes.append(Node(sop, [cur], {"arg": arg}, [name], where))
            shape = step_shape(shape, sop, arg)
            self.g.meta[name] = (shape, dt)
            cur = Value(name)
        self.bind(out, cur.name)

    def record_inplace(self, op, out, inputs, kwargs):
        if op == "copy_" and len(inputs) >= 2:
            dst, src = inputs[0], inputs[1]
            name = self.new_name()
            self.g.nodes.append(Node("copy", [self.ref(src, op)],
                                     {"shape": tuple(dst._shape), "dtype": dst._dtype},
                                     [name], self.source()))
            self._rebind(dst, name)
            return
        base = op[:-1] if op.endswith("_") else op
        dst = inputs[0] if inputs else out
        if base in _OVERWRITE and not (kwargs.get("accumulate") or kwargs.get("reduce")) and \
                isinstance(dst, Tensor):
            # ops that overwrite some positions: f(old, ...) is f(new, ...), so a destination
            # the trace did not follow (read after the write) gives the same result
            name = self.new_name()
            self.g.nodes.append(Node(base, [self.ref(x, op) for x in inputs],
                                     {k: self.ref(v, op) for k, v in kwargs.items()},
                                     [name], self.source()))
            if id(dst) in self.vals:
                self._rebind(dst, name)
            else:
                self.bind(dst, name)
            return
        raise TracingError(f"fiamma.jit.trace: in-place {op} on a traced tensor is not "
                           f"supported ({self.source()}); write it out of place")

    def _rebind(self, t, name):
        for k in self.by_storage.get(id(t._storage), ()):
            if k is not t and id(k) in self.vals:
                self.stale.add(self.vals[id(k)])
        self.vals[id(t)] = name
        self.stale.discard(name)
        self.g.meta[name] = _shape_dtype(t)

    def check_inplace(self, t, op):
        pass

    def inplace(self, fn, name, self_, args, kwargs):
        r = fn(self_, *args, **kwargs)
        prev = autograd_hook.set_grad_enabled_flag(False)
        try:
            self_.copy_(r)
        finally:
            autograd_hook.set_grad_enabled_flag(prev)
        rname = self.vals.get(id(r))
        if rname is None:
            rname = self.const(r)
        self._rebind(self_, rname)

    def leaf_op(self, op, run, x):
        """``run()`` (a function of traced ``x``, not recorded by core) as one op ``op(x)``."""
        prev = autograd_hook.set_grad_enabled_flag(False)
        self.paused += 1
        try:
            out = run()
        finally:
            self.paused -= 1
            autograd_hook.set_grad_enabled_flag(prev)
        name = self.new_name()
        self.g.nodes.append(Node(op, [self.ref(x, op)], {}, [name], self.source()))
        if id(out) in self.vals:
            self.vals[id(out)] = name
            self.g.meta[name] = _shape_dtype(out)
        else:
            self.bind(out, name)
        return out

    def library_op(self, op, pos, kw, run):
        """A fiamma.library operator (``custom_op``, ``Library.define``) called while tracing:
        one node named ``ns::name.overload`` with the call's arguments, its inside not
        traced (PyTorch's traces record such an op as one node too)."""
        if not self.here() or self.paused:
            return run()
        prev = autograd_hook.set_grad_enabled_flag(False)
        self.paused += 1
        try:
            out = run()
        finally:
            self.paused -= 1
            autograd_hook.set_grad_enabled_flag(prev)
        name = f"{op.name().split('.')[0]}.{op._overloadname}"
        args = [self.ref(x, name) for x in pos]
        kwargs = {k: self.ref(v, name) for k, v in kw.items()}
        # the arguments it writes in place come out as new values of those tensors (the
        # graph's runner writes into copies), then its returns
        written = []
        for a, v in zip(op._schema.arguments, list(pos) + list(kw.values())):
            if a.is_write:
                _flatten(v, written)
        flat = []
        _flatten(out, flat)
        names = []
        for t in written:
            n = self.new_name()
            if id(t) in self.vals:
                self.vals[id(t)] = n
                self.g.meta[n] = _shape_dtype(t)
            else:
                self.bind(t, n)
            names.append(n)
        for o in flat:
            n = self.new_name()
            self.bind(o, n)
            names.append(n)
        if names:
            self.g.nodes.append(Node(name, args, kwargs, names, self.source()))
        return out

    # ---- leaf modules (recorded as one op, their inside not traced) ----
    def leaf(self, op, run, inputs, attrs, params):
        prev = autograd_hook.set_grad_enabled_flag(False)
        self.paused += 1
        try:
            out = run()
        finally:
            self.paused -= 1
            autograd_hook.set_grad_enabled_flag(prev)
        flat = []
        _flatten(out, flat)
        args = [self.ref(x, op) for x in inputs]
        kw = dict(attrs)
        kw["params"] = [self.ref(p, op) for p in params]
        names = []
        for o in flat:
            name = self.new_name()
            self.bind(o, name)
            names.append(name)
        self.g.nodes.append(Node(op, args, kw, names, self.source()))
        return out


def _flatten(x, out):
    if isinstance(x, Tensor):
        out.append(x)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _flatten(y, out)
    elif x is not None:
        raise TracingError(f"fiamma.jit.trace: outputs must be tensors or tuples/lists of "
                           f"them, got {type(x).__name__}")


def _spec(x, counter):
    if isinstance(x, Tensor):
        counter[0] += 1
        return counter[0] - 1
    if isinstance(x, tuple):
        return tuple(_spec(y, counter) for y in x)
    if isinstance(x, list):
        return [_spec(y, counter) for y in x]
    if isinstance(x, dict):
        return {k: _spec(v, counter) for k, v in x.items()}
    if x is None:
        return None
    raise TracingError(f"fiamma.jit.trace: outputs must be tensors or tuples/lists/dicts of "
                       f"them, got {type(x).__name__}")


def _flatten_out(x, out):
    if isinstance(x, dict):
        for v in x.values():
            _flatten_out(v, out)
    elif isinstance(x, (tuple, list)):
        for v in x:
            _flatten_out(v, out)
    elif isinstance(x, Tensor):
        out.append(x)


def input_leaves(inputs, kwargs=None):
    """``[(path, tensor), ...]``: the tensors of the positional inputs (tuples, lists and dicts
    nest; dicts in insertion order) then of the keyword inputs, in order. A path is a tuple of
    positions and dict keys, keyword inputs starting with their name (as torch.onnx flattens
    ``(x, (h, c))`` and ``kwargs=``)."""
    out = []

    def walk(x, path):
        if isinstance(x, Tensor):
            out.append((path, x))
        elif isinstance(x, (tuple, list)):
            for j, y in enumerate(x):
                walk(y, path + (j,))
        elif isinstance(x, dict):
            for k, y in x.items():
                walk(y, path + (str(k),))
        else:
            where = "".join(f"[{p!r}]" for p in path)
            raise TypeError(f"fiamma.jit.trace: inputs must be tensors or tuples/lists/dicts "
                            f"of them, input {where} is a {type(x).__name__}")

    for i, x in enumerate(inputs):
        walk(x, (i,))
    for k, x in (kwargs or {}).items():
        walk(x, (str(k),))
    return out


def flat_inputs(inputs, kwargs=None):
    """The tensors of (possibly nested) inputs, in order: the graph's inputs."""
    return [t for _, t in input_leaves(inputs, kwargs)]


def rebuild_inputs(args, kwargs, flat):
    """``args``/``kwargs`` with their tensors replaced, in order, by those of ``flat``."""
    it = iter(flat)

    def nest(x):
        if isinstance(x, Tensor):
            return next(it)
        if isinstance(x, dict):
            return {k: nest(v) for k, v in x.items()}
        if isinstance(x, (tuple, list)):
            return type(x)(nest(v) for v in x)
        return x

    return nest(tuple(args)), nest(dict(kwargs or {}))


def _held_traces(module):
    """(attribute path, TracedModule) for every traced module kept as an attribute of
    ``module`` or of its submodules."""
    from fiamma.jit import TracedModule

    out = []
    for prefix, m in module.named_modules():
        for name, v in vars(m).items():
            if isinstance(v, TracedModule):
                out.append((f"{prefix}.{name}" if prefix else name, v))
    return out


def trace_graph(func, inputs, module=None, kwargs=None, export=None):
    """Trace ``func(*inputs, **kwargs)``; returns (graph, eager outputs).

    ``export`` (fiamma.export's trace state): model code reading a traced tensor's values
    raises instead of warning, and ``export.names`` (id -> name) names more tensors than the
    state_dict (non-persistent buffers, tensor attributes)."""
    g = Graph()
    tr = Tracer(g)
    tr.export = export
    named = dict(getattr(export, "names", None) or {})
    if module is not None:
        for k, t in module.state_dict(keep_vars=True).items():
            named.setdefault(id(t), k)
    tr.names = named
    kwargs = dict(kwargs or {})
    g.kwarg_names = list(kwargs)
    for i, x in enumerate(flat_inputs(inputs, kwargs)):
        name = f"input_{i}"
        if id(x) in tr.vals:
            raise ValueError("fiamma.jit.trace: the same tensor is given as two inputs")
        g.inputs.append(name)
        tr.bind(x, name)
    if module is not None:
        for k, t in module.state_dict(keep_vars=True).items():
            if id(t) not in tr.vals and isinstance(t, Tensor):
                g.params[k] = t
                tr.bind(t, k)
        # traced modules held by the model (``self.cell = jit.trace(...)``): not submodules,
        # so their initializers are bound here, under the attribute's path, as PyTorch's
        # traced submodules' parameters are the model's
        for path, tm in _held_traces(module):
            for k, t in tm.graph.params.items():
                if id(t) not in tr.vals and isinstance(t, Tensor):
                    g.params[f"{path}.{k}"] = t
                    tr.bind(t, f"{path}.{k}")
    rnns = _patch_rnns(module, tr) if module is not None else []
    saved = _patch_readbacks(tr)
    unrec = _patch_unrecorded(tr) + _patch_leaf_functions(tr) + _patch_complex_views(tr)
    sizes = patch_sizes(tr)
    prev_tracer = autograd_hook.set_trace_hook(tr)
    prev_grad = autograd_hook.set_grad_enabled_flag(True)
    try:
        out = func(*inputs, **kwargs)
        flat = []
        _flatten_out(out, flat)
        g.out_spec = _spec(out, [0])
        for t in flat:
            g.outputs.append(tr.ref(t, "output"))
    finally:
        autograd_hook.set_grad_enabled_flag(prev_grad)
        autograd_hook.set_trace_hook(prev_tracer)
        _unpatch(saved)
        unpatch_sizes(sizes)
        _unpatch_unrecorded(unrec)
        for m in rnns:
            del m.forward
        for t, flag in tr.marked:
            t.requires_grad = flag
    g.outputs = [v.name for v in g.outputs]
    _prune(g)
    return g, out


def _prune(g):
    """Drop nodes no output depends on (and constants nothing reads)."""
    need = set(g.outputs)
    kept = []
    for n in reversed(g.nodes):
        if any(o in need for o in n.outputs):
            kept.append(n)
            need.update(n.inputs())
    g.nodes = kept[::-1]
    g.params = {k: v for k, v in g.params.items() if k in need or not k.startswith("const_")}
