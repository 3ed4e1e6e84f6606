"""The batched path of ``vmap``: the function runs once on ``BTensor`` stand-ins that carry
the mapped dimensions, and ops with a batching rule run on the whole batch.

A ``BTensor`` holds a real tensor whose leading dimensions are the vmap levels it is batched
over (``lv``: level ids, ascending, outer vmaps first), followed by the logical (per-element)
dimensions the function sees. Levels a tensor is not batched over are absent; when operands
meet, their levels are aligned (size-1 dimensions inserted) and the result carries the union.

Rules are installed, while an outermost batched call runs, over fiamma's function namespaces
(``fiamma``, ``fiamma.nn.functional``, ``fiamma.autograd.grad``; the ``torch`` aliases of
``fiamma.run`` too); ``BTensor`` methods use the same rules. Anything without a rule (an
unknown function, an attribute this class does not define, ``.item()``/``bool()``, an
in-place op, a random draw) raises :class:`Fallback` or a ``TypeError`` from core, and
``vmap`` reruns the function per element, which is exact.
"""

import math
import sys
import threading
import types

import fiamma
from fiamma import Tensor

_state = threading.local()
_LOCK = threading.RLock()


class Fallback(Exception):
    """An op met a ``BTensor`` and has no batching rule: ``vmap`` runs per element."""


def _sizes():
    d = getattr(_state, "sizes", None)
    if d is None:
        d = _state.sizes = {}
    return d


def level_size(lv):
    return _sizes()[lv]


_counter = [0]


def push_level(size):
    _counter[0] += 1
    lv = _counter[0]
    _sizes()[lv] = size
    return lv


def pop_level(lv):
    _sizes().pop(lv, None)


def active():
    return bool(getattr(_state, "sizes", None))


def _ub(x):
    return x._v if isinstance(x, BTensor) else x


def _lv(x):
    return x.lv if isinstance(x, BTensor) else ()


def _union(*xs):
    s = set()
    for x in xs:
        s.update(_lv(x))
    return tuple(sorted(s))


def _align(x, levels, rank=None, expand=False):
    """The real tensor of ``x`` with leading dims for ``levels`` (a superset of its own; size 1
    where ``x`` is not batched, or the level's size with ``expand``), its logical dims
    left-padded with size-1 dims to ``rank``."""
    t = _ub(x)
    have = _lv(x)
    if not set(have) <= set(levels):
        raise Fallback("aligning to fewer levels")
    lrank = t.dim() - len(have)
    rank = lrank if rank is None else rank
    # both level tuples ascend, so aligning only inserts size-1 dims
    pre = tuple(t.shape[have.index(lvl)] if lvl in have else 1 for lvl in levels)
    new = pre + (1,) * (rank - lrank) + tuple(t.shape[len(have):])
    if new != tuple(t.shape):
        t = t.reshape(new)
    if expand:
        full = tuple(p if lvl in have else level_size(lvl) for p, lvl in zip(pre, levels))
        if full != pre:
            t = t.expand(full + tuple(t.shape[len(levels):]))
    return t


def _wrap(t, levels):
    if not levels:
        return t
    return BTensor(t, levels)


def _map_tree(obj, fn):
    if isinstance(obj, (list, tuple)) and not isinstance(obj, Tensor):
        vals = [_map_tree(o, fn) for o in obj]
        return type(obj)(vals) if type(obj) in (list, tuple) else type(obj)(*vals)
    return fn(obj)


def _has_b(args, kwargs):
    for a in args:
        if isinstance(a, BTensor):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(b, BTensor) for b in a):
            return True
    return any(isinstance(v, BTensor) for v in kwargs.values())


# ---- rule kinds -------------------------------------------------------------------------------

def _ew(fn, *args, **kwargs):
    """Elementwise / broadcasting: every tensor argument aligned to the union of levels."""
    if kwargs.get("inplace"):
        raise Fallback(f"{_name(fn)}: in-place")
    tens = [a for a in list(args) + list(kwargs.values()) if isinstance(a, (Tensor, BTensor))]
    levels = _union(*tens)
    rank = max(_ub(a).dim() - len(_lv(a)) for a in tens)

    def conv(a):
        return _align(a, levels, rank) if isinstance(a, BTensor) else a

    out = fn(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})
    if isinstance(out, Tensor):
        return _wrap(out, levels)
    raise Fallback(f"{_name(fn)}: unexpected result")


def _name(fn):
    return getattr(fn, "__name__", repr(fn))


def _only_self(fn, args, kwargs):
    for a in list(args[1:]) + list(kwargs.values()):
        if isinstance(a, BTensor) or (isinstance(a, (list, tuple))
                                      and any(isinstance(b, BTensor) for b in a)):
            raise Fallback(f"{_name(fn)}: batched argument other than self")


def _rdim(d, nb, ldim):
    if isinstance(d, bool) or not isinstance(d, int):
        raise Fallback("dim is not an int")
    if d < -ldim or d >= max(ldim, 1):
        raise Fallback("dim out of range")
    return d + nb if d >= 0 else d


def _dims_arg(x, d):
    nb, ld = len(x.lv), x._v.dim() - len(x.lv)
    if d is None:
        return tuple(range(nb, nb + ld))
    if isinstance(d, (tuple, list)):
        return tuple(_rdim(i, nb, ld) for i in d)
    return _rdim(d, nb, ld)


def _wrap_out(out, levels):
    if isinstance(out, Tensor):
        return _wrap(out, levels)
    if isinstance(out, tuple):
        vals = [_wrap(o, levels) if isinstance(o, Tensor) else o for o in out]
        if type(out) is tuple:
            return tuple(vals)
        try:
            return type(out)(*vals)
        except TypeError:
            return type(out)(vals)
    if isinstance(out, list):
        return [_wrap(o, levels) if isinstance(o, Tensor) else o for o in out]
    raise Fallback("unexpected result")


