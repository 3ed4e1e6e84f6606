"""Tracing: run a function once on example inputs and record every op that depends on them.

The tracer installs itself with ``fiamma.autograd_hook.set_trace_hook`` and marks the example
inputs, the module's parameters and buffers, and every op result with the ``requires_grad``
slot, so core's ops call it exactly where they would call the autograd recorder (nothing runs
on the no-grad fast paths). Tensors that do not depend on those are constants of the graph.
"""

import os
import sys
import warnings

import fiamma
from fiamma import Tensor, autograd_hook

from ._graph import Graph, Node, Value
from ._views import plan_view, step_shape

__all__ = ["TracerWarning", "TracingError", "trace_graph"]


class TracerWarning(Warning):
    """A value the trace baked in that may differ for other inputs (as torch.jit.TracerWarning)."""


class TracingError(RuntimeError):
    """The function did something a trace cannot record faithfully."""


# in-place ops recorded after the write whose result does not depend on the overwritten values
_OVERWRITE = ("masked_fill", "index_fill", "index_copy", "scatter", "index_put")

# kwargs of recorded ops that are saved for backward, not arguments of the computation
_SAVED = {"layer_norm": ("mean", "rstd"), "group_norm": ("mean", "rstd"),
          "rms_norm": ("rstd",)}
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
    return tuple(t._shape), str(t._dtype).split(".")[-1]


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

    def in_library(self):
        """Whether the code calling into a patched method is fiamma's own (not the model's)."""
        f = sys._getframe(2)
        fn = f.f_code.co_filename
        return fn.startswith(self.lib) and not any(u in fn for u in self.user)

    def source(self):
        f = sys._getframe(2)
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

    # ---- leaf modules (recorded as one op, their inside not traced) ----
    def leaf(self, op, run, inputs, attrs, params):
        prev = autograd_hook.set_grad_enabled_flag(False)
        try:
            out = run()
        finally:
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


# ---- TracerWarning on values read back to Python ----

_READBACK = {"item": ".item() reads a value",
             "tolist": ".tolist() reads values",
             "__bool__": "a tensor used as a Python bool (data-dependent control flow) is",
             "__int__": "int(tensor) reads a value", "__float__": "float(tensor) reads a value",
             "__index__": "a tensor used as an index reads a value"}


def _patch_readbacks(tracer):
    saved = {}
    for meth, what in _READBACK.items():
        orig = Tensor.__dict__.get(meth)
        if orig is None:
            continue
        saved[meth] = orig

        def wrapper(self, *a, _orig=orig, _what=what, **k):
            # fiamma's own ops read values for checks (bounds, sizes): only the model's reads
            # are the ones a trace bakes in
            if id(self) in tracer.vals and not tracer.in_library():
                warnings.warn(
                    f"{_what} of a traced tensor: the trace records it as a constant, so the "
                    f"traced function may not generalize to other inputs ({tracer.source()})",
                    TracerWarning, stacklevel=2)
            return _orig(self, *a, **k)

        setattr(Tensor, meth, wrapper)
    _patch_numpy(tracer, saved)
    return saved


def _patch_numpy(tracer, saved):
    """``.numpy()`` of a tensor the trace marked: core ops that compute through NumPy
    (linalg) keep working (their result is recorded by the op); model code reading values gets
    a TracerWarning."""
    orig = Tensor.__dict__.get("numpy")
    if orig is None:
        return

    def numpy(self, *a, **k):
        if id(self) in tracer.vals:
            if not tracer.in_library():
                warnings.warn(
                    "reading a traced tensor as NumPy bakes its values into the trace as "
                    f"constants ({tracer.source()})", TracerWarning, stacklevel=2)
            if id(self) in tracer.marked_ids:
                self.requires_grad = False
                try:
                    return orig(self, *a, **k)
                finally:
                    self.requires_grad = True
        return orig(self, *a, **k)

    saved["numpy"] = orig
    Tensor.numpy = numpy


def _unpatch(saved):
    for meth, orig in saved.items():
        setattr(Tensor, meth, orig)


def _unrecorded_targets():
    import fiamma.nn.functional as F

    out = [(Tensor, m, "cast") for m in ("to", "long", "int", "short", "bool", "byte", "char",
                                          "float", "double", "half", "type", "type_as")]
    out += [(Tensor, "detach", "detach"), (Tensor, "argmax", "argmax"),
            (Tensor, "argmin", "argmin"), (fiamma, "argmax", "argmax"),
            (fiamma, "argmin", "argmin"), (F, "one_hot", "one_hot")]
    return [(o, m, k) for o, m, k in out if hasattr(o, m)]


