"""Graph nodes: one per differentiable result (its ``grad_fn``), no global tape.

A node holds the edges to the nodes of its inputs (``next_functions``), what its formula saved,
and the hooks registered on it. Nodes refer only to their inputs' nodes, never to their outputs,
so a graph is freed as soon as the tensors that reach it die. Saved outputs are kept as detached
aliases (no reference back to the node) and re-attached to the node when unpacked under
``create_graph``.
"""

import itertools
import threading
import traceback
import weakref

from fiamma import Tensor
from fiamma.autograd import _formulas as F
from fiamma.autograd_hook import get_meta, set_meta, version

_new = object.__new__
_hook_ids = itertools.count()


class RemovableHandle:
    """Returned by ``register_hook`` & co; ``remove()`` unregisters the hook."""

    __slots__ = ("_table", "id")

    def __init__(self, table):
        self.id = next(_hook_ids)
        self._table = weakref.ref(table) if isinstance(table, _HookDict) else (lambda: table)

    def remove(self):
        table = self._table()
        if table is not None:
            table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


class _HookDict(dict):
    """An ordered {handle id: hook} table (weak-referenceable)."""

    __slots__ = ("__weakref__",)


def add_hook(table, fn):
    h = RemovableHandle(table)
    table[h.id] = fn
    return h


# ---- saved-tensor hooks (fiamma.autograd.graph.saved_tensors_hooks) ----------------------------

class _SavedHooks(threading.local):
    stack = ()


saved_hooks = _SavedHooks()
hooks_active = [0]       # contexts open in any thread: the record path checks only this
PACKED = object()        # Node._versions when the saved inputs went through pack hooks
_NOT_PACKED = object()


def pack_saved(node):
    """Replace a node's saved inputs by what the innermost pack hook returns."""
    stack = saved_hooks.stack
    if not stack:
        return
    pack, unpack = stack[-1]
    ins = node._inputs
    # the hooks are off while a pack hook runs: fiamma saves a tensor for ops where PyTorch
    # saves none (``x * 4`` keeps ``x``), so a pack hook computing with its argument would
    # otherwise pack its own results without end
    saved_hooks.stack = ()
    try:
        packed = tuple(pack(x) if isinstance(x, Tensor) else _NOT_PACKED for x in ins)
    finally:
        saved_hooks.stack = stack
    node._packed = (unpack, packed)
    node._inputs = tuple(None if isinstance(x, Tensor) else x for x in ins)
    node._versions = PACKED


def pack_saved_output(node):
    """Replace a node's saved output alias(es) by what the innermost pack hook returns."""
    stack = saved_hooks.stack
    if not stack:
        return
    pack, unpack = stack[-1]
    out = node._out
    saved_hooks.stack = ()  # as in pack_saved
    try:
        packed = pack(out) if isinstance(out, Tensor) else tuple(
            pack(o) if o is not None else _NOT_PACKED for o in out)
    finally:
        saved_hooks.stack = stack
    node._outpacked = (unpack, packed)
    node._out = PACKED


class Meta:
    """Per-tensor autograd data (``fiamma.autograd_hook.get_meta``; None for most tensors)."""

    __slots__ = ("output_nr", "acc", "hooks", "post_hooks", "base", "vver", "retains")

    def __init__(self, output_nr=0):
        self.output_nr = output_nr
        self.acc = None
        self.hooks = None
        self.post_hooks = None
        self.base = None      # the base tensor of a view that requires grad
        self.vver = 0         # the storage version when the view's grad_fn was set
        self.retains = False


class _FrozenKwargs(dict):
    """The empty keyword arguments shared by the nodes of ops recorded without any (read-only):
    one object instead of a dict per node."""

    __slots__ = ()

    def _read_only(self, *args, **kwargs):
        raise TypeError("a node's recorded kwargs are read-only")

    __setitem__ = __delitem__ = __ior__ = update = pop = popitem = clear = setdefault = \
        _read_only