def _dimop(pos=0, name="dim", none_all=True, required=False):
    """An op of ``self`` with a dim argument (positional index ``pos`` after self, or kw)."""
    def rule(fn, x, *args, **kwargs):
        _only_self(fn, (x,) + args, kwargs)
        args = list(args)
        if len(args) > pos:
            d = args[pos]
            if d is None and not none_all:
                raise Fallback("dim=None")
            args[pos] = _dims_arg(x, d)
        elif name in kwargs:
            d = kwargs[name]
            if d is None and not none_all:
                raise Fallback("dim=None")
            kwargs[name] = _dims_arg(x, d)
        elif required:
            raise Fallback("dim missing")
        elif none_all:
            if x._v.dim() == len(x.lv):
                return _wrap(fn(x._v, *args, **kwargs), x.lv)
            kwargs[name] = _dims_arg(x, None)
        else:
            raise Fallback("dim missing")
        return _wrap_out(fn(x._v, *args, **kwargs), x.lv)
    return rule


def _full_reduce(fn, x, *args, **kwargs):
    """``x.max()`` style full reductions (no dim): over the flattened logical dims."""
    if args and isinstance(args[0], (Tensor, BTensor)):
        return _ew(fn, x, *args, **kwargs)  # max(a, b): elementwise
    _only_self(fn, (x,) + args, kwargs)
    if args or kwargs:
        return _dimop(0, "dim", none_all=False)(fn, x, *args, **kwargs)
    flat = x._v.reshape(tuple(x._v.shape[:len(x.lv)]) + (-1,))
    return _wrap(fn(flat, dim=-1)[0] if _name(fn) in ("max", "min") else fn(flat, dim=-1), x.lv)


def _logical(x):
    return tuple(x._v.shape[len(x.lv):])


def _prefix(x):
    return tuple(x._v.shape[:len(x.lv)])


def _shape_args(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list, fiamma.Size)):
        return tuple(args[0])
    return tuple(args)


def _reshape(fn, x, *args, **kwargs):
    _only_self(fn, (x,) + args, kwargs)
    shape = _shape_args(args) if args else tuple(kwargs.pop("shape", kwargs.pop("size", ())))
    if kwargs or any(isinstance(s, bool) or not isinstance(s, int) for s in shape):
        raise Fallback("reshape: unusual arguments")
    return _wrap(fn(x._v, _prefix(x) + shape), x.lv)


def _expand(fn, x, *args, **kwargs):
    _only_self(fn, (x,) + args, kwargs)
    shape = _shape_args(args)
    if kwargs:
        raise Fallback("expand: keywords")
    lrank = x._v.dim() - len(x.lv)
    if len(shape) < lrank:
        raise Fallback("expand: fewer dims")
    t = _align(x, x.lv, len(shape))
    return _wrap(t.expand(_prefix(x) + tuple(shape)), x.lv)


def _permute(fn, x, *args, **kwargs):
    _only_self(fn, (x,) + args, kwargs)
    dims = _shape_args(args) if args else tuple(kwargs.pop("dims"))
    nb, ld = len(x.lv), x._v.dim() - len(x.lv)
    if len(dims) != ld:
        raise Fallback("permute: wrong number of dims")
    real = tuple(range(nb)) + tuple(_rdim(d, nb, ld) % (nb + ld) for d in dims)
    return _wrap(x._v.permute(real), x.lv)


def _two_dims(fn, x, *args, **kwargs):
    """transpose / swapaxes / movedim with two dim args."""
    _only_self(fn, (x,) + args, kwargs)
    if len(args) != 2 or kwargs:
        raise Fallback("two dims expected")
    nb, ld = len(x.lv), x._v.dim() - len(x.lv)
    a, b = args
    if isinstance(a, (tuple, list)):
        a = tuple(_rdim(i, nb, ld) for i in a)
        b = tuple(_rdim(i, nb, ld) for i in b)
    else:
        a, b = _rdim(a, nb, ld), _rdim(b, nb, ld)
    return _wrap(fn(x._v, a, b), x.lv)


def _t(fn, x, *args, **kwargs):
    ld = x._v.dim() - len(x.lv)
    if ld < 2:
        return x
    return _wrap(x._v.transpose(-1, -2), x.lv)


def _flatten(fn, x, start_dim=0, end_dim=-1):
    nb, ld = len(x.lv), x._v.dim() - len(x.lv)
    if ld == 0:
        return _wrap(x._v.reshape(_prefix(x) + (1,)), x.lv)
    return _wrap(fn(x._v, _rdim(start_dim, nb, ld), _rdim(end_dim, nb, ld)), x.lv)


def _squeeze(fn, x, *args, **kwargs):
    _only_self(fn, (x,) + args, kwargs)
    d = args[0] if args else kwargs.get("dim")
    if d is None:
        shape = tuple(s for s in _logical(x) if s != 1)
        return _wrap(x._v.reshape(_prefix(x) + shape), x.lv)
    return _wrap(fn(x._v, _dims_arg(x, d)), x.lv)


def _unsqueeze(fn, x, d):
    nb, ld = len(x.lv), x._v.dim() - len(x.lv)
    if isinstance(d, bool) or not isinstance(d, int) or not -ld - 1 <= d <= ld:
        raise Fallback("unsqueeze: dim")
    return _wrap(x._v.unsqueeze(d + nb if d >= 0 else d), x.lv)


