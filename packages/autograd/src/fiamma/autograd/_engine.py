"""Recording (called by core's ops) and the backward executor.

``record`` makes one Node per differentiable result: edges to the inputs' nodes, what the
op's formula asks to save, and the inputs' shapes and dtypes. ``execute`` runs a graph
backwards in a topological order found by dependency counts, summing the gradients that reach
each node, then accumulates into the leaves' ``.grad`` (or captures them for
``autograd.grad``).
"""

import threading
import warnings
import weakref

from fiamma import Tensor
from fiamma.autograd import _formulas as F
from fiamma.autograd._node import (
    NO_KWARGS,
    AccumulateGrad,
    ComplexNode,
    Meta,
    Node,
    _HookDict,
    add_hook,
    capture_trace,
    hooks_active,
    meta_of,
    new_accumulate,
    pack_saved,
    pack_saved_output,
)
from fiamma.autograd_hook import (
    clear_base,
    get_meta,
    is_grad_enabled,
    no_grad,
    ops,
    owns_memory,
    same_storage,
    set_grad_enabled_flag,
    set_meta,
    version,
)
from fiamma.profiler import hook as _profiler

_new = object.__new__


# ---- anomaly mode (global, as in PyTorch) ---------------------------------------------------

class _Anomaly:
    enabled = False
    check_nan = True


anomaly = _Anomaly()


# ---- node classes per op ------------------------------------------------------------------

_CLASSES = {}   # op name -> Node subclass (formula and save mode as class attributes)


def _static(fn):
    return None if fn is None else staticmethod(fn)


def _class_name(op):
    return "".join(p[:1].upper() + p[1:] for p in op.split("_") if p) + "Backward0"


def _declared(op):
    """``op``'s name, checked against core's declared ops (once per op: node classes are
    cached)."""
    key = ops.get(op)
    if key is None:
        raise RuntimeError(f"autograd: core recorded the op {op!r}, which "
                           "fiamma.autograd_hook.ops does not declare (declare it with "
                           "fiamma.autograd_hook.declare_op and register its formula)")
    return key.name


def node_class(op):
    cls = _CLASSES.get(op)
    if cls is None:
        op = _declared(op)
        spec = F.lookup(op)
        fn, save = spec if spec is not None else (None, "none")
        cls = type(_class_name(op), (Node,), {"__slots__": (), "_op": op, "_save": save,
                                               "_formula": _static(fn),
                                               "_inline": fn is not None,
                                               "_unsaved": F.unsaved(op),
                                               "_unsaved_out": F.unsaved_outputs(op)})
        _CLASSES[op] = cls
    return cls


_CCLASSES = {}  # op name -> ComplexNode subclass (nodes of ops with a complex result)


def complex_node_class(op):
    """The node class of ``op`` for a complex result (or complex inputs of a multi-output op):
    its formula is the op's complex formula when one is registered (``derivative(...,
    complex=True)``), else the real formula, which then sees the saved tensors conjugated
    (``ComplexNode``): right for the ops that are holomorphic with real Taylor coefficients
    and for the linear ones with real coefficients (shape and index ops, sums, products)."""
    cls = _CCLASSES.get(op)
    if cls is None:
        op = _declared(op)
        spec = F.lookup_complex(op)
        conj = spec is None
        if conj:
            spec = F.lookup(op)
        fn, save = spec if spec is not None else (None, "none")
        cls = type(_class_name(op), (ComplexNode,), {
            "__slots__": (), "_op": op, "_save": save, "_formula": _static(fn),
            "_inline": fn is not None, "_conj_saved": conj, "_unsaved": F.unsaved(op),
            "_unsaved_out": F.unsaved_outputs(op)})
        _CCLASSES[op] = cls
    return cls


def _registered(op):
    cls = _CLASSES.get(op)
    spec = F.lookup(op)
    if cls is not None and spec is not None:
        fn, cls._save = spec
        cls._formula = _static(fn)
        cls._inline = fn is not None
        cls._unsaved = F.unsaved(op)
        cls._unsaved_out = F.unsaved_outputs(op)
    _CCLASSES.pop(op, None)


F._listeners.append(_registered)

# ops whose result is a view of input 0 (in-place on such a result rewrites the base's history),
# as core declares them; plain names, so the per-record membership test is a str lookup
VIEW_OPS = frozenset(k.name for k in ops if k.is_view)

_NONES = [(None,) * i for i in range(8)]


def _acc(t):
    m = meta_of(t)
    a = m.acc
    if a is None:
        a = m.acc = new_accumulate(t)
    return a


_ZEROS = [(0,) * i for i in range(8)]
_NO_EDGE = (None, 0)  # _edge1's answer for an input that does not require grad