NO_KWARGS = _FrozenKwargs()


def meta_of(t):
    """``t``'s Meta, created on first use (on the recording path: a direct read of the ``_ag``
    slot, one of core's documented hot slots)."""
    m = t._ag
    if m is None:
        m = t._ag = Meta()
    return m


def _version_error(t, saved_version):
    fn = t.grad_fn
    what = f"[fiamma.{t.type().split('.')[-1]} {list(t.shape)}]"
    if fn is not None:
        m = get_meta(t)
        what += f", which is output {0 if m is None else m.output_nr} of {fn.name()},"
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: {what} is at version {version(t)}; expected version {saved_version} "
        "instead. Hint: enable anomaly detection to find the operation that failed to compute "
        "its gradient, with fiamma.autograd.set_detect_anomaly(True).")


def freed_error():
    return RuntimeError(
        "Trying to backward through the graph a second time (or directly access saved tensors "
        "after they have already been freed). Saved intermediate values of the graph are freed "
        "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
        "backward through the graph a second time or if you need to access saved tensors after "
        "calling backward.")


# PyTorch's argument names of the saved inputs, for ``grad_fn._saved_<name>``: the first
# argument is ``self`` for most ops and ``input`` for the layers' functionals; the second as
# PyTorch names it for the binary ops below (others expose only the first)
_SECOND_ARG = {
    "mul": "other", "div": "other", "true_divide": "other", "sub": "other", "add": "other",
    "maximum": "other", "minimum": "other", "fmax": "other", "fmin": "other", "atan2": "other",
    "hypot": "other", "fmod": "other", "remainder": "other", "xlogy": "other",
    "copysign": "other", "matmul": "other", "pow": "exponent", "mm": "mat2", "bmm": "mat2",
    "dot": "tensor", "mv": "vec", "outer": "vec2",
}
_INPUT_FIRST = ("linear", "batch_norm", "layer_norm", "group_norm", "instance_norm", "conv")


def _saved_arg_names(op):
    first = "input" if op.startswith(_INPUT_FIRST) else "self"
    second = _SECOND_ARG.get(op)
    return (first,) if second is None else (first, second)


