"""fiamma.distributed.nn.functional: PyTorch's differentiable collectives
(``torch.distributed.nn.functional``): ``all_gather`` and ``all_reduce`` record a backward, so
a loss computed from gathered tensors sends gradients back to the rank each came from
(PyTorch Lightning's ``all_gather(..., sync_grads=True)`` uses it).

- ``all_gather(tensor, group)``: a tuple with every rank's ``tensor``; the gradient of this
  rank's input is the sum over the ranks of their gradients for its slot.
- ``all_reduce(tensor, op=SUM, group)``: the reduced tensor (a new one); for SUM the gradient
  is the sum of the ranks' gradients (PyTorch's rule; other ops raise in backward, as there).
"""

import fiamma
from fiamma.distributed import _collectives as C
from fiamma.distributed._mpi import ReduceOp
from fiamma.distributed._state import group as _group

__all__ = ["all_gather", "all_reduce"]


def _function():
    import fiamma.autograd as autograd

    return autograd.Function


def _gather(tensor, g):
    out = [fiamma.empty_like(tensor) for _ in range(C.resolve(g, "all_gather").size())]
    C.all_gather(out, tensor.contiguous(), group=g)
    return out


def _make_all_gather():
    class _AllGather(_function()):
        @staticmethod
        def forward(ctx, g, tensor):
            ctx.g = g
            return tuple(_gather(tensor.detach(), g))

        @staticmethod
        def backward(ctx, *grads):
            g = ctx.g
            me = C.resolve(g, "all_gather").rank()
            stacked = fiamma.stack([gr.contiguous() for gr in grads])
            C.all_reduce(stacked, ReduceOp.SUM, group=g)
            return None, stacked[me]

    return _AllGather


def _make_all_reduce():
    class _AllReduce(_function()):
        @staticmethod
        def forward(ctx, g, op, tensor):
            ctx.g, ctx.reduce_op = g, op
            out = tensor.detach().clone()
            C.all_reduce(out, op, group=g)
            return out

        @staticmethod
        def backward(ctx, grad):
            if ctx.reduce_op not in (ReduceOp.SUM, ReduceOp.AVG):
                raise RuntimeError(f"torch.distributed.nn.functional.all_reduce: backward of "
                                   f"{ctx.reduce_op} is not supported (only SUM and AVG)")
            out = grad.contiguous().clone()
            C.all_reduce(out, ctx.reduce_op, group=ctx.g)
            return None, None, out

    return _AllReduce


_classes = {}


def _fn(name, make):
    if name not in _classes:
        _classes[name] = make()
    return _classes[name]


def all_gather(tensor, group=None):
    """Every rank's ``tensor`` (a tuple, in rank order), differentiable."""
    g = _group.WORLD if group is None else group
    if C.resolve(g, "all_gather") is None:
        raise ValueError("all_gather: this rank is not in the group")
    return _fn("all_gather", _make_all_gather).apply(g, tensor)


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """``tensor`` reduced over the ranks with ``op`` (a new tensor), differentiable for SUM and
    AVG."""
    g = _group.WORLD if group is None else group
    if C.resolve(g, "all_reduce") is None:
        raise ValueError("all_reduce: this rank is not in the group")
    return _fn("all_reduce", _make_all_reduce).apply(g, op, tensor)
