"""In-place ops on views: the base's history becomes a CopySlices node (PyTorch's design).

When ``view`` (a view of ``base``) is overwritten by the result of ``node`` (whose input 0 is the
view's old value), the base's gradient is: the incoming gradient with the view's region replaced
by what ``node`` sends back to its input 0; ``node``'s other inputs get their gradients as usual.
The view's own history becomes "the region of the new base".
"""

import fiamma
from fiamma.autograd_hook import is_grad_enabled

from fiamma.autograd._node import Node, meta_of
from fiamma.autograd.function import Function

_new = object.__new__


def _edge(t):
    from fiamma.autograd._engine import _acc

    if not t.requires_grad:
        return None, 0
    fn = t.grad_fn
    if fn is None:
        return _acc(t), 0
    m = t._ag
    return fn, (0 if m is None else m.output_nr)


class _Embed(Function):
    """zeros(base_shape) with ``g`` written at the view geometry (differentiable in g)."""

    @staticmethod
    def forward(ctx, g, shape, geom):
        ctx.geom = geom
        out = fiamma.zeros(shape, dtype=g.dtype)
        out.as_strided(*geom).copy_(g)
        return out

    @staticmethod
    def backward(ctx, grad):
        return _dense(grad).as_strided(*ctx.geom), None, None


def _dense(g):
    """``g`` laid out contiguously from storage offset 0 (as_strided geometries assume it)."""
    return g if g.is_contiguous() and g.storage_offset() == 0 else g.clone()


def _region(g, geom):
    return _dense(g).as_strided(*geom)


class CopySlices(Node):
    __slots__ = ("_fn", "_geom")

    def _backward(self, grad):
        geom = self._geom
        if is_grad_enabled():  # create_graph: differentiable composition
            sub = self._fn._apply([_region(grad, geom)])
            result = grad - _Embed.apply(_region(grad, geom), grad.shape, geom)
            if sub[0] is not None:
                result = result + _Embed.apply(sub[0], grad.shape, geom)
            return (result,) + tuple(sub[1:])
        result = grad.clone()
        region = result.as_strided(*geom)
        sub = self._fn._apply([region.clone()])
        if sub[0] is not None:
            region.copy_(sub[0])
        else:
            region.fill_(0)
        return (result,) + tuple(sub[1:])

    def _release(self):
        super()._release()
        self._fn._release()


class ViewOfBase(Node):
    """The history of a view after an in-place op on it: the region of its base."""

    __slots__ = ("_geom", "_base_shape")
    _op = "as_strided"

    def _backward(self, grad):
        if is_grad_enabled():
            return (_Embed.apply(grad, self._base_shape, self._geom),)
        out = fiamma.zeros(self._base_shape, dtype=grad.dtype)
        out.as_strided(*self._geom).copy_(grad)
        return (out,)


def copy_slices(base, view, node):
    if not base.is_contiguous():
        raise NotImplementedError(
            "in-place operation on a view of a non-contiguous tensor that requires grad is not "
            "supported by fiamma-autograd; clone() the base first")
    geom = (view._shape, view._stride, view._offset - base._offset)
    bnode, bnr = _edge(base)
    c = _new(CopySlices)
    c._init_empty()
    c._fn = node
    c._geom = geom
    c._next = (bnode,) + node._next[1:]
    c._nrs = (bnr,) + node._nrs[1:]
    c._shapes = (base._shape,) + node._shapes[1:]
    c._dtypes = (base._dtype,) + node._dtypes[1:]
    c._trace = node._trace
    base.grad_fn = c
    base.requires_grad = True
    meta_of(base).output_nr = 0
    v = _new(ViewOfBase)
    v._init_empty()
    v._geom = geom
    v._base_shape = base._shape
    v._next = (c,)
    v._nrs = (0,)
    v._shapes = (base._shape,)
    v._dtypes = (base._dtype,)
    view.grad_fn = v
    view.requires_grad = True
    meta_of(view).output_nr = 0