class Node:
    """A backward function (``tensor.grad_fn``): ``name()``, ``next_functions``,
    ``metadata``, ``register_hook``, ``register_prehook``. Formulas receive it as ``ctx``."""

    # what every node sets; the rarely used fields are class defaults overridden in the
    # instance dict (created only when one is set), which keeps recording cheap. The edges to
    # the inputs' nodes (``_next``, one per input, None where no gradient flows) live in the
    # node's own slots: ``_e0`` and ``_e1`` hold the first two (None past the inputs), and
    # ``_ex`` is None for a node of one or two inputs (their number is ``len(_nrs)``), else the
    # tuple of all of them. A tuple per node would be a second GC-tracked object that outlives
    # the forward pass: each one brings the next full collection (a traversal of the whole
    # Python heap) closer. The inputs' shapes (``_shapes``) are kept the same way (``_s0``,
    # ``_s1``, ``_sx``): a tuple of them is untracked at its first collection but its
    # allocation still advances the young generation's counter.
    __slots__ = ("_e0", "_e1", "_ex", "_s0", "_s1", "_sx", "_nrs", "_inputs", "_versions",
                 "_kwargs", "_dtypes", "__dict__", "__weakref__")

    _op = ""
    _formula = None
    _save = "none"
    _unsaved = ()      # input positions the formula does not save (derivative(unsaved=...))
    _unsaved_out = ()  # output positions it does not save (derivative(unsaved_outputs=...))
    _nout = 1          # number of outputs
    _out = None        # saved output alias(es)
    _outver = None     # their versions
    _freed = False     # saved tensors released by a backward without retain_graph
    _hooked = False    # any of _pre, _tpre, _retain set
    # whether the engine may run the node inline (execute): one output, a formula, no hooks of
    # any kind; True on the formula classes, cleared on a node when a hook is registered or it
    # gets several outputs (one attribute read per node instead of four)
    _inline = False
    _pre = None        # node pre-hooks
    _post = None       # node post-hooks
    _tpre = None       # {output_nr: tensor hooks}
    _retain = None     # {output_nr: weakref to a tensor that retains its grad}
    _meta = None       # metadata dict
    _trace = None      # forward stack (anomaly mode)

    def _init_empty(self):
        self._next = ()
        self._nrs = ()
        self._inputs = ()
        self._versions = None
        self._kwargs = {}
        self._shapes = ()
        self._dtypes = ()

    @property
    def _next(self):
        """The edges as a tuple, one per input (built on each read for one or two inputs)."""
        ex = self._ex
        if ex is not None:
            return ex
        return (self._e0, self._e1) if len(self._nrs) == 2 else (self._e0,)

    @_next.setter
    def _next(self, edges):
        edges = tuple(edges)
        n = len(edges)
        self._e0 = edges[0] if n else None
        self._e1 = edges[1] if n > 1 else None
        self._ex = None if n == 1 or n == 2 else edges

    @property
    def _shapes(self):
        """The inputs' shapes as a tuple, one per input (None for a non-tensor input)."""
        sx = self._sx
        if sx is not None:
            return sx
        return (self._s0, self._s1) if len(self._nrs) == 2 else (self._s0,)

    @_shapes.setter
    def _shapes(self, shapes):
        shapes = tuple(shapes)
        n = len(shapes)
        self._s0 = shapes[0] if n else None
        self._s1 = shapes[1] if n > 1 else None
        self._sx = None if n == 1 or n == 2 else shapes

    def _needs(self, i):
        """Whether input ``i`` needs a gradient (``needs_input_grad[i]`` without the tuple;
        False past the inputs)."""
        ex = self._ex
        if ex is None:
            return (self._e0 if i == 0 else self._e1 if i == 1 else None) is not None
        return i < len(ex) and ex[i] is not None

    # ---- public Node API ----------------------------------------------------------------------
    def name(self):
        f = _DISPLAY.get(self._op)
        if f is not None:
            n = f(self)
            if n is not None:
                return n
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple((n, nr) for n, nr in zip(self._next, self._nrs))

    @property
    def metadata(self):
        if self._meta is None:
            self._meta = {}
        return self._meta

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after this node ran; may return new grad_inputs."""
        if self._post is None:
            self._post = _HookDict()
            self._inline = False
        return add_hook(self._post, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before this node runs; may return new grad_outputs."""
        if self._pre is None:
            self._pre = _HookDict()
            self._hooked = True
            self._inline = False
        return add_hook(self._pre, fn)

    def __repr__(self):
        return f"<{self.name()} object at {id(self):#x}>"

    def __getattr__(self, name):
        # PyTorch's ``grad_fn._saved_<arg>`` / ``_saved_result``: what the node saved for
        # backward, by the argument's name in PyTorch's signature (only reached when ordinary
        # lookup fails, so the recording path never comes here)
        if name.startswith("_saved_"):
            arg = name[7:]
            if arg == "result" and (self._out is not None or self._save in ("output", "both")):
                return self.output
            if self._save in ("inputs", "both"):
                names = _saved_arg_names(self._op)
                if arg in names:
                    i = names.index(arg)
                    ins = self.inputs
                    if i < len(ins):
                        return ins[i]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __call__(self, *grads):
        return self._apply(list(grads))

    # ---- ctx API used by the formulas --------------------------------------------------------
    @property
    def op(self):
        return self._op

    @property
    def kwargs(self):
        return self._kwargs

    @property
    def input_shapes(self):
        return self._shapes

    @property
    def input_dtypes(self):
        return self._dtypes

    @property
    def needs_input_grad(self):
        return tuple([n is not None for n in self._next])

    @property
    def inputs(self):
        vs = self._versions
        if vs is None:
            return self._inputs
        if self._freed:
            raise freed_error()
        if vs is PACKED:
            unpack, packed = self._packed
            return tuple(unpack(p) if p is not _NOT_PACKED else x
                         for p, x in zip(packed, self._inputs))
        ins = self._inputs
        # per saved tensor of every node a backward runs: ``_storage.version`` read directly
        # (a documented hot slot; the accessor is fiamma.autograd_hook.version)
        for i, v in enumerate(vs):
            if v is not None and ins[i]._storage.version != v:
                raise _version_error(ins[i], v)
        return ins

    def _input(self, i):
        """The saved input ``i`` alone: only its version is checked, so a formula that needs
        one operand for the gradient it computes (``mul``: the other factor) does not refuse a
        backward when an operand it does not read was modified in place (PyTorch saves only
        what the needed gradients read)."""
        vs = self._versions
        if vs is None:
            return self._inputs[i]
        if self._freed:
            raise freed_error()
        x = self._inputs[i]
        if vs is PACKED:
            unpack, packed = self._packed
            return unpack(packed[i]) if packed[i] is not _NOT_PACKED else x
        v = vs[i]
        if v is not None and x._storage.version != v:
            raise _version_error(x, v)
        return x

    @property
    def output(self):
        out = self._out
        if out is None:
            if self._freed:
                raise freed_error()
            raise RuntimeError(f"{self.name()}: the output of {self._op!r} was not saved "
                               "(register its formula with save='output' or 'both')")
        from fiamma.autograd_hook import is_grad_enabled

        attach = is_grad_enabled()
        if out is PACKED:  # through saved_tensors_hooks: no version check, as for inputs
            unpack, packed = self._outpacked
            if not isinstance(packed, tuple):
                o = unpack(packed)
                return self._attach(o, 0) if attach else o
            res = [unpack(p) if p is not _NOT_PACKED else None for p in packed]
            return tuple(self._attach(o, i) if attach and o is not None else o
                         for i, o in enumerate(res))
        # per node a backward runs: ``_storage.version`` read directly (a documented hot slot)
        if isinstance(out, Tensor):
            if out._storage.version != self._outver:
                raise _version_error(out, self._outver)
            return self._attach(out, 0) if attach else out
        res = []
        for i, o in enumerate(out):
            if o is not None and o._storage.version != self._outver[i]:
                raise _version_error(o, self._outver[i])
            res.append(self._attach(o, i) if attach and o is not None else o)
        return tuple(res)

    def _attach(self, alias, nr):
        if alias._dtype._kind < 2:
            return alias
        t = alias.detach()
        t.requires_grad = True
        t.grad_fn = self
        if nr:
            set_meta(t, Meta(nr))
        return t

    def _release(self):
        """Free what was saved for backward (after a backward without retain_graph); a node
        that saved nothing has nothing to free (and gets no instance dict for the flag)."""
        if self._versions is None and self._out is None:
            return
        self._freed = True
        if self._versions is not None:
            self._inputs = None
            if self._versions is PACKED:
                self._packed = None
        if self._out is not None:
            if self._out is PACKED:
                self._outpacked = None
            self._out = None

    # ---- running -----------------------------------------------------------------------------
    def _prehooks(self, gs):
        """Tensor hooks and retain_grad of this node's outputs, then the node's pre-hooks."""
        if self._tpre is not None:
            for nr, table in self._tpre.items():
                g = gs[nr]
                if g is None:
                    continue
                for h in list(table.values()):
                    r = h(g)
                    if r is not None:
                        g = r
                gs[nr] = g
        if self._retain is not None:
            from fiamma.autograd._engine import retain_store

            for nr, ref in self._retain.items():
                t = ref()
                if t is not None and gs[nr] is not None:
                    retain_store(t, gs[nr])
        if self._pre is not None:
            for h in list(self._pre.values()):
                r = h(tuple(gs))
                if r is not None:
                    gs[:] = list(r)
        return gs

    def _backward(self, grad):
        """Run the formula: one gradient (or None) per input position."""
        fn = self._formula
        if fn is None:
            raise RuntimeError(f"derivative for {self._op} is not implemented "
                               f"(no formula registered for {self._op!r}; grad_fn "
                               f"{self.name()})")
        res = fn(self, grad)
        if type(res) is not tuple:
            res = tuple(res) if isinstance(res, list) else (res,)
        return res

    def _check_count(self, res):
        """A formula's gradients padded with None to one per input (more is an error)."""
        nxt = self._next
        if len(res) < len(nxt):
            return tuple(res) + (None,) * (len(nxt) - len(res))
        raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                           f"gradients (expected {len(nxt)}, got {len(res)})")

    def _apply(self, gs, hooks_done=False):
        """Gradients for this node's outputs (list, None where absent) -> one per input."""
        if self._hooked and not hooks_done:
            gs = self._prehooks(gs)
        if self._nout == 1:
            grad = gs[0]
            if grad is None:
                return (None,) * len(self._next)
        else:
            if all(g is None for g in gs):
                return (None,) * len(self._next)
            grad = tuple(gs)
        fn = self._formula  # _backward, inlined: this runs once per node of every backward
        if fn is None:
            res = self._backward(grad)
        else:
            res = fn(self, grad)
            if type(res) is not tuple:
                res = tuple(res) if isinstance(res, list) else (res,)
        nxt = self._next
        if len(res) != len(nxt):
            res = self._check_count(res)
        out = []
        for g, e, shape, dt in zip(res, nxt, self._shapes, self._dtypes):
            if g is None or e is None:
                out.append(None)
                continue
            if g.__class__ is not Tensor and not isinstance(g, Tensor):
                raise TypeError(f"{self.name()}: gradient {len(out)} must be a Tensor or None, "
                                f"got {type(g).__name__}")
            if g._shape != shape:  # per gradient: the documented hot slot, read directly
                g = F.sum_to_shape(g, shape)
            if g._dtype is not dt:
                g = g.real if g._dtype._kind == 3 and dt._kind != 3 else g
                g = g.to(dt)
            out.append(g)
        if self._post is not None:
            for h in list(self._post.values()):
                r = h(tuple(out), tuple(gs))
                if r is not None:
                    out = list(r)
        return out