def _patch_unrecorded(tracer):
    saved = []
    for owner, meth, kind in _unrecorded_targets():
        own = owner.__dict__.get(meth) if isinstance(owner, type) else None
        orig = getattr(owner, meth)

        def wrapper(*args, _orig=orig, _kind=kind, **kwargs):
            out = _orig(*args, **kwargs)
            src = args[0] if args else None
            if (isinstance(out, Tensor) and isinstance(src, Tensor) and id(src) in tracer.vals
                    and id(out) not in tracer.vals
                    and autograd_hook.set_trace_hook(tracer) is tracer):
                tracer.unrecorded(_kind, src, out, args, kwargs)
            return out

        saved.append((owner, meth, own if isinstance(owner, type) else orig))
        setattr(owner, meth, wrapper)
    return saved


def _unpatch_unrecorded(saved):
    for owner, meth, orig in reversed(saved):
        if orig is None:
            delattr(owner, meth)
        else:
            setattr(owner, meth, orig)


def _patch_rnns(module, tracer):
    """nn.RNN/LSTM/GRU run as one recorded op (their weights as the op's parameters)."""
    import fiamma.nn as nn

    patched = []
    for m in module.modules():
        if not isinstance(m, nn.RNNBase):
            continue
        orig = m.forward

        def fwd(input, hx=None, _m=m, _orig=orig):
            if not isinstance(input, Tensor):
                raise TracingError(
                    f"fiamma.jit.trace: {type(_m).__name__} with a {type(input).__name__} input "
                    "(packed sequences) cannot be traced; pass a padded tensor")
            if _m.proj_size:
                raise TracingError(f"fiamma.jit.trace: {type(_m).__name__} with proj_size is "
                                   "not supported")
            hxs = [] if hx is None else ([hx] if isinstance(hx, Tensor) else list(hx))
            attrs = {"mode": _m.mode, "input_size": _m.input_size,
                     "hidden_size": _m.hidden_size, "num_layers": _m.num_layers,
                     "bias": bool(_m.bias), "batch_first": bool(_m.batch_first),
                     "bidirectional": bool(_m.bidirectional), "has_hx": hx is not None,
                     "param_names": [k for k, _ in _m.named_parameters()]}
            params = [p for _, p in _m.named_parameters()]
            return tracer.leaf("rnn", lambda: _orig(input, hx), [input] + hxs, attrs, params)

        m.forward = fwd
        patched.append(m)
    return patched


def flat_inputs(inputs):
    """The tensors of (possibly nested tuple/list) inputs, in order: the graph's inputs
    (as torch.onnx flattens ``(x, (h, c))``)."""
    out = []

    def walk(x, where):
        if isinstance(x, Tensor):
            out.append(x)
        elif isinstance(x, (tuple, list)):
            for j, y in enumerate(x):
                walk(y, f"{where}[{j}]")
        else:
            raise TypeError(f"fiamma.jit.trace: example inputs must be tensors or tuples/lists "
                            f"of them, input {where} is a {type(x).__name__}")

    for i, x in enumerate(inputs):
        walk(x, str(i))
    return out


def trace_graph(func, inputs, module=None):
    """Trace ``func(*inputs)``; returns (graph, eager outputs)."""
    g = Graph()
    tr = Tracer(g)
    named = {}
    if module is not None:
        for k, t in module.state_dict(keep_vars=True).items():
            named.setdefault(id(t), k)
    tr.names = named
    for i, x in enumerate(flat_inputs(inputs)):
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
    rnns = _patch_rnns(module, tr) if module is not None else []
    saved = _patch_readbacks(tr)
    unrec = _patch_unrecorded(tr)
    prev_tracer = autograd_hook.set_trace_hook(tr)
    prev_grad = autograd_hook.set_grad_enabled_flag(True)
    try:
        out = func(*inputs)
        flat = []
        _flatten_out(out, flat)
        g.out_spec = _spec(out, [0])
        for t in flat:
            g.outputs.append(tr.ref(t, "output"))
    finally:
        autograd_hook.set_grad_enabled_flag(prev_grad)
        autograd_hook.set_trace_hook(prev_tracer)
        _unpatch(saved)
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