def _same(fn, x, *args, **kwargs):
    """Ops that act on the whole tensor without reading its shape (clone, contiguous, to)."""
    _only_self(fn, (x,) + args, kwargs)
    if "memory_format" in kwargs:
        raise Fallback("memory_format")
    return _wrap_out(fn(x._v, *args, **kwargs), x.lv)


def _getitem(fn, x, idx):
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_adv = 0
    for i in idx:
        if isinstance(i, BTensor):
            raise Fallback("batched index")
        if isinstance(i, (Tensor, list)):
            if isinstance(i, Tensor) and i.dtype == fiamma.bool:
                raise Fallback("boolean mask index")
            n_adv += 1
        elif i is None or i is Ellipsis or isinstance(i, (int, slice)):
            continue
        else:
            raise Fallback("index type")
    if n_adv > 1 or (n_adv and any(isinstance(i, int) for i in idx)):
        raise Fallback("several advanced indices")
    if isinstance(idx[0], bool) or any(isinstance(i, bool) for i in idx):
        raise Fallback("bool index")
    return _wrap(x._v[(slice(None),) * len(x.lv) + idx], x.lv)


def _matmul(fn, a, b):
    levels = _union(a, b)
    ra = _ub(a).dim() - len(_lv(a))
    rb = _ub(b).dim() - len(_lv(b))
    if ra == 0 or rb == 0:
        raise Fallback("matmul of a scalar")
    ta, tb = _ub(a), _ub(b)
    if ra == 1 and isinstance(a, BTensor) and not isinstance(b, BTensor) and rb >= 2:
        if rb == 2:  # a batch of vectors times one matrix: one matrix product
            return _wrap(fiamma.matmul(ta, tb), levels)
    if isinstance(a, BTensor):
        ta = _align(a, levels, ra)
    if isinstance(b, BTensor):
        tb = _align(b, levels, rb)
    if ra == 1:
        ta = ta.unsqueeze(-2)
    if rb == 1:
        tb = tb.unsqueeze(-1)
    r = max(ra, rb, 2)
    if isinstance(a, BTensor):
        ta = _align(BTensor(ta, levels), levels, r)
    if isinstance(b, BTensor):
        tb = _align(BTensor(tb, levels), levels, r)
    out = fiamma.matmul(ta, tb)
    if rb == 1:
        out = out.squeeze(-1)
    if ra == 1:
        out = out.squeeze(-1 if rb == 1 else -2)
    return _wrap(out, levels)


def _mm_like(ra, rb):
    def rule(fn, a, b, *args, **kwargs):
        if args or kwargs:
            raise Fallback(f"{_name(fn)}: extra arguments")
        for x, r in ((a, ra), (b, rb)):
            if _ub(x).dim() - len(_lv(x)) != r:
                raise Fallback(f"{_name(fn)}: rank")
        return _matmul(fn, a, b)
    return rule


def _linear(fn, x, weight, bias=None):
    if isinstance(weight, BTensor):
        if _ub(weight).dim() - len(weight.lv) != 2:
            raise Fallback("linear: weight rank")
        out = _matmul(None, x, _t(None, weight))
    else:
        if not isinstance(x, BTensor):
            raise Fallback("linear")
        out = BTensor(fn(x._v, weight), x.lv)
    if bias is not None:
        out = _ew(fiamma.add, out, bias)
    return out


def _einsum(fn, eq, *ops):
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = tuple(ops[0])
    if not isinstance(eq, str) or "->" not in eq:
        raise Fallback("einsum: implicit output")
    eq = eq.replace(" ", "")
    lhs, rhs = eq.split("->")
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise Fallback("einsum: operands")
    levels = _union(*ops)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in eq]
    letters = dict(zip(levels, free))
    new_terms, reals = [], []
    for term, op in zip(terms, ops):
        lvs = _lv(op)
        new_terms.append("".join(letters[lvl] for lvl in lvs) + term)
        reals.append(_ub(op))
    out = "".join(letters[lvl] for lvl in levels) + rhs
    return _wrap(fn(",".join(new_terms) + "->" + out, *reals), levels)


def _cat(stack):
    def rule(fn, tensors, dim=0, **kwargs):
        if kwargs:
            raise Fallback("cat/stack: keywords")
        tensors = list(tensors)
        levels = _union(*tensors)
        ranks = {_ub(t).dim() - len(_lv(t)) for t in tensors}
        if len(ranks) != 1:
            raise Fallback("cat/stack: ranks differ")
        ld = ranks.pop() + (1 if stack else 0)
        reals = [_align(t, levels, expand=True) if isinstance(t, BTensor)
                 else t.expand(tuple(level_size(lvl) for lvl in levels) + tuple(t.shape))
                 for t in tensors]
        return _wrap(fn(reals, _rdim(dim, len(levels), ld)), levels)
    return rule


def _split(fn, x, size_or_sections, dim=0):
    return _wrap_out(fn(x._v, size_or_sections, _rdim(dim, len(x.lv), x._v.dim() - len(x.lv))),
                     x.lv)


def _unbind(fn, x, dim=0):
    return _wrap_out(fn(x._v, _rdim(dim, len(x.lv), x._v.dim() - len(x.lv))), x.lv)


def _select(fn, x, dim, index):
    return _wrap(fn(x._v, _rdim(dim, len(x.lv), x._v.dim() - len(x.lv)), index), x.lv)


def _narrow(fn, x, dim, start, length):
    return _wrap(fn(x._v, _rdim(dim, len(x.lv), x._v.dim() - len(x.lv)), start, length), x.lv)