def _conj(x):
    if isinstance(x, Tensor):
        return x.conj() if x._dtype._kind == 3 else x
    if isinstance(x, complex):
        return x.conjugate()
    if isinstance(x, (tuple, list)) and any(isinstance(v, Tensor) for v in x):
        return type(x)(_conj(v) for v in x)
    return x


class ComplexNode(Node):
    """The node of an op with a complex result. Without a complex formula of its own the op's
    real formula runs on the saved tensors conjugated: for ``f`` holomorphic with real Taylor
    coefficients, ``grad * f'(conj z) = grad * conj(f'(z))``, PyTorch's convention (the
    gradient is the conjugate Wirtinger derivative); a real input receiving a complex gradient
    keeps its real part."""

    __slots__ = ()
    _conj_saved = False

    @property
    def inputs(self):
        ins = Node.inputs.fget(self)
        if self._conj_saved and ins is not None:
            ins = tuple(_conj(x) for x in ins)
        return ins

    def _input(self, i):
        # one saved input, conjugated as ``inputs`` gives them (mul/div read theirs this way)
        x = Node._input(self, i)
        return _conj(x) if self._conj_saved else x

    @property
    def output(self):
        out = Node.output.fget(self)
        if self._conj_saved:
            out = _conj(out)
        return out


class AccumulateGrad(Node):
    """The node of a leaf tensor: adds the incoming gradient into ``tensor.grad``."""

    __slots__ = ("_var",)

    @property
    def variable(self):
        return self._var()