# Nodes share one ``_dtypes`` tuple per dtype combination instead of building one each: a tuple
# of dtype objects stays tracked by the cyclic GC, and every tracked object that outlives the
# forward pass brings the next full collection (a traversal of the whole Python heap) closer.
_DT1 = {}   # dtype -> (dtype,)
_DT2 = {}   # dtype -> {dtype: (dtype, dtype)}
_DTN = {}   # short dtype tuples of other lengths, interned


def _dtypes1(da):
    t = _DT1.get(da)
    if t is None:
        t = _DT1[da] = (da,)
    return t


def _dtypes2(da, db):
    row = _DT2.get(da)
    if row is None:
        row = _DT2[da] = {}
    t = row.get(db)
    if t is None:
        t = row[db] = (da, db)
    return t


def _dtypes_n(dtypes):
    t = tuple(dtypes)
    return _DTN.setdefault(t, t) if len(t) <= 8 else t


# ---- the per-op recording path ---------------------------------------------------------------
# ``_edge1`` and ``record_new`` run for every recorded op with one tensor result (``record``
# calls ``record_new``), ``_make_node`` for the others. They read the tensor slots that core
# documents for this path (fiamma.autograd_hook.HOT_SLOTS: ``_ag``, ``_shape``, ``_dtype``,
# ``_storage`` identity and ``.version``) directly: the accessor functions cost a Python call
# each, more than the read (docs/architecture.md, "The core/autograd seam").

def _edge1(x):
    """(node, output_nr) of a tensor that requires grad."""
    fn = x.grad_fn
    m = x._ag
    if fn is None:
        return (m.acc if m is not None and m.acc is not None else _acc(x)), 0
    if m is None:
        return fn, 0
    if m.base is not None and m.vver != x._storage.version:
        fn = _views.refresh(x, m)  # the storage changed in place since: a view of the base
    return fn, m.output_nr


def current_grad_fn(x):
    """``x.grad_fn``, refreshed for a view whose base was modified in place."""
    fn = x.grad_fn
    m = get_meta(x)
    if fn is not None and m is not None and m.base is not None and m.vver != version(x):
        fn = _views.refresh(x, m)
    return fn


def _drop_unsaved(node, positions):
    """Forget the saved inputs at ``positions`` (their formula reads only shapes/dtypes)."""
    if callable(positions):
        positions = positions(node._inputs, node._kwargs)
        if not positions:
            return
    ins, vs = list(node._inputs), list(node._versions)
    for i in positions:
        if i < len(ins):
            ins[i] = None
            vs[i] = None
    node._inputs, node._versions = tuple(ins), tuple(vs)


def _make_node(cls, inputs, kwargs, skip_self):
    """A node of class ``cls`` for ``inputs`` (``skip_self``: input 0 was overwritten in place
    and is not saved): any inputs (tensors, tensor subclasses, non-tensors). The single-result
    ops with one or two plain tensors build theirs in ``record_new``, written out."""
    node = _new(cls)
    save = cls._save
    keep = save == "inputs" or save == "both"  # the inputs are saved: their versions too
    versions = [] if keep else None
    nexts = []
    shapes = []
    dtypes = []
    nrs = None
    plain = True
    for x in inputs:
        if isinstance(x, Tensor):
            shapes.append(x._shape)
            dtypes.append(x._dtype)
            if keep:
                versions.append(x._storage.version)
            if x.requires_grad:
                fn, nr = _edge1(x)
                if nr:
                    if nrs is None:
                        nrs = [0] * len(inputs)
                    nrs[len(nexts)] = nr
                nexts.append(fn)
            else:
                nexts.append(None)
        else:
            shapes.append(None)
            dtypes.append(None)
            if keep:
                versions.append(None)
            nexts.append(None)
            plain = False
    n = len(nexts)
    if n == 1 or n == 2:  # Node's own slots for one or two inputs, without the properties
        node._e0 = nexts[0]
        node._s0 = shapes[0]
        if n == 2:
            node._e1 = nexts[1]
            node._s1 = shapes[1]
        else:
            node._e1 = node._s1 = None
        node._ex = node._sx = None
    else:
        node._next = nexts
        node._shapes = shapes
    node._nrs = _ZEROS[n] if nrs is None and n < 8 else tuple(nrs or (0,) * n)
    node._dtypes = _dtypes_n(dtypes)
    node._kwargs = kwargs if kwargs else NO_KWARGS
    if keep:
        if skip_self:
            inputs = (None,) + tuple(inputs[1:])
            versions[0] = None
        unsaved = cls._unsaved
        if callable(unsaved):
            unsaved = unsaved(inputs, node._kwargs)
        if unsaved:  # inputs the formula does not read: neither kept nor version-checked
            inputs = list(inputs)
            for i in unsaved:
                if i < n:
                    inputs[i] = None
                    versions[i] = None
        node._inputs = tuple(inputs)
        node._versions = tuple(versions)
        if hooks_active[0]:
            pack_saved(node)
    else:
        node._inputs = _NONES[n] if plain and n < 8 else tuple(
            None if isinstance(x, Tensor) else x for x in inputs)
        node._versions = None
    if anomaly.enabled:
        node._trace = capture_trace()
    return node