def _fold(x, levels, nonbatch_rank):
    """The real tensor of ``x`` expanded to ``levels``, the levels (with the logical batch dim,
    if it has one) folded into one leading dim: (prod, C, *spatial)."""
    t = _align(x, levels, expand=True)
    nb = len(levels)
    unbatched = t.dim() - nb == nonbatch_rank
    pre = tuple(t.shape[:nb])
    return t.reshape((-1,) + tuple(t.shape[nb + (0 if unbatched else 1):])), pre, unbatched


def _unfold(out, pre, unbatched):
    if unbatched:
        return out.reshape(pre + tuple(out.shape[1:]))
    return out.reshape(pre + (-1,) + tuple(out.shape[1:]))


def _conv(nd):
    def rule(fn, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        levels = _union(x, weight, bias)
        if isinstance(padding, str) and isinstance(weight, BTensor):
            raise Fallback("conv: string padding with batched weight")
        if not isinstance(weight, BTensor) and not isinstance(bias, BTensor):
            t, pre, unb = _fold(x, levels, nd + 1)
            return _wrap(_unfold(fn(t, weight, bias, stride, padding, dilation, groups), pre,
                                 unb), levels)
        # batched weights: one grouped convolution, the levels folded into the channels
        t = _align(x, levels, expand=True)
        lrank = t.dim() - len(levels)
        unb = lrank == nd + 1
        pre = tuple(t.shape[:len(levels)])
        p = math.prod(pre)
        if unb:
            t = t.unsqueeze(len(levels))
        n = t.shape[len(levels)]
        t = t.reshape((p, n) + tuple(t.shape[len(levels) + 1:]))
        t = t.transpose(0, 1).reshape((n, -1) + tuple(t.shape[3:]))
        w = _align(weight, levels, expand=True)
        w = w.reshape((-1,) + tuple(w.shape[len(levels) + 1:]))
        b = None
        if bias is not None:
            b = _align(bias, levels, expand=True).reshape(-1)
        out = fn(t, w, b, stride, padding, dilation, groups * p)
        out = out.reshape((n, p, -1) + tuple(out.shape[2:])).transpose(0, 1)
        out = out.reshape(pre + (n,) + tuple(out.shape[2:]))
        if unb:
            out = out.squeeze(len(levels))
        return _wrap(out, levels)
    return rule


def _pool(nd):
    def rule(fn, x, *args, **kwargs):
        _only_self(fn, (x,) + args, kwargs)
        t, pre, unb = _fold(x, x.lv, nd + 1)
        out = fn(t, *args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_wrap(_unfold(o, pre, unb), x.lv) for o in out)
        return _wrap(_unfold(out, pre, unb), x.lv)
    return rule


def _last_dims(fn, x, *args, **kwargs):
    """Ops on the last dims with unbatched extra tensors (layer_norm, embedding...)."""
    _only_self(fn, (x,) + args, kwargs)
    return _wrap(fn(x._v, *args, **kwargs), x.lv)


def _embedding(fn, idx, weight, *args, **kwargs):
    if isinstance(weight, BTensor) or not isinstance(idx, BTensor):
        raise Fallback("embedding: batched weight")
    _only_self(fn, (idx, weight) + args, kwargs)
    return _wrap(fn(idx._v, weight, *args, **kwargs), idx.lv)


def _dropout(fn, x, p=0.5, training=True, inplace=False):
    if not training or p == 0:
        return x
    raise Fallback("dropout draws random numbers")


def _true(fn, *args, **kwargs):
    return True


def _reduce_loss(loss, levels, reduction):
    if reduction == "none":
        return loss
    dims = tuple(range(len(levels), loss.dim()))
    if not dims:
        return loss
    return loss.sum(dims) if reduction == "sum" else loss.mean(dims)


def _pointwise_loss(fn, input, target, *args, reduction="mean", **kwargs):
    if args:
        raise Fallback(f"{_name(fn)}: positional options")
    levels = _union(input, target)
    rank = max(_ub(input).dim() - len(_lv(input)), _ub(target).dim() - len(_lv(target)))
    a = _align(input, levels, rank, expand=True) if isinstance(input, BTensor) else \
        input.expand(tuple(level_size(lvl) for lvl in levels) + tuple(input.shape))
    b = _align(target, levels, rank, expand=True) if isinstance(target, BTensor) else \
        target.expand(tuple(level_size(lvl) for lvl in levels) + tuple(target.shape))
    if tuple(a.shape) != tuple(b.shape):
        raise Fallback(f"{_name(fn)}: shapes differ")
    loss = fn(a, b, reduction="none", **kwargs)
    return _wrap(_reduce_loss(loss, levels, reduction), levels)


def _class_loss(fn, input, target, weight=None, size_average=None, ignore_index=-100,
                reduce=None, reduction="mean", **kwargs):
    """cross_entropy / nll_loss: the levels folded into the batch of samples."""
    if size_average is not None or reduce is not None or isinstance(weight, BTensor):
        raise Fallback(f"{_name(fn)}: legacy or batched options")
    levels = _union(input, target)
    li = _ub(input).dim() - len(_lv(input))
    x = _align(input, levels, expand=True) if isinstance(input, BTensor) else \
        input.expand(tuple(level_size(lvl) for lvl in levels) + tuple(input.shape))
    y = _align(target, levels, expand=True) if isinstance(target, BTensor) else \
        target.expand(tuple(level_size(lvl) for lvl in levels) + tuple(target.shape))
    nb = len(levels)
    pre = tuple(x.shape[:nb])
    probs = y.dtype.is_floating_point
    if li == 1:  # one sample: (C,) with a scalar class or (C,) probabilities
        xs = x.reshape((-1, x.shape[-1]))
        ys = y.reshape((-1, y.shape[-1])) if probs else y.reshape(-1)
        loss = fn(xs, ys, weight, ignore_index=ignore_index, reduction="none", **kwargs)
        loss = loss.reshape(pre)
        if reduction == "mean" and not probs and weight is None:
            keep = (y != ignore_index).to(loss.dtype)
            loss = loss * 0 + loss / keep  # nan where ignored, as PyTorch's mean of nothing
        elif reduction == "mean" and weight is not None and not probs:
            raise Fallback(f"{_name(fn)}: weighted mean of one sample")
        return _wrap(loss, levels)
    if li != 2 or (reduction == "mean" and weight is not None):
        raise Fallback(f"{_name(fn)}: input rank or weighted mean")
    n = x.shape[nb]
    xs = x.reshape((-1, x.shape[-1]))
    ys = y.reshape((-1, y.shape[-1])) if probs else y.reshape(-1)
    loss = fn(xs, ys, weight, ignore_index=ignore_index, reduction="none", **kwargs)
    loss = loss.reshape(pre + (n,))
    if reduction == "none":
        return _wrap(loss, levels)
    if reduction == "sum":
        return _wrap(loss.sum(-1), levels)
    if probs:
        return _wrap(loss.mean(-1), levels)
    count = (y != ignore_index).sum(-1).to(loss.dtype)
    return _wrap(loss.sum(-1) / count, levels)


def _batch_norm(fn, x, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    """Inference-mode batch norm (running statistics): per channel, so the levels fold into
    N. Training mode computes statistics over each element's batch: per element (fallback)."""
    if training or not isinstance(x, BTensor) or any(
            isinstance(a, BTensor) for a in (running_mean, running_var, weight, bias)):
        raise Fallback("batch_norm: training mode or batched statistics")
    if x._v.dim() - len(x.lv) < 2:
        raise Fallback("batch_norm: input without a batch dim")
    t, pre, unb = _fold(x, x.lv, None)  # logical (N, C, ...): N folds with the levels
    out = fn(t, running_mean, running_var, weight, bias, False, momentum, eps)
    return _wrap(_unfold(out, pre, unb), x.lv)


def _pad(fn, x, pad, mode="constant", value=None):
    """F.pad: constant padding of trailing dims works on the real tensor as it is; the
    other modes want a (N, C, *spatial) input: the levels fold into N."""
    if isinstance(pad, BTensor) or len(pad) % 2 or len(pad) // 2 > x._v.dim() - len(x.lv):
        raise Fallback("pad: arguments")
    if mode == "constant":
        return _wrap(fn(x._v, pad, mode, value), x.lv)
    nd = len(pad) // 2
    t, pre, unb = _fold(x, x.lv, nd + 1)
    if t.dim() != nd + 2:
        raise Fallback("pad: input rank for a non-constant mode")
    return _wrap(_unfold(fn(t, pad, mode, value), pre, unb), x.lv)


def _inplace(fn, *args, **kwargs):
    raise Fallback(f"{_name(fn)}: in-place op on a batched tensor")


def _like(fn, x, *args, **kwargs):
    """zeros_like & co: same shape as x (batched)."""
    _only_self(fn, (x,) + args, kwargs)
    return _wrap(fn(x._v, *args, **kwargs), x.lv)


def _autograd_grad(fn, outputs, inputs, grad_outputs=None, retain_graph=None,
                   create_graph=False, only_inputs=True, allow_unused=None,
                   is_grads_batched=False, materialize_grads=False):
    if is_grads_batched or materialize_grads:
        raise Fallback("autograd.grad: is_grads_batched/materialize_grads")
    one_out = not isinstance(outputs, (list, tuple))
    outs = [outputs] if one_out else list(outputs)
    ins_single = not isinstance(inputs, (list, tuple))
    ins = [inputs] if ins_single else list(inputs)
    if grad_outputs is None:
        cts = [None] * len(outs)
    elif not isinstance(grad_outputs, (list, tuple)):
        cts = [grad_outputs]
    else:
        cts = list(grad_outputs)
    kw = dict(retain_graph=retain_graph, create_graph=create_graph,
              allow_unused=allow_unused)
    need = set(_union(*outs))
    for x in ins:
        if not need <= set(_lv(x)):
            # a shared input would get the sum of the elements' gradients
            raise Fallback("autograd.grad: an input is not batched like the outputs")
    res = _grad_batched(fn, outs, ins, cts, kw)
    return tuple(res)


def _grad_batched(fn, outs, ins, cts, kw):
    extra = set()
    for o, c in zip(outs, cts):
        if c is not None:
            extra.update(set(_lv(c)) - set(_lv(o)))
    if extra:
        # cotangents batched over levels their outputs are not: one backward per element
        e = min(extra)
        n = level_size(e)
        kw = dict(kw, retain_graph=True)
        rows = []
        for i in range(n):
            ci = [c.select_level(e, i) if isinstance(c, BTensor) and e in c.lv else c
                  for c in cts]
            rows.append(_grad_batched(fn, outs, ins, ci, kw))
        res = []
        for j in range(len(ins)):
            col = [r[j] for r in rows]
            if all(g is None for g in col):
                res.append(None)
                continue
            col = [fiamma.zeros_like(_ub(ins[j])) if g is None else g for g in col]
            levels = tuple(sorted(set(_union(*col)) | {e}))
            stacked = fiamma.stack([_align(g, tuple(lv for lv in levels if lv != e),
                                           expand=True) for g in col])
            # the new level sits at position 0: move it to its sorted place
            pos = levels.index(e)
            res.append(BTensor(stacked.movedim(0, pos), levels))
        return res
    real_outs, real_cts = [], []
    for o, c in zip(outs, cts):
        ot = _ub(o)
        if c is None:
            real_cts.append(fiamma.ones_like(ot) if isinstance(o, BTensor) else None)
        else:
            real_cts.append(_align(c, _lv(o), _ub(o).dim() - len(_lv(o)), expand=True)
                            .expand(ot.shape) if isinstance(o, BTensor) else _ub(c))
        real_outs.append(ot)
    gs = fn(real_outs, [_ub(x) for x in ins], real_cts, **kw)
    return [None if g is None else _wrap(g, _lv(x)) for g, x in zip(gs, ins)]


# ---- the BTensor class ---------------------------------------------------------------------

class BTensor:
    """A tensor batched over vmap levels (see the module docstring). Not a ``Tensor``: an
    attribute or function without a batching rule fails and ``vmap`` falls back."""

    __slots__ = ("_v", "lv", "__weakref__")

    def __init__(self, t, lv):
        self._v = t
        self.lv = tuple(lv)

    # metadata
    @property
    def shape(self):
        return fiamma.Size(self._v.shape[len(self.lv):])

    def size(self, dim=None):
        s = self.shape
        return s if dim is None else s[dim]

    def dim(self):
        return self._v.dim() - len(self.lv)

    @property
    def ndim(self):
        return self.dim()

    def numel(self):
        return math.prod(self.shape)

    def nelement(self):
        return self.numel()

    def __len__(self):
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def dtype(self):
        return self._v.dtype

    @property
    def device(self):
        return self._v.device

    @property
    def layout(self):
        return self._v.layout

    @property
    def is_cuda(self):
        return self._v.is_cuda

    def is_floating_point(self):
        return self._v.is_floating_point()

    def is_complex(self):
        return self._v.is_complex()

    @property
    def requires_grad(self):
        return self._v.requires_grad

    @property
    def grad_fn(self):
        return self._v.grad_fn

    @property
    def is_leaf(self):
        return self._v.is_leaf

    def requires_grad_(self, flag=True):
        self._v.requires_grad_(flag)
        return self

    def detach(self):
        return BTensor(self._v.detach(), self.lv)

    @property
    def data(self):
        return BTensor(self._v.data, self.lv)

    def view_as(self, other):
        return self.reshape(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def expand_as(self, other):
        return self.expand(other.shape)

    def type_as(self, other):
        return self.to(other.dtype)

    def new_zeros(self, *a, **k):
        return self._v.new_zeros(*a, **k)

    def new_ones(self, *a, **k):
        return self._v.new_ones(*a, **k)

    def new_empty(self, *a, **k):
        return self._v.new_empty(*a, **k)

    def new_full(self, *a, **k):
        return self._v.new_full(*a, **k)

    def new_tensor(self, *a, **k):
        return self._v.new_tensor(*a, **k)

    @property
    def T(self):
        if self.dim() > 2:
            raise Fallback("T of more than 2 dims")
        return _t(None, self)

    @property
    def mT(self):
        if self.dim() < 2:
            raise Fallback("mT of fewer than 2 dims")
        return BTensor(self._v.transpose(-1, -2), self.lv)

    def select_level(self, level, i):
        pos = self.lv.index(level)
        return _wrap(self._v.select(pos, i), self.lv[:pos] + self.lv[pos + 1:])

    def __iter__(self):
        return iter([self[i] for i in range(len(self))])

    def __getitem__(self, idx):
        return _getitem(None, self, idx)

    def __setitem__(self, idx, value):
        raise Fallback("item assignment into a batched tensor")

    def __bool__(self):
        raise Fallback("bool() of a batched tensor (data-dependent control flow)")

    def __float__(self):
        raise Fallback("float() of a batched tensor")

    def __int__(self):
        raise Fallback("int() of a batched tensor")

    def __index__(self):
        raise Fallback("index from a batched tensor")

    def __repr__(self):
        return f"BTensor(levels={self.lv}, logical shape={tuple(self.shape)})"

    def __getattr__(self, name):
        rule = _METHODS.get(name)
        if rule is None:
            if name.endswith("_") and not name.endswith("__"):
                raise Fallback(f"{name}: in-place op on a batched tensor")
            raise Fallback(f"Tensor.{name}: no batching rule")
        fn = getattr(Tensor, name)

        def method(*a, **k):
            if k.get("out") is not None:
                raise Fallback(f"Tensor.{name}: out= on a batched tensor")
            return rule(fn, self, *a, **k)
        return method

    __hash__ = object.__hash__


def _binop(name):
    forward = "__" + name[3:] if name.startswith("__r") and name[3:] not in ("shift__",) else None

    def op(self, other):
        if not isinstance(other, (BTensor, Tensor, int, float, bool, complex)):
            return NotImplemented
        if forward is not None and hasattr(Tensor, forward) and isinstance(other, Tensor):
            # plain tensor on the left: the forward op with the operands in their order
            return _ew(getattr(Tensor, forward), other, self)
        return _ew(getattr(Tensor, name), self, other)
    return op


for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
           "__rtruediv__", "__floordiv__", "__rfloordiv__", "__pow__", "__rpow__", "__mod__",
           "__rmod__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__",
           "__or__", "__xor__", "__rand__", "__ror__", "__rxor__"):
    setattr(BTensor, _n, _binop(_n))
BTensor.__hash__ = object.__hash__


def _no_inplace(name):
    def op(self, other):
        raise Fallback(f"{name}: in-place op on a batched tensor")
    return op


for _n in ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__ipow__",
           "__imod__", "__iand__", "__ior__", "__ixor__", "__imatmul__"):
    setattr(BTensor, _n, _no_inplace(_n))


def _unary_dunder(name):
    def op(self):
        return _ew(getattr(Tensor, name), self)
    return op


for _n in ("__neg__", "__abs__", "__invert__", "__pos__"):
    if hasattr(Tensor, _n):
        setattr(BTensor, _n, _unary_dunder(_n))


def _mm_dunder(self, other):
    if not isinstance(other, (BTensor, Tensor)):
        return NotImplemented
    return _matmul(None, self, other)


def _rmm_dunder(self, other):
    if not isinstance(other, (BTensor, Tensor)):
        return NotImplemented
    return _matmul(None, other, self)


BTensor.__matmul__ = _mm_dunder
BTensor.__rmatmul__ = _rmm_dunder


# ---- rule tables ---------------------------------------------------------------------------

_EW = ("add sub subtract mul multiply div divide true_divide pow neg negative exp exp2 expm1 "
       "log log2 log10 log1p sqrt rsqrt square abs sign sgn sin cos tan asin acos atan sinh "
       "cosh tanh asinh acosh atanh sigmoid relu erf erfc erfinv reciprocal floor ceil round "
       "trunc frac clamp clip clamp_min clamp_max maximum minimum fmax fmin where lerp "
       "atan2 remainder fmod eq ne lt le gt ge logical_and logical_or logical_not "
       "logical_xor isnan isinf isfinite nan_to_num hypot xlogy addcmul addcdiv float_power "
       "positive heaviside copysign logaddexp sinc deg2rad rad2deg softplus silu gelu mish "
       "hardtanh relu6 elu selu celu leaky_relu hardsigmoid hardswish logsigmoid softsign "
       "tanhshrink hardshrink softshrink threshold sigmoid_ bitwise_and bitwise_or "
       "bitwise_not").split()
_DIM_REDUCE = "sum mean prod amax amin std var logsumexp nansum nanmean".split()
_DIM_REQUIRED = "softmax log_softmax cumsum cumprod argmax argmin".split()
_VIEW = {
    "reshape": _reshape, "view": _reshape, "expand": _expand, "permute": _permute,
    "transpose": _two_dims, "swapaxes": _two_dims, "swapdims": _two_dims,
    "movedim": _two_dims, "moveaxis": _two_dims, "t": _t, "flatten": _flatten,
    "squeeze": _squeeze, "unsqueeze": _unsqueeze, "select": _select, "narrow": _narrow,
    "split": _split, "chunk": _split, "unbind": _unbind, "contiguous": _same,
    "clone": _same, "to": _same, "float": _same, "double": _same, "half": _same,
    "bfloat16": _same, "long": _same, "int": _same, "bool": _same, "cpu": _same,
    "matmul": _matmul, "mm": _mm_like(2, 2), "mv": _mm_like(2, 1), "dot": _mm_like(1, 1),
    "bmm": _mm_like(3, 3), "inner": _mm_like(1, 1), "outer": None,
    "zeros_like": _like, "ones_like": _like, "empty_like": _like, "full_like": _like,
    "max": _full_reduce, "min": _full_reduce,
}
_FUNCTIONAL = {
    "linear": _linear, "conv1d": _conv(1), "conv2d": _conv(2), "conv3d": _conv(3),
    "max_pool1d": _pool(1), "max_pool2d": _pool(2), "max_pool3d": _pool(3),
    "avg_pool1d": _pool(1), "avg_pool2d": _pool(2), "avg_pool3d": _pool(3),
    "adaptive_avg_pool1d": _pool(1), "adaptive_avg_pool2d": _pool(2),
    "adaptive_avg_pool3d": _pool(3), "adaptive_max_pool2d": _pool(2),
    "layer_norm": _last_dims, "embedding": _embedding, "dropout": _dropout, "pad": _pad,
    "mse_loss": _pointwise_loss, "l1_loss": _pointwise_loss, "smooth_l1_loss": _pointwise_loss,
    "huber_loss": _pointwise_loss, "binary_cross_entropy_with_logits": _pointwise_loss,
    "binary_cross_entropy": _pointwise_loss,
    "cross_entropy": _class_loss, "nll_loss": _class_loss,
    "softmax": _dimop(0, "dim", none_all=False, required=True),
    "log_softmax": _dimop(0, "dim", none_all=False, required=True),
    "batch_norm": _batch_norm,
}


def _build():
    methods, funcs = {}, {}
    for n in _EW:
        methods[n] = funcs[n] = _ew
        methods[n + "_"] = _inplace
    for n in _DIM_REDUCE:
        methods[n] = funcs[n] = _dimop(0, "dim")
    for n in _DIM_REQUIRED:
        methods[n] = funcs[n] = _dimop(0, "dim", none_all=n.startswith("arg"),
                                       required=not n.startswith("arg"))
    for n, r in _VIEW.items():
        if r is not None:
            methods[n] = funcs[n] = r
    methods["norm"] = funcs["norm"] = _dimop(1, "dim")
    funcs["is_tensor"] = _true
    funcs["einsum"] = _einsum
    funcs["stack"] = _cat(True)
    funcs["cat"] = funcs["concat"] = funcs["concatenate"] = _cat(False)
    return methods, funcs


_METHODS, _FUNCS = _build()
# F.* names: the module-level ones and the functional-only ones
_FUNCS_F = dict(_FUNCS)
_FUNCS_F.update(_FUNCTIONAL)


# ---- installing the rules --------------------------------------------------------------------

def _patched(fn, rule):
    def wrapper(*args, **kwargs):
        if _has_b(args, kwargs):
            if kwargs.get("out") is not None:
                raise Fallback(f"{_name(fn)}: out= with a batched argument")
            return rule(fn, *args, **kwargs)
        return fn(*args, **kwargs)
    wrapper.__wrapped__ = fn
    wrapper.__fx_original__ = fn  # fiamma.run's torch aliases do not cache it
    wrapper.__name__ = getattr(fn, "__name__", "fn")
    wrapper._vmap_rule = True
    return wrapper


_WRAPPERS = {}  # (id(fn), id(rule)) -> (fn, wrapper); fn kept so its id stays its own
_SPACES = {"n": -1, "spaces": []}


def _wrapper_for(fn, rule):
    key = (id(fn), id(rule))
    hit = _WRAPPERS.get(key)
    if hit is None:
        hit = _WRAPPERS[key] = (fn, _patched(fn, rule))
    return hit[1]


def _namespaces():
    """(attribute dict, rule table) for fiamma, fiamma.nn.functional, fiamma.autograd and the
    ``torch`` aliases of ``fiamma.run`` that stand for them (recomputed when modules are
    added)."""
    n = len(sys.modules)
    if _SPACES["n"] != n:
        import fiamma.autograd as ag
        import fiamma.nn.functional as F

        tables = {id(fiamma): _FUNCS, id(F): _FUNCS_F, id(ag): {"grad": _autograd_grad}}
        spaces = [(vars(m), tables[id(m)]) for m in (fiamma, F, ag)]
        for m in list(sys.modules.values()):
            if isinstance(m, types.ModuleType):
                target = m.__dict__.get("_fiamma_target")
                if target is not None and id(target) in tables and target is not m:
                    spaces.append((m.__dict__, tables[id(target)]))
        _SPACES.update(n=len(sys.modules), spaces=spaces)
    return _SPACES["spaces"]


class _Installer:
    def __init__(self):
        self.saved = []
        self.depth = 0
        self.by_fn = {}  # id(original function) -> its wrapper, while installed

    def install(self):
        for d, table in _namespaces():
            for name, rule in table.items():
                fn = d.get(name)
                if fn is None or getattr(fn, "_vmap_rule", False) or not callable(fn):
                    continue
                w = _wrapper_for(fn, rule)
                self.by_fn[id(fn)] = w
                self.saved.append((d, name, fn))
                d[name] = w
        # conv modules keep F.convNd in a table of their own
        conv = sys.modules.get("fiamma.nn.modules.conv")
        table = getattr(conv, "_CONV_FN", None)
        if isinstance(table, dict):
            for k, fn in list(table.items()):
                rule = _FUNCS_F.get(_name(fn))
                if rule is not None and not getattr(fn, "_vmap_rule", False):
                    self.saved.append((table, k, fn))
                    table[k] = _wrapper_for(fn, rule)

    def restore(self):
        for d, name, fn in reversed(self.saved):
            d[name] = fn
        self.saved.clear()
        self.by_fn.clear()


def with_rule(fn):
    """``fn`` itself, or (for a function with a rule, as in ``vmap(fiamma.dot)``) its
    wrapper while the rules are installed."""
    return _installer.by_fn.get(id(fn), fn)


_installer = _Installer()


class rules_installed:
    """Context manager: the batching rules are installed while any batched vmap runs."""

    def __enter__(self):
        _LOCK.acquire()
        if _installer.depth == 0:
            try:
                _installer.install()
            except BaseException:
                _installer.restore()
                _LOCK.release()
                raise
        _installer.depth += 1
        return self

    def __exit__(self, *exc):
        _installer.depth -= 1
        if _installer.depth == 0:
            _installer.restore()
        _LOCK.release()


# ---- helpers for the transforms and vmap ---------------------------------------------------

def is_tensor(x):
    return isinstance(x, (Tensor, BTensor))


def unwrap(x):
    return _ub(x)


def levels_of(tree):
    """The levels of every ``BTensor`` in a nested structure (sorted)."""
    s = set()
    stack = [tree]
    while stack:
        o = stack.pop()
        if isinstance(o, BTensor):
            s.update(o.lv)
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
    return tuple(sorted(s))


def expand_to(x, levels):
    """``x`` batched over at least ``levels`` (copies broadcast along new levels)."""
    levels = tuple(sorted(set(levels) | set(_lv(x))))
    if levels == _lv(x):
        return x
    # materialized: kernels on broadcast (stride-0) operands take slow paths
    return BTensor(_align(x, levels, expand=True).contiguous(), levels)


def enter(x, d, level):
    """An input of ``vmap``: dimension ``d`` of ``x`` becomes level ``level`` (the newest)."""
    if isinstance(x, BTensor):
        nb = len(x.lv)
        return BTensor(x._v.movedim(nb + d, nb) if d else x._v, x.lv + (level,))
    return BTensor(x.movedim(d, 0) if d else x, (level,))


def leave(x, level, d, size):
    """An output of ``vmap``: level ``level`` of ``x`` moved to logical dimension ``d``
    (``x`` not batched over it: copies stacked along ``d``)."""
    lrank = x._v.dim() - len(x.lv) if isinstance(x, BTensor) else x.dim()
    if isinstance(d, bool) or not isinstance(d, int) or not -lrank - 1 <= d <= lrank:
        raise Fallback("out_dims")
    d %= lrank + 1
    if isinstance(x, BTensor) and level in x.lv:
        pos = x.lv.index(level)
        rest = x.lv[:pos] + x.lv[pos + 1:]
        return _wrap(x._v.movedim(pos, len(rest) + d) if pos != len(rest) + d else x._v, rest)
    t = _ub(x)
    nb = len(_lv(x))
    t = t.unsqueeze(nb + d)
    shape = list(t.shape)
    shape[nb + d] = size
    return _wrap(t.expand(shape).clone(), _lv(x))