def new_accumulate(t):
    a = _new(AccumulateGrad)
    a._init_empty()
    a._var = weakref.ref(t)
    a._next = ()
    return a


def capture_trace():
    return traceback.format_stack()[:-3]


# ---- PyTorch's node names where one fiamma op stands for several of PyTorch's ---------------
# name() (what a tensor's repr and grad_fn.name() show) of a node whose op records several
# PyTorch overloads or aten ops: the name PyTorch gives the same call, from the recorded
# keyword arguments and input shapes (the class name stays the op's); basic indexing and
# stack by a private kwarg core records beside the op (``_key``, ``_pt``).

def _full_reduction(node):
    dim = node._kwargs.get("dim")
    s = node._s0 if node._ex is None else node._sx[0]
    return s is not None and isinstance(dim, tuple) and len(dim) == len(s)


def _reduction_name(base):
    # sum()/mean()/prod() are PyTorch's overload 0, the dim= forms overload 1
    return lambda n: f"{base}Backward{0 if _full_reduction(n) else 1}"


def _extremum_name(base):
    # max()/min() (all elements) are overload 1, max(dim)/min(dim) overload 0
    return lambda n: f"{base}Backward{1 if _full_reduction(n) else 0}"


def _scalar_pattern(node):
    return tuple(s is None for s in node._shapes)