def record(op, out, inputs, kwargs):
    """Core's hook after an op whose tensor input requires grad (grad mode on)."""
    if type(out) is Tensor or isinstance(out, Tensor):
        for x in inputs:
            if x is out:
                return  # the op returned its input unchanged
        if type(inputs) is not tuple:
            inputs = tuple(inputs)
        if record_new(op, out, inputs, kwargs if kwargs else NO_KWARGS) is None:
            return
        if getattr(out, "_base", None) is not None and op not in VIEW_OPS:
            _own_result(out, inputs)
        if op in VIEW_OPS:
            x = inputs[0]
            if isinstance(x, Tensor) and x._storage is out._storage:
                m = x._ag
                base = m.base if m is not None and m.base is not None else x
                mo = meta_of(out)
                mo.base = base
                mo.vver = out._storage.version
        return
    cls = _CLASSES.get(op)
    if cls is None:
        cls = node_class(op)
    # a tuple result (rarer, and costlier per op already): through the accessors
    outs = tuple(out)
    kind = 0  # the largest dtype kind among the tensors (2 floating, 3 complex)
    for o in outs:
        if isinstance(o, Tensor) and o._dtype._kind > kind:
            kind = o._dtype._kind
    if kind < 2:
        return
    if kind == 2:
        for t in inputs:
            if isinstance(t, Tensor) and t._dtype._kind == 3:
                kind = 3
                break
    if kind == 3:
        cls = complex_node_class(op)
    node = _make_node(cls, inputs, kwargs, False)
    node._nout = len(outs)
    node._inline = False
    save = cls._save
    if save == "output" or save == "both":
        skip = cls._unsaved_out
        kept = [o if isinstance(o, Tensor) and i not in skip else None
                for i, o in enumerate(outs)]
        node._out = tuple(o.detach() if o is not None else None for o in kept)
        node._outver = tuple(version(o) if o is not None else None for o in kept)
        if hooks_active[0]:
            pack_saved_output(node)
    view = op in VIEW_OPS  # split / unbind: every output a view of input 0
    if view:
        x = inputs[0]
        m = x._ag
        base = m.base if m is not None and m.base is not None else x
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and o._dtype._kind >= 2:
            o.grad_fn = node
            o.requires_grad = True
            mo = Meta(i)
            set_meta(o, mo)
            if view:
                mo.base = base
                mo.vver = o._storage.version
            elif getattr(o, "_base", None) is not None:
                _own_result(o, inputs)


