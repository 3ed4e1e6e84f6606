"""PyTorch's ``torch.distributed._functional_collectives``: collectives that return their result
as a new tensor (the input is left alone) instead of writing into a tensor given to them.

Libraries import it at start-up (Hugging Face ``diffusers`` does, for context parallelism) and
call ``all_reduce``/``all_gather_tensor``/``reduce_scatter_tensor``/``all_to_all_single``/
``broadcast``; here they run the ordinary collectives of :mod:`fiamma.distributed`
synchronously, so every result is complete when returned: ``wait_tensor`` gives its argument
back and :class:`AsyncCollectiveTensor` (PyTorch's wrapper of a result still in flight) is a
class to test against that no result is an instance of.

``group`` is a ProcessGroup (``dist.group.WORLD`` or one from ``new_group``), as in PyTorch;
lists of ranks and device meshes are not supported (fiamma has no device mesh). ``reduceOp``
is PyTorch's lower-case name (``"sum"``, ``"avg"``, ``"product"``, ``"min"``, ``"max"``,
``"band"``, ``"bor"``, ``"bxor"``) or a :class:`~fiamma.distributed.ReduceOp`. The results are
not differentiable (as PyTorch's, which warn; ``fiamma.distributed.nn.functional`` has the
differentiable collectives).
"""

import fiamma
from fiamma.distributed import _collectives as _C
from fiamma.distributed._group import ProcessGroup
from fiamma.distributed._mpi import ReduceOp
from fiamma.distributed._state import GroupMember, resolve
from fiamma.overrides import disabled_torch_function_impl as _disabled

__all__ = ["all_reduce", "all_gather_tensor", "reduce_scatter_tensor", "all_to_all_single",
           "broadcast", "wait_tensor", "AsyncCollectiveTensor"]


class AsyncCollectiveTensor(fiamma.Tensor):
    """PyTorch's wrapper of a functional collective's result still in flight. fiamma's
    functional collectives finish before returning plain tensors, so nothing is an instance of
    this class; it exists for ``isinstance`` checks."""

    __torch_function__ = _disabled

    def wait(self):
        return self


def wait_tensor(tensor):
    """The finished result of a functional collective: ``tensor`` itself (fiamma's functional
    collectives finish before they return)."""
    if not isinstance(tensor, fiamma.Tensor):
        raise TypeError(f"wait_tensor: expected a tensor, got {type(tensor).__name__}")
    return tensor


def _group(group, what):
    if group is None or group is GroupMember.WORLD or isinstance(group, ProcessGroup):
        return group
    raise TypeError(f"{what}: group must be a ProcessGroup (dist.group.WORLD or one from "
                    f"new_group), got {type(group).__name__}; fiamma's functional collectives "
                    "take no rank lists or device meshes")


def _op(reduce_op, what):
    if isinstance(reduce_op, ReduceOp):
        return reduce_op
    if isinstance(reduce_op, str):
        for op in ReduceOp:
            if op.value == reduce_op.lower():
                return op
    raise ValueError(f"{what}: reduceOp must be one of "
                     f"{[op.value for op in ReduceOp]} or a ReduceOp, got {reduce_op!r}")


def _size(g, what):
    return resolve(g, what).size()


def _check(t, what):
    if not isinstance(t, fiamma.Tensor):
        raise TypeError(f"{what}: expected a tensor, got {type(t).__name__}")
    return t.detach().contiguous()


def all_reduce(self, reduceOp, group, tag=""):  # noqa: N803  (PyTorch's argument name)
    """A new tensor holding the reduction of ``self`` over the ranks of ``group``."""
    what = "all_reduce"
    g, op = _group(group, what), _op(reduceOp, what)
    out = _check(self, what).clone()
    _C.all_reduce(out, op=op, group=g)
    return out


def all_gather_tensor(self, gather_dim, group, tag=""):
    """The ranks' ``self`` concatenated along ``gather_dim`` (in rank order)."""
    what = "all_gather_tensor"
    g = _group(group, what)
    t = _check(self, what)
    n = _size(g, what)
    if t.dim() == 0:
        raise ValueError(f"{what}: expected a tensor with at least one dimension, got a 0-d "
                         "tensor")
    gather_dim = _dim(gather_dim, t.dim(), what)
    out = fiamma.empty((n * t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
    _C.all_gather_into_tensor(out, t, group=g)
    if gather_dim != 0:
        out = fiamma.cat(out.chunk(n, dim=0), dim=gather_dim)
    return out


def reduce_scatter_tensor(self, reduceOp, scatter_dim, group, tag=""):  # noqa: N803
    """Rank r's share of the reduction of the ranks' ``self``: its r-th block along
    ``scatter_dim`` (whose size must divide by the group's size)."""
    what = "reduce_scatter_tensor"
    g, op = _group(group, what), _op(reduceOp, what)
    t = _check(self, what)
    n = _size(g, what)
    if t.dim() == 0:
        raise ValueError(f"{what}: expected a tensor with at least one dimension, got a 0-d "
                         "tensor")
    scatter_dim = _dim(scatter_dim, t.dim(), what)
    if t.shape[scatter_dim] % n:
        raise ValueError(f"{what}: dim {scatter_dim} of the input ({t.shape[scatter_dim]}) "
                         f"must divide by the group's size ({n})")
    if scatter_dim != 0:
        t = fiamma.cat(t.chunk(n, dim=scatter_dim), dim=0)
    out = fiamma.empty((t.shape[0] // n,) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
    _C.reduce_scatter_tensor(out, t, op=op, group=g)  # rank r's block along scatter_dim
    return out


def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag=""):
    """Rank r's slices (along dim 0) of every rank's ``self``, in rank order: equal slices
    unless the split sizes are given (then dim 0 of the result is ``sum(output_split_sizes)``)."""
    what = "all_to_all_single"
    g = _group(group, what)
    t = _check(self, what)
    rows = sum(int(s) for s in output_split_sizes) if output_split_sizes is not None else (
        t.shape[0] if t.dim() else 1)
    out = fiamma.empty((rows,) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
    _C.all_to_all_single(out, t, output_split_sizes, input_split_sizes, group=g)
    return out


def broadcast(self, src, group, tag=""):
    """A new tensor holding rank ``src``'s ``self`` (``src`` a global rank)."""
    what = "broadcast"
    g = _group(group, what)
    out = _check(self, what).clone()
    _C.broadcast(out, src, group=g)
    return out


def _dim(d, ndim, what):
    d = int(d)
    if not -ndim <= d < ndim:
        raise IndexError(f"{what}: dim {d} is out of range for a {ndim}-d tensor")
    return d % ndim