def _matmul_name(node):
    sh = node._shapes
    if len(sh) != 2 or sh[0] is None or sh[1] is None:
        return None
    a, b = len(sh[0]), len(sh[1])
    if a == 2 and b == 2:
        return "MmBackward0"
    if a == 2 and b == 1:
        return "MvBackward0"
    if a == 1 and b == 1:
        return "DotBackward0"
    if a == 1 and b == 2:
        return "SqueezeBackward4"
    if a >= 3 or (b >= 3 and a == 1):
        return "UnsafeViewBackward0"
    return None


def _index_name(node):
    """PyTorch's node for basic indexing by the recorded key: PyTorch applies the items left to
    right (int: select, slice: slice, None: unsqueeze) and the last one names the node; a
    slice over a whole dimension is skipped (but ``x[:]`` alone is a slice), and a key with no
    effective item is an alias."""
    key = node._kwargs.get("_key", Ellipsis)
    shape = node._s0 if node._ex is None else node._sx[0]
    if type(key) is not tuple:
        if type(key) is slice:
            return "SliceBackward0"
        key = (key,)
    nd = len(shape or ())
    rest = sum(1 for k in key if k is not None and k is not Ellipsis)
    name = "Alias"
    d = 0
    for k in key:
        if k is None:
            name = "Unsqueeze"
        elif k is Ellipsis:
            d += max(nd - rest, 0)
        elif type(k) is slice:
            n = shape[d] if d < nd else 0
            start, stop, step = k.indices(n)
            if not (start == 0 and stop >= n and step == 1):
                name = "Slice"
            d += 1
        else:
            name = "Select"
            d += 1
    return name + "Backward0"


def _const(name):
    return lambda n: name


def _adaptive_avg_name(d):
    # an output of all ones is PyTorch's mean over the spatial dims (MeanBackward1)
    def name(n):
        out = n._kwargs.get("output_size")
        if isinstance(out, tuple) and all(o == 1 for o in out):
            return "MeanBackward1"
        return f"AdaptiveAvgPool{d}DBackward0"
    return name


_UPSAMPLE = {"nearest": "UpsampleNearest{}D", "nearest-exact": "UpsampleNearestExact{}D",
             "cubic": "UpsampleBicubic{}D"}
_LINEAR = {1: "UpsampleLinear1D", 2: "UpsampleBilinear2D", 3: "UpsampleTrilinear3D"}