def record_new(op, out, inputs, kwargs=NO_KWARGS):
    """``record`` for one tensor result that is not one of ``inputs``, without the bookkeeping of
    a view or of a result built as a view of a temporary; returns its node (None when the result
    is not differentiable). Core's operator fast paths call it directly (through
    fiamma.autograd_hook's ``record_new``: a result the op has just allocated, no keyword
    arguments), ``record`` for every single-tensor result (``inputs`` a tuple, ``kwargs`` a
    non-empty dict or ``NO_KWARGS``). Every recorded op runs it, so the plain one- and
    two-tensor cases are written out (the node built here, ``_edge1``'s commonest case
    inlined); the others go through ``_make_node``."""
    cls = _CLASSES.get(op)
    if cls is None:
        cls = node_class(op)
    k = out._dtype._kind
    if k != 2:
        if k != 3:
            return None
        cls = complex_node_class(op)  # complex result: conjugated saved tensors
    n = len(inputs)
    if n == 2:
        a, b = inputs
        if ((a.__class__ is not Tensor and not isinstance(a, Tensor)) or
                (b.__class__ is not Tensor and not isinstance(b, Tensor))):
            node = _make_node(cls, inputs, kwargs, False)
        else:
            node = _new(cls)
            na = nb = 0
            if a.requires_grad:
                ea = a.grad_fn
                m = a._ag
                if ea is None:
                    ea = m.acc if m is not None and m.acc is not None else _acc(a)
                elif m is not None:
                    ea, na = _edge1(a)
            else:
                ea = None
            if b.requires_grad:
                eb = b.grad_fn
                m = b._ag
                if eb is None:
                    eb = m.acc if m is not None and m.acc is not None else _acc(b)
                elif m is not None:
                    eb, nb = _edge1(b)
            else:
                eb = None
            node._e0 = ea
            node._e1 = eb
            node._ex = None
            node._nrs = (0, 0) if not (na or nb) else (na, nb)
            node._s0 = a._shape
            node._s1 = b._shape
            node._sx = None
            row = _DT2.get(a._dtype)
            dts = row.get(b._dtype) if row is not None else None
            node._dtypes = dts if dts is not None else _dtypes2(a._dtype, b._dtype)
            node._kwargs = kwargs
            save = cls._save
            if save == "none" or save == "output":
                node._inputs = (None, None)
                node._versions = None
            else:
                node._inputs = inputs
                node._versions = (a._storage.version, b._storage.version)
                if cls._unsaved:
                    _drop_unsaved(node, cls._unsaved)
                if hooks_active[0]:
                    pack_saved(node)
            if anomaly.enabled:
                node._trace = capture_trace()
    elif n == 3 and isinstance(inputs[0], Tensor) and isinstance(inputs[1], Tensor) and \
            isinstance(inputs[2], Tensor):
        # three tensors (addmm and the other fused products, where, lerp, ...): the node's
        # edge and shape tuples built here, as _make_node would, without its per-input loop
        a, b, c = inputs
        node = _new(cls)
        ea, na = _edge1(a) if a.requires_grad else _NO_EDGE
        eb, nb = _edge1(b) if b.requires_grad else _NO_EDGE
        ec, nc = _edge1(c) if c.requires_grad else _NO_EDGE
        node._e0 = ea
        node._e1 = eb
        node._ex = (ea, eb, ec)
        node._s0 = a._shape
        node._s1 = b._shape
        node._sx = (a._shape, b._shape, c._shape)
        node._nrs = _ZEROS[3] if not (na or nb or nc) else (na, nb, nc)
        dts = (a._dtype, b._dtype, c._dtype)
        node._dtypes = _DTN.setdefault(dts, dts)
        node._kwargs = kwargs
        save = cls._save
        if save == "none" or save == "output":
            node._inputs = _NONES[3]
            node._versions = None
        else:
            node._inputs = inputs
            node._versions = (a._storage.version, b._storage.version, c._storage.version)
            if cls._unsaved:
                _drop_unsaved(node, cls._unsaved)
            if hooks_active[0]:
                pack_saved(node)
        if anomaly.enabled:
            node._trace = capture_trace()
    else:
        a = inputs[0] if n == 1 else None
        if (a.__class__ is not Tensor and not isinstance(a, Tensor)) or not a.requires_grad:
            node = _make_node(cls, inputs, kwargs, False)
        else:
            node = _new(cls)
            ea = a.grad_fn
            m = a._ag
            na = 0
            if ea is None:
                ea = m.acc if m is not None and m.acc is not None else _acc(a)
            elif m is not None:
                ea, na = _edge1(a)
            node._e0 = ea
            node._e1 = node._ex = None
            node._nrs = (na,) if na else _ZEROS[1]
            node._s0 = a._shape
            node._s1 = node._sx = None
            dts = _DT1.get(a._dtype)
            node._dtypes = dts if dts is not None else _dtypes1(a._dtype)
            node._kwargs = kwargs
            save = cls._save
            if save == "none" or save == "output":
                node._inputs = (None,)
                node._versions = None
            else:
                node._inputs = inputs
                node._versions = (a._storage.version,)
                if cls._unsaved:
                    _drop_unsaved(node, cls._unsaved)
                if hooks_active[0]:
                    pack_saved(node)
            if anomaly.enabled:
                node._trace = capture_trace()
    save = cls._save
    if save == "output" or save == "both":
        node._out = out.detach()
        node._outver = out._storage.version
        if hooks_active[0]:
            pack_saved_output(node)
    out.grad_fn = node
    out.requires_grad = True
    return node


def _own_result(out, inputs):
    """A non-view op's result that core built as a view of its own temporary (group_norm's
    rows reshaped back, say) is a fresh tensor to autograd: without this, an in-place op on it
    (``relu_`` after GroupNorm) took the temporary, which has no history, for its base and the
    gradient to everything before it was silently lost. Results sharing an input's memory keep
    their base."""
    for x in inputs:
        if isinstance(x, Tensor) and same_storage(x, out):
            return
    clear_base(out)


# ---- in-place ops -------------------------------------------------------------------------

def view_base(t):
    """The tensor whose memory the view ``t`` shows (following view-of-view chains), or None
    when ``t`` is not a view."""
    m = get_meta(t)
    if m is not None and m.base is not None:
        return m.base
    b = getattr(t, "_base", None)
    if b is None:
        return None
    while True:
        m = get_meta(b)
        if m is not None and m.base is not None:
            return m.base
        nb = getattr(b, "_base", None)
        if nb is None:
            return b
        b = nb


