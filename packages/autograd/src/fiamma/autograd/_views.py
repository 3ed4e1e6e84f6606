"""Views and in-place ops (PyTorch's design).

When ``view`` (a view of ``base``) is overwritten by the result of ``node`` (whose input 0 is
the view's old value), the base's history becomes a CopySlices node: the base's gradient is the
incoming gradient with the view's region replaced by what ``node`` sends back to its input 0,
and ``node``'s other inputs get their gradients as usual. The view's history becomes "the
region of the new base" (ViewOfBase); so does that of any other view of the base whose storage
was modified since its history was recorded (refreshed when it is next used).

Gradients move between base and view through a buffer over the storage elements they span
(``_Scatter`` / ``_Gather``, each the other's derivative), so any strided base works and the
result is differentiable again under create_graph.
"""

import fiamma
from fiamma.autograd._node import Node, meta_of
from fiamma.autograd.function import Function
from fiamma.autograd_hook import geometry, get_meta, shape, version

_new = object.__new__


def _edge(t):
    from fiamma.autograd._engine import _acc

    if not t.requires_grad:
        return None, 0
    fn = t.grad_fn
    if fn is None:
        return _acc(t), 0
    m = get_meta(t)
    return fn, (0 if m is None else m.output_nr)


def _dense(g):
    """``g`` laid out contiguously from storage offset 0 (as_strided geometries assume it)."""
    return g if g.is_contiguous() and g.storage_offset() == 0 else g.clone()


class _Scatter(Function):
    """A length-``n`` zero buffer with ``g`` written at geometry ``geom``."""

    @staticmethod
    def forward(ctx, g, geom, n):
        ctx.geom = geom
        ctx.n = n
        out = fiamma.zeros(n, dtype=g.dtype, device=g.device)
        out.as_strided(*geom).copy_(g)
        return out

    @staticmethod
    def backward(ctx, grad):
        return _Gather.apply(grad, ctx.geom, ctx.n), None, None


class _Gather(Function):
    """The elements of buffer ``buf`` at geometry ``geom`` (a copy)."""

    @staticmethod
    def forward(ctx, buf, geom, n):
        ctx.geom = geom
        ctx.n = n
        return _dense(buf).as_strided(*geom).clone()

    @staticmethod
    def backward(ctx, grad):
        return _Scatter.apply(grad, ctx.geom, ctx.n), None, None


def _geometries(base, view):
    """(base geometry, view geometry, buffer length) relative to the first element either
    spans."""
    bshape, bstride, boff = geometry(base)
    vshape, vstride, voff = geometry(view)

    def span(shape, stride, off):
        if 0 in shape:
            return off, off
        return off, off + sum((n - 1) * st for n, st in zip(shape, stride)) + 1

    b0, b1 = span(bshape, bstride, boff)
    v0, v1 = span(vshape, vstride, voff)
    lo = min(b0, v0)
    hi = max(b1, v1)
    return (bshape, bstride, boff - lo), (vshape, vstride, voff - lo), hi - lo


class CopySlices(Node):
    __slots__ = ("_fn", "_bgeom", "_vgeom", "_n")

    def _backward(self, grad):
        n = self._n
        flat = _Scatter.apply(grad, self._bgeom, n)
        region = _Gather.apply(flat, self._vgeom, n)
        sub = self._fn._apply([region])
        flat = flat + _Scatter.apply(region, self._vgeom, n) * -1.0  # zero the region
        if sub[0] is not None:
            flat = flat + _Scatter.apply(sub[0], self._vgeom, n)
        return (_Gather.apply(flat, self._bgeom, n),) + tuple(sub[1:])

    def _release(self):
        super()._release()
        self._fn._release()


class ViewOfBase(Node):
    """The history of a view whose base was modified in place: the region of the base."""

    __slots__ = ("_bgeom", "_vgeom", "_n")
    _op = "as_strided"

    def _backward(self, grad):
        flat = _Scatter.apply(grad, self._vgeom, self._n)
        return (_Gather.apply(flat, self._bgeom, self._n),)


def view_of_base(base, view):
    """Give ``view`` the history "region of ``base``'s current history"."""
    bgeom, vgeom, n = _geometries(base, view)
    bnode, bnr = _edge(base)
    v = _new(ViewOfBase)
    v._init_empty()
    v._bgeom, v._vgeom, v._n = bgeom, vgeom, n
    v._next = (bnode,)
    v._nrs = (bnr,)
    v._shapes = (shape(base),)
    v._dtypes = (base.dtype,)
    view.grad_fn = v
    view.requires_grad = True
    m = meta_of(view)
    m.output_nr = 0
    m.base = base
    m.vver = version(view)
    return v


def copy_slices(base, view, node):
    bgeom, vgeom, n = _geometries(base, view)
    bnode, bnr = _edge(base)
    c = _new(CopySlices)
    c._init_empty()
    c._fn = node
    c._bgeom, c._vgeom, c._n = bgeom, vgeom, n
    c._next = (bnode,) + node._next[1:]
    c._nrs = (bnr,) + node._nrs[1:]
    c._shapes = (shape(base),) + node._shapes[1:]
    c._dtypes = (base._dtype,) + node._dtypes[1:]
    if node._trace is not None:
        c._trace = node._trace
    base.grad_fn = c
    base.requires_grad = True
    meta_of(base).output_nr = 0
    view_of_base(base, view)


def refresh(view, m):
    """The current history of a view (recomputed if its storage changed since it was set)."""
    return view_of_base(m.base, view)