def _upsample_name(node):
    kw = node._kwargs
    size = kw.get("size")
    if not isinstance(size, tuple):
        return None
    d = len(size)
    mode = kw.get("mode")
    base = _LINEAR.get(d) if mode == "linear" else _UPSAMPLE.get(mode, "").format(d)
    return base + "Backward0" if base else None


def _pad_name(node):
    kw = node._kwargs
    mode = kw.get("mode")
    if mode == "constant":
        return "ConstantPadNdBackward0"
    d = len(kw.get("pad") or ()) // 2
    if mode == "reflect":
        return f"ReflectionPad{d}DBackward0"
    if mode == "replicate":
        return f"ReplicationPad{d}DBackward0"
    if mode == "circular":
        return "torch::autograd::CopySlices"
    return None


def _nll_name(node):
    """PyTorch's nll_loss node: NllLossBackward0 for (C,)/(N, C) inputs, the 2-d kernel's
    NllLoss2DBackward0 for (N, C, H, W); other spatial ranks are viewed to 4-d and back, so
    the last node is a view for ``reduction='none'``."""
    shape = node._s0 if node._ex is None else node._sx[0]
    nd = len(shape or ())
    if nd <= 2:
        return "NllLossBackward0"
    if nd != 4 and node._kwargs.get("reduction") == "none":
        return "ViewBackward0"
    return "NllLoss2DBackward0"


_DISPLAY = {
    # the native kernels' nodes
    "layer_norm": _const("NativeLayerNormBackward0"),
    "batch_norm": _const("NativeBatchNormBackward0"),
    "group_norm": _const("NativeGroupNormBackward0"),
    "max_pool2d": _const("MaxPool2DWithIndicesBackward0"),
    "max_pool3d": _const("MaxPool3DWithIndicesBackward0"),
    "avg_pool2d": _const("AvgPool2DBackward0"),
    "avg_pool3d": _const("AvgPool3DBackward0"),
    "adaptive_avg_pool2d": _adaptive_avg_name(2),
    "adaptive_avg_pool3d": _adaptive_avg_name(3),
    "adaptive_max_pool2d": _const("AdaptiveMaxPool2DBackward0"),
    "adaptive_max_pool3d": _const("AdaptiveMaxPool3DBackward0"),
    # PyTorch's 1-d pools are the 2-d kernels on an unsqueezed input, squeezed back
    "max_pool1d": _const("SqueezeBackward1"),
    "avg_pool1d": _const("SqueezeBackward1"),
    "adaptive_avg_pool1d": _const("SqueezeBackward1"),
    "adaptive_max_pool1d": _const("SqueezeBackward1"),
    # log_softmax then nll_loss in PyTorch (its last node); label smoothing adds a term
    "cross_entropy_loss": lambda n: ("AddBackward0" if n._kwargs.get("label_smoothing")
                                     else "NllLossBackward0"),
    "nll_loss": _nll_name,
    "squeeze": lambda n: f"SqueezeBackward{n._kwargs.get('_pt', 0)}",
    "upsample": _upsample_name,
    "pad": _pad_name,
    "getitem": _index_name,
    "cat": lambda n: "StackBackward0" if n._kwargs.get("_pt") == "Stack" else None,
    "to": lambda n: "ToCopyBackward0",
    "norm": lambda n: "LinalgVectorNormBackward0",
    "sum": _reduction_name("Sum"),
    "mean": _reduction_name("Mean"),
    "prod": _reduction_name("Prod"),
    "max": _extremum_name("Max"),
    "min": _extremum_name("Min"),
    "clamp": lambda n: "ClampBackward1" if _scalar_pattern(n)[1:] == (True, True) else None,
    "sub": lambda n: "RsubBackward1" if _scalar_pattern(n)[:1] == (True,) else None,
    "pow": lambda n: {(True, False): "PowBackward2", (False, False): "PowBackward1"}.get(
        _scalar_pattern(n)),
    "matmul": _matmul_name,
}