def check_inplace_target(t, op):
    """PyTorch's errors for in-place ops on leaves that require grad (and views of them)."""
    if t.requires_grad and t.grad_fn is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    b = view_base(t)
    if b is not None:
        if b.requires_grad and b.grad_fn is None:
            raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is being "
                               "used in an in-place operation.")


def inplace(fn, name, self, args, kwargs):
    """``self.<name>(*args, **kwargs)`` with gradients: the out-of-place op ``fn`` is computed
    (and recorded), written into ``self``, and ``self``'s history is rebased on it."""
    check_inplace_target(self, name)
    res = fn(self, *args, **kwargs)
    if res._dtype._kind > self._dtype._kind:
        raise RuntimeError(f"{name}: result type {res.dtype} can't be cast to the desired "
                           f"output type {self._dtype}")
    node = res.grad_fn
    if node is not None and node._versions is not None:
        # the formula saved tensors that the write below overwrites: save copies instead
        ins = node._inputs
        if any(isinstance(x, Tensor) and same_storage(x, self) for x in ins):
            ins = tuple(x.clone() if isinstance(x, Tensor) and same_storage(x, self) else x
                        for x in ins)
            node._inputs = ins
            node._versions = tuple(version(x) if isinstance(x, Tensor) else None for x in ins)
    with no_grad():
        self.copy_(res)
    if node is not None:
        out = node._out
        if isinstance(out, Tensor) and out._dtype is self._dtype and out._shape == self._shape:
            # a formula that saved its output (relu_, sigmoid_, tanh_, exp_, ...) keeps self,
            # which now holds the same values, instead of the temporary result: PyTorch's
            # in-place ops save their result, so no second activation-sized tensor lives
            # until backward (a later write into self is caught by the version check)
            node._out = self.detach()
            node._outver = self._storage.version
        rebase(self, node)


def record_inplace(op, out, inputs, kwargs):
    """Core's hook after an in-place op that overwrote ``out`` without reading it."""
    check_inplace_target(out, op)
    k = out._dtype._kind
    if k != 2 and k != 3:
        return
    node = _make_node(node_class(op) if k == 2 else complex_node_class(op), inputs, kwargs,
                      True)
    rebase(out, node)


def rebase(t, node):
    """Make ``node`` (whose input 0 is t's old value) the history of ``t``; for a view, the
    base's history becomes a CopySlices node and the view's a view of it. A tensor that
    retains its gradient keeps doing so for its new value (PyTorch moves ``retain_grad`` to
    the latest version: ``.grad`` is the gradient of what the tensor holds at the end)."""
    m = get_meta(t)
    base = view_base(t)
    moved = drop_retain(t)
    # a view with a history of its own while its base has none (make_dual's dual, a custom
    # Function's output view) is not "a region of the base's history": it is rebased as a
    # plain tensor (CopySlices would route its old value's gradient to the history-less base)
    if base is not None and t.grad_fn is not None and not base.requires_grad:
        base = None
    t.requires_grad = True
    if base is None or base.dtype is not t.dtype:
        t.grad_fn = node
        if m is not None:
            m.output_nr = 0
    else:
        moved_base = drop_retain(base)
        _views.copy_slices(base, t, node)
        if moved_base:
            retain_grad(base)
    if moved:
        retain_grad(t)


def drop_retain(t):
    """Unregister ``t``'s ``retain_grad`` from its current node (the history is about to
    change); whether it had one."""
    m = get_meta(t)
    if m is None or not m.retains:
        return False
    m.retains = False
    fn = t.grad_fn
    table = getattr(fn, "_retain", None)
    if table:
        for nr, ref in list(table.items()):
            if ref() is t:
                del table[nr]
    return True


# ---- requires_grad, hooks, retain_grad ------------------------------------------------------

def requires_grad_(t, flag):
    flag = bool(flag)
    if not flag and t.grad_fn is not None:
        raise RuntimeError(
            "requires_grad_: you can only change requires_grad flags of leaf variables. If you "
            "want to use a computed variable in a subgraph that doesn't require differentiation "
            "use var_no_grad = var.detach().")
    if flag and t._dtype._kind < 2:
        raise RuntimeError(f"requires_grad_: only Tensors of floating point and complex dtype "
                           f"can require gradients (got {t.dtype})")
    t.requires_grad = flag


def register_hook(t, hook):
    if not t.requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't "
                           "require gradient")
    fn = t.grad_fn
    if fn is None:
        m = meta_of(t)
        if m.hooks is None:
            m.hooks = _HookDict()
        return add_hook(m.hooks, hook)
    fn, nr = _edge1(t)
    if fn._tpre is None:
        fn._tpre = {}
        fn._hooked = True
        fn._inline = False
    table = fn._tpre.get(nr)
    if table is None:
        table = fn._tpre[nr] = _HookDict()
    return add_hook(table, hook)


def register_post_accumulate_grad_hook(t, hook):
    if t.grad_fn is not None:
        raise RuntimeError("register_post_accumulate_grad_hook: post accumulate grad hooks "
                           "cannot be registered on non-leaf tensors")
    if not t.requires_grad:
        raise RuntimeError("register_post_accumulate_grad_hook: cannot register a hook on a "
                           "tensor that doesn't require gradient")
    m = meta_of(t)
    if m.post_hooks is None:
        m.post_hooks = _HookDict()
    return add_hook(m.post_hooks, hook)


def retain_grad(t):
    if not t.requires_grad:
        raise RuntimeError("retain_grad: can't retain_grad on Tensor that has requires_grad=False")
    if t.grad_fn is None:
        return
    fn, _ = _edge1(t)
    m = meta_of(t)
    if m.retains:
        return
    m.retains = True
    if fn._retain is None:
        fn._retain = {}
        fn._hooked = True
        fn._inline = False
    fn._retain[m.output_nr] = weakref.ref(t)


def retains_grad(t):
    m = get_meta(t)
    return m is not None and m.retains


def retain_store(t, g):
    if t.grad is None:
        t.grad = g.clone() if not is_grad_enabled() else g
    elif is_grad_enabled():
        t.grad = t.grad + g
    else:
        t.grad = t.grad + g


# ---- accumulation into leaves ---------------------------------------------------------------

def _leaf_hooks(acc, g):
    """A leaf's tensor hooks applied to its incoming gradient."""
    t = acc._var()
    m = get_meta(t) if t is not None else None
    if g is not None and m is not None and m.hooks:
        for h in list(m.hooks.values()):
            r = h(g)
            if r is not None:
                g = r
    return g


def _owned(g):
    """Whether gradient ``g`` can become a ``.grad`` as is: a dense tensor without history
    whose memory no other tensor shares (a view, say a formula's reshape, only of a temporary
    that nothing else holds), referenced only by the engine: its buffer slot, the caller's
    variable and this function's parameter."""
    return g.grad_fn is None and not g.requires_grad and owns_memory(g, 3)


def _accumulate(acc, g, create_graph):
    t = acc._var()
    if t is None or g is None:
        return
    m = get_meta(t)
    hooked = (m is not None and bool(m.hooks)) or acc._pre is not None or acc._post is not None
    if hooked:  # a hook may keep the gradient it is given or returns: never steal it then
        g = _leaf_hooks(acc, g)
    if acc._pre is not None:
        for h in list(acc._pre.values()):
            r = h((g,))
            if r is not None:
                g = r[0]
    if g.is_sparse and not t.is_sparse:  # a sparse gradient of a dense leaf (embedding's)
        _accumulate_sparse(t, g, create_graph)
    elif t.grad is None:
        if create_graph:
            t.grad = g
        elif not hooked and _owned(g):
            t.grad = g  # nothing else refers to it or to its memory: no copy needed
        else:
            t.grad = g.detach().clone()
    elif not isinstance(t.grad, Tensor):  # assigned by hand (``x.grad = 0.``)
        raise TypeError(f"backward: a leaf's .grad must be a Tensor or None to accumulate "
                        f"into, got {type(t.grad).__name__} (assign None or a tensor, e.g. "
                        "x.grad = None or x.grad.zero_())")
    elif create_graph or t.grad.requires_grad:
        t.grad = t.grad + g
    else:
        t.grad.add_(g.detach())
    if m is not None and m.post_hooks:
        for h in list(m.post_hooks.values()):
            h(t)
    if acc._post is not None:
        for h in list(acc._post.values()):
            h((), (g,))


def _accumulate_sparse(t, g, create_graph):
    """A sparse COO gradient of a dense leaf (``embedding(..., sparse=True)``), as PyTorch's
    AccumulateGrad: the first becomes ``.grad`` (sparse), later ones are added to it (sparse +
    sparse concatenates, uncoalesced); into a dense ``.grad`` they are added in place."""
    cur = t.grad
    if cur is None:
        t.grad = g if create_graph or not g.requires_grad else g.detach()
    elif not isinstance(cur, Tensor):
        raise TypeError(f"backward: a leaf's .grad must be a Tensor or None to accumulate "
                        f"into, got {type(cur).__name__}")
    elif cur.is_sparse or create_graph or cur.requires_grad:
        t.grad = cur + g
    elif g.sparse_dim() == 1 and cur.is_contiguous():
        cur.index_add_(0, g._indices()[0], g._values().detach())
    else:
        cur.add_(g.detach().to_dense())


# ---- the executor ---------------------------------------------------------------------------

def _check_nan(node, grads):
    for i, g in enumerate(grads):
        if g is not None and bool(g.isnan().any()):
            trace = "".join(node._trace) if node._trace else "(no forward trace recorded)\n"
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {i}th output "
                f"(the backward of forward op '{node._op}').\nTraceback of the forward call "
                f"that caused the error:\n{trace}")


def _cast_grad(g, dt):
    """A gradient in its input's dtype (the real part for a real input)."""
    g = g.real if g._dtype._kind == 3 and dt._kind != 3 else g
    return g.to(dt)


class _Sum:
    """A buffer slot that received the same gradient tensor ``count`` times in a row (a
    gradient passed through unchanged, e.g. by add): summed as one multiply."""

    __slots__ = ("acc", "last", "count")

    def total(self):
        term = self.last if self.count == 1 else self.last * self.count
        return term if self.acc is None else self.acc + term


def _buf_add(b, nr, g):
    """Add ``g`` into buffer slot ``b[nr]``; True when the slot became a _Sum."""
    cur = b[nr]
    if cur is None:
        b[nr] = g
    elif cur.__class__ is _Sum:
        if cur.last is g:
            cur.count += 1
        else:
            cur.acc = cur.total()
            cur.last = g
            cur.count = 1
    elif cur is g:
        s = b[nr] = _Sum()
        s.acc = None
        s.last = g
        s.count = 2
        return True
    else:
        b[nr] = cur + g
    return False


def _apply_anomaly(node, gs, hooks_done, check_nan):
    """``node._apply`` in anomaly mode: an error names the node and shows the forward call."""
    try:
        outs = node._apply(gs, hooks_done)
    except Exception:
        trace = "".join(node._trace) if node._trace else "(no forward trace recorded)\n"
        warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused "
                      f"the error:\n{trace}", stacklevel=2)
        raise
    if check_nan:
        _check_nan(node, outs)
    return outs


def _needed_nodes(roots, target_nodes):
    """Nodes that must run so the gradient reaches a target (some child leads to one)."""
    leads = {}   # node -> whether a target is reachable through its children
    for r in roots:
        if r in leads:
            continue
        leads[r] = False
        stack = [(r, iter(r._next))]
        while stack:
            n, it = stack[-1]
            for c in it:
                if c is None:
                    continue
                if c not in leads:
                    leads[c] = False
                    stack.append((c, iter(c._next)))
                    break
                if leads[c] or c in target_nodes:
                    leads[n] = True
            else:
                stack.pop()
                if stack and (leads[n] or n in target_nodes):
                    leads[stack[-1][0]] = True
    return {n for n, v in leads.items() if v}


class _ExecState(threading.local):
    depth = 0


_exec_state = _ExecState()


_EVAL = "autograd::engine::evaluate_function: "  # PyTorch's event name for a node


def execute(roots, grads, keep_graph, create_graph, targets=None, accumulate=True):
    """Run the graph backwards from ``roots`` ((node, output_nr) pairs) seeded with ``grads``.

    ``targets``: (node, output_nr) pairs whose incoming gradient is captured and returned (in
    order); with ``accumulate`` the leaves among them still accumulate into ``.grad`` and no
    other leaf does. Without targets every reachable leaf accumulates.
    """
    root_nodes = []
    for n, _ in roots:
        if n not in root_nodes:
            root_nodes.append(n)
    capture = None
    run = None
    if targets is not None:
        capture = {}
        for i, (n, nr) in enumerate(targets):
            capture.setdefault(n, []).append((i, nr))
        run = _needed_nodes(root_nodes, capture)
        if accumulate:
            run.update(n for n in capture if n.__class__ is AccumulateGrad)
    # dependency counts over the part of the graph that runs
    deps = {}
    stack = [n for n in root_nodes if run is None or n in run]
    if run is None:
        # the whole graph: a node's first count is its first visit (roots are pushed already)
        rootset = set(stack)
        while stack:
            n = stack.pop()
            nx = n._ex
            for c in (n._e0, n._e1) if nx is None else nx:  # Node._next without the property
                if c is not None:
                    d = deps.get(c)
                    if d is None:
                        deps[c] = 1
                        if c not in rootset:
                            stack.append(c)
                    else:
                        deps[c] = d + 1
    else:
        seen = set(stack)
        while stack:
            n = stack.pop()
            for c in n._next:
                if c is None or (c not in run and c not in capture):
                    continue
                deps[c] = deps.get(c, 0) + 1
                if c not in seen:
                    seen.add(c)
                    if c in run:
                        stack.append(c)
    buffers = {}
    sums = set()    # nodes with a _Sum buffer slot
    for (n, nr), g in zip(roots, grads):
        b = buffers.get(n)
        if b is None:
            b = buffers[n] = [None] * n._nout
        if _buf_add(b, nr, g):
            sums.add(n)
    results = [None] * len(targets) if targets is not None else None
    ready = [n for n in reversed(root_nodes) if n not in deps]
    prev = set_grad_enabled_flag(create_graph)
    anomaly_on = anomaly.enabled
    check_nan = anomaly.check_nan
    prof = _profiler.call if _profiler.enabled else None  # one check per backward when off
    plain = not anomaly_on and prof is None
    try:
        while ready:
            n = ready.pop()
            gs = buffers.pop(n, None)
            if gs is None:
                gs = [None] * n._nout
            elif sums and n in sums:
                sums.discard(n)
                for k, x in enumerate(gs):
                    if x.__class__ is _Sum:
                        gs[k] = x.total()
            hooks_done = False
            if capture is not None and n in capture:
                if n._hooked:
                    gs = n._prehooks(gs)
                    hooks_done = True
                elif n.__class__ is AccumulateGrad and n not in run:
                    gs = [_leaf_hooks(n, gs[0])]
                for i, nr in capture[n]:
                    results[i] = gs[nr]
                if n not in run:
                    continue
            elif run is not None and n not in run:
                continue
            if n.__class__ is AccumulateGrad:
                if prof is None:
                    _accumulate(n, gs[0], create_graph)
                else:
                    prof(_EVAL + "AccumulateGrad", _accumulate, n, gs[0], create_graph)
                continue
            if plain and n._inline and gs[0] is not None:
                # the common node (one output, a formula, no hooks) with Node._apply inlined:
                # the formula's gradients are checked, summed over broadcasting and cast as
                # they go into the buffers
                res = n._formula(n, gs[0])
                if type(res) is not tuple:
                    res = tuple(res) if isinstance(res, list) else (res,)
                nxt = n._ex  # Node._next and _shapes without the properties
                if nxt is None:
                    if len(n._nrs) == 2:
                        nxt = (n._e0, n._e1)
                        shapes = (n._s0, n._s1)
                    else:
                        nxt = (n._e0,)
                        shapes = (n._s0,)
                else:
                    shapes = n._sx
                if len(res) != len(nxt):
                    res = n._check_count(res)
                if not keep_graph and (n._versions is not None or n._out is not None):
                    n._release()  # nodes that saved nothing have nothing to free
                dts = n._dtypes
                nrs = n._nrs
                for i, c in enumerate(nxt):
                    if c is None or (run is not None and c not in run and c not in capture):
                        continue
                    g = res[i]
                    if g is not None:
                        if g.__class__ is not Tensor and not isinstance(g, Tensor):
                            raise TypeError(f"{n.name()}: gradient {i} must be a Tensor or "
                                            f"None, got {type(g).__name__}")
                        if g._shape != shapes[i]:  # the documented hot slot, read directly
                            g = F.sum_to_shape(g, shapes[i])
                        if g._dtype is not dts[i]:
                            g = _cast_grad(g, dts[i])
                        b = buffers.get(c)
                        if b is None:
                            if c._nout == 1:
                                buffers[c] = [g]
                            else:
                                b = buffers[c] = [None] * c._nout
                                b[nrs[i]] = g
                        elif b[nrs[i]] is None:
                            b[nrs[i]] = g
                        elif _buf_add(b, nrs[i], g):
                            sums.add(c)
                    d = deps[c] - 1
                    if d:
                        deps[c] = d
                    else:
                        del deps[c]
                        ready.append(c)
                res = g = None  # only the buffers refer to the gradients (see _owned)
                continue
            if anomaly_on:
                outs = _apply_anomaly(n, gs, hooks_done, check_nan)
            elif prof is not None:
                outs = prof(_EVAL + n.__class__.__name__, n._apply, gs, hooks_done)
            else:
                outs = n._apply(gs, hooks_done)
            if not keep_graph:
                n._release()
            nrs = n._nrs
            for i, c in enumerate(n._next):
                if c is None or (run is not None and c not in run and c not in capture):
                    continue
                g = outs[i]
                if g is not None:
                    b = buffers.get(c)
                    if b is None:
                        b = buffers[c] = [None] * c._nout
                    nr = nrs[i]
                    cur = b[nr]
                    if cur is None:
                        b[nr] = g
                    elif _buf_add(b, nr, g):
                        sums.add(c)
                d = deps[c] - 1
                if d:
                    deps[c] = d
                else:
                    del deps[c]
                    ready.append(c)
            outs = g = None  # only the buffers refer to the gradients (see _owned)
    finally:
        set_grad_enabled_flag(prev)
    return results


from fiamma.autograd import _views  # noqa: E402  (imports function.py, which imports this)
