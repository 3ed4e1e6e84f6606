"""Contractions: einsum, tensordot, kron, cross, cdist.

All of them are compositions of ops that already record for autograd (diagonal and permute
views, reshape, sum, mul, matmul), so none records its own node. einsum contracts two operands
at a time through ``matmul`` on (batch, m, k) x (batch, k, n) views: batch dims are left
unflattened (matmul broadcasts them through strides), so 'bij,bjk->bik' is exactly one bmm.
With three or more operands the pair to contract next is chosen greedily, like opt_einsum's
greedy path: the pair whose result is smallest relative to its inputs.
"""

import builtins
import functools
import math
import sys

from fiamma._ops._common import broadcast_shapes
from fiamma._tensor import Tensor, wrap_dim

__all__ = ["einsum", "tensordot", "kron", "cross", "cdist"]


# ---- einsum ----------------------------------------------------------------------------------

def _parse_subscripts(sub, op_index, ndim):
    """Labels of one operand's subscripts: letters, and ints 0.. for the ellipsis dims counted
    from the right (so they line up across operands by broadcasting)."""
    labels = []
    ell = None
    i = 0
    while i < len(sub):
        c = sub[i]
        if c == ".":
            if sub[i:i + 3] != "..." or ell is not None:
                raise RuntimeError(f"einsum(): invalid ellipsis in subscripts '{sub}' of operand "
                                   f"{op_index}: expected '...' at most once")
            ell = len(labels)
            labels.append(None)
            i += 3
            continue
        if not c.isalpha() or not c.isascii():
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation "
                               f"for operand {op_index}: '{c}' (subscripts must be letters in "
                               "[a-zA-Z])")
        labels.append(c)
        i += 1
    nexp = len(labels) - (ell is not None)
    if ell is None:
        if nexp != ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nexp}) "
                               f"does not match the number of dimensions ({ndim}) for operand "
                               f"{op_index} and no ellipsis was given")
        return labels, 0
    ne = ndim - nexp
    if ne < 0:
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nexp}) is "
                           f"more than the number of dimensions ({ndim}) for operand {op_index}")
    return labels[:ell] + list(range(ne - 1, -1, -1)) + labels[ell + 1:], ne


class _Op:
    """An operand during contraction: a tensor and one distinct label per dim."""

    __slots__ = ("t", "labels")

    def __init__(self, t, labels):
        self.t = t
        self.labels = labels

    def size(self, sizes):
        return math.prod(sizes[c] for c in self.labels)


def einsum(equation, *operands):
    """Einstein summation over ``operands`` by ``equation`` (NumPy/PyTorch syntax): letters
    name dims, a letter repeated within an operand takes a diagonal, letters left out of the
    output are summed, ``...`` stands for broadcast dims; without ``->`` the output is the
    ellipsis dims then the letters used once, sorted.

    >>> import fiamma
    >>> a = fiamma.ones(2, 3)
    >>> fiamma.einsum("ij,jk->ik", a, fiamma.ones(3, 4)).shape
    fiamma.Size([2, 4])
    >>> fiamma.einsum("ii", fiamma.eye(3)).item()
    3.0
    """
    if isinstance(equation, Tensor):  # sublist format: einsum(a, [0, 1], b, [1, 2], [0, 2])
        equation, operands = _from_sublists((equation,) + operands)
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): equation must be a str, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operand {i} must be a Tensor, got {type(t).__name__}")
        if t._dtype is not operands[0]._dtype:
            raise RuntimeError(f"einsum(): expected all operands to have the same dtype, but "
                               f"operand 0 is {operands[0]._dtype} and operand {i} is {t._dtype}")
    if len(operands) == 2:
        plan = _PLANS.get((equation, operands[0]._shape, operands[1]._shape))
        if plan is not None:
            return _replay(plan, operands[0], operands[1])
    labels_of, out = _parse(equation, tuple(len(t._shape) for t in operands))
    ops = []
    sizes = {}
    for i, (labels, t) in enumerate(zip(labels_of, operands)):
        x = t
        if len(set(labels)) != len(labels):
            x, labels = _diagonals(x, list(labels), i)
        for j, c in enumerate(labels):
            n = x._shape[j]
            prev = sizes.get(c)
            if prev is None or prev == 1:
                sizes[c] = n
            elif n != prev and n != 1:
                what = f"subscript {c}" if isinstance(c, str) else "the ellipsis dims"
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes "
                                   f"(original->remapped): {what} has size {prev} in one operand "
                                   f"and {n} in operand {i}")
        ops.append(_Op(x, list(labels)))
    if len(ops) == 2 and ops[0].t is operands[0] and ops[1].t is operands[1]:
        trace = []
        res = _contract(ops, out, sizes, trace)
        if len(trace) == 1 and len(_PLANS) < 1024:
            _PLANS[(equation, operands[0]._shape, operands[1]._shape)] = trace[0]
        return res
    return _contract(ops, out, sizes)


# (equation, shape a, shape b) -> the views and the one matmul a two-operand einsum made
_PLANS = {}


def _replay(plan, a, b):
    pa, sa, pb, sb, sr, perm = plan
    if pa is not None:
        a = a.permute(pa)
    if sa is not None:
        a = a.reshape(sa)
    if pb is not None:
        b = b.permute(pb)
    if sb is not None:
        b = b.reshape(sb)
    r = a.matmul(b)
    if sr is not None:
        r = r.reshape(sr)
    if perm is not None:
        r = r.permute(perm)
    return r


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_str(sub):
    out = []
    for v in sub:
        if v is Ellipsis:
            out.append("...")
            continue
        if not isinstance(v, int) or not 0 <= v < 52:
            raise ValueError(f"einsum(): subscript in subscript list is not within the valid "
                             f"range [0, 52), got {v!r}")
        out.append(_LETTERS[v])
    return "".join(out)


def _from_sublists(args):
    """(equation, operands) from einsum(op0, sublist0, op1, sublist1, ..., [output])."""
    ops, subs = [], []
    i = 0
    while i + 1 < len(args) and isinstance(args[i], Tensor):
        ops.append(args[i])
        subs.append(_sublist_str(args[i + 1]))
        i += 2
    eq = ",".join(subs)
    if i < len(args):
        if i != len(args) - 1 or isinstance(args[i], Tensor):
            raise RuntimeError("einsum(): in the sublist format, arguments must alternate "
                               "tensor, subscript list, with an optional output list last")
        eq += "->" + _sublist_str(args[i])
    return eq, tuple(ops)


@functools.lru_cache(maxsize=512)
def _parse(equation, ndims):
    """(labels of each operand, output labels) for an equation and the operands' ndims."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(ndims):
        raise RuntimeError(f"einsum(): {len(subs)} operands in the equation '{equation}' but "
                           f"{len(ndims)} tensors were given")
    if not ndims:
        raise RuntimeError("einsum(): must provide at least one operand")
    labels_of = []
    count = {}
    nell = 0
    for i, (s, nd) in enumerate(zip(subs, ndims)):
        labels, ne = _parse_subscripts(s, i, nd)
        nell = builtins.max(nell, ne)
        for c in labels:  # counted before diagonals merge repeats ('ii' sums)
            count[c] = count.get(c, 0) + 1
        labels_of.append(tuple(labels))
    if arrow:
        out = _parse_output(rhs, count, nell)
    else:
        letters = sorted(c for c in count if isinstance(c, str) and count[c] == 1)
        out = list(range(nell - 1, -1, -1)) + letters
    return tuple(labels_of), tuple(out)


def _diagonals(x, labels, i):
    """Merge repeated labels of one operand by taking diagonals (views)."""
    seen = {}
    for j, c in enumerate(labels):
        if c in seen:
            a = seen[c]
            if x._shape[a] != x._shape[j]:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {i} but "
                                   f"the sizes don't match, {x._shape[a]} != {x._shape[j]}")
        else:
            seen[c] = j
    while len(seen) != len(labels):
        for j, c in enumerate(labels):
            a = labels.index(c)
            if a != j:
                x = x.diagonal(0, a, j).movedim(-1, a)
                labels = labels[:j] + labels[j + 1:]
                break
    return x, labels


def _parse_output(rhs, count, nell):
    out = []
    i = 0
    has_ell = False
    while i < len(rhs):
        c = rhs[i]
        if c == ".":
            if rhs[i:i + 3] != "..." or has_ell:
                raise RuntimeError("einsum(): invalid ellipsis in the output subscripts")
            has_ell = True
            out.extend(range(nell - 1, -1, -1))
            i += 3
            continue
        if not c.isalpha() or not c.isascii():
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} for the output: "
                               f"'{c}' (subscripts must be letters in [a-zA-Z])")
        if c in out:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the "
                               "output")
        if c not in count:
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation "
                               "for any input operand")
        out.append(c)
        i += 1
    return out


def _sum_labels(o, drop):
    if not drop:
        return o
    dims = tuple(i for i, c in enumerate(o.labels) if c in drop)
    return _Op(o.t.sum(dims), [c for c in o.labels if c not in drop])


def _contract(ops, out, sizes, trace=None):
    """Contract the operands down to the output. ``trace`` (a list) receives the plan of a
    two-operand contraction that was exactly views + one matmul (nothing summed or expanded)."""
    out_set = set(out)

    def needed_elsewhere(skip):
        need = set(out_set)
        for k, o in enumerate(ops):
            if k not in skip:
                need.update(o.labels)
        return need

    # labels only one operand uses and the output does not: sum them right away
    for k in range(len(ops)):
        need = needed_elsewhere({k})
        drop = {c for c in ops[k].labels if c not in need}
        if drop:
            trace = None
            ops[k] = _sum_labels(ops[k], drop)
    # fiamma.backends.opt_einsum.enabled = False: left to right, as PyTorch without opt_einsum
    oe = sys.modules.get("fiamma.backends.opt_einsum")
    in_order = oe is not None and not oe.enabled
    while len(ops) > 1:
        if len(ops) == 2 or in_order:
            i, j = 0, 1
        else:
            i, j = _greedy_pair(ops, sizes, out_set)
        need = needed_elsewhere({i, j})
        res = _pair(ops[i], ops[j], need, sizes, trace)
        rest = [o for k, o in enumerate(ops) if k not in (i, j)]
        ops = [res] + rest if in_order else rest + [res]
    o = ops[0]
    drop = {c for c in o.labels if c not in out_set}
    o = _sum_labels(o, drop)
    t = o.t
    # size-1 broadcast labels that another operand had larger were dropped or kept at 1
    shape = tuple(sizes[c] for c in out)
    perm = [o.labels.index(c) for c in out]
    if perm != list(range(len(perm))):
        t = t.permute(perm)
    else:
        perm = None
    if t._shape != shape:
        t = t.expand(shape)
        drop = True
    if trace and not drop:
        trace[0] = trace[0] + (perm,)
    elif trace:
        trace.clear()
    return t


def _greedy_pair(ops, sizes, out_set):
    best = None
    n = len(ops)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = ops[i], ops[j]
            shared = set(a.labels) & set(b.labels)
            need = set(out_set)
            for k, o in enumerate(ops):
                if k not in (i, j):
                    need.update(o.labels)
            keep = [c for c in dict.fromkeys(a.labels + b.labels) if c in need]
            size = math.prod(sizes[c] for c in keep)
            cost = (size - a.size(sizes) - b.size(sizes), not shared, i, j)
            if best is None or cost < best:
                best = cost
    return best[2], best[3]


def _pair(a, b, need, sizes, trace=None):
    """Contract two operands, keeping the labels in ``need``."""
    la, lb = a.labels, b.labels
    sb = set(lb)
    sa = set(la)
    batch = [c for c in la if c in sb and c in need]
    contr = [c for c in la if c in sb and c not in need]
    ta, tb = a.t, b.t
    # a contracted label of size 1 on one side only: sum the other side over it first
    for c in list(contr):
        na, nb = ta._shape[la.index(c)], tb._shape[lb.index(c)]
        if na != nb:
            trace = None
            if na == 1:
                tb = tb.sum(lb.index(c), keepdim=True)
            else:
                ta = ta.sum(la.index(c), keepdim=True)
    m = [c for c in la if c not in sb]
    n = [c for c in lb if c not in sa]
    # labels of a and b alone that nobody needs were summed already; what is left is kept
    if not contr:
        return _outer(ta, la, tb, lb, batch, m, n)
    pa = [la.index(c) for c in batch + m + contr]
    pb = [lb.index(c) for c in batch + contr + n]
    ta = ta.permute(pa) if pa != list(range(len(pa))) else ta
    tb = tb.permute(pb) if pb != list(range(len(pb))) else tb
    nb_ = len(batch)
    bsa, bsb = ta._shape[:nb_], tb._shape[:nb_]
    ms = ta._shape[nb_:nb_ + len(m)]
    ks = ta._shape[nb_ + len(m):]
    ns = tb._shape[nb_ + len(contr):]
    M, K, N = math.prod(ms), math.prod(ks), math.prod(ns)
    if M == 1 and N == 1 and nb_:
        # a batch of dot products: elementwise product and a sum beat tiny matmuls
        prod = _rs(ta, bsa + (K,)) * _rs(tb, bsb + (K,))
        if prod._dtype._kind == 2 and K > 1:  # BLAS gemv sums rows faster than a reduction
            from fiamma._creation import ones

            r = prod.matmul(ones(K, dtype=prod._dtype, device=prod._storage.device))
        else:
            r = prod.sum(-1)
        return _Op(_rs(r, r._shape + ms + ns), batch + m + n)
    A = _rs(ta, bsa + (M, K))
    B = _rs(tb, bsb + (K, N))
    r = A.matmul(B)
    r2 = _rs(r, r._shape[:nb_] + ms + ns)
    if trace is not None:
        ident = list(range(len(pa)))
        trace.append((None if pa == ident else tuple(pa), None if A is ta else A._shape,
                      None if pb == ident else tuple(pb), None if B is tb else B._shape,
                      None if r2 is r else r2._shape))
    return _Op(r2, batch + m + n)


def _rs(t, shape):
    return t if t._shape == shape else t.reshape(shape)


def _outer(ta, la, tb, lb, batch, m, n):
    """No contracted label: a broadcast elementwise product."""
    labels = batch + m + n
    va = _align(ta, la, labels)
    vb = _align(tb, lb, labels)
    return _Op(va * vb, labels)


def _align(t, labels, target):
    """View ``t`` (dims named ``labels``) with dims in ``target`` order, size 1 where absent."""
    perm = [labels.index(c) for c in target if c in labels]
    if perm != list(range(len(perm))):
        t = t.permute(perm)
    shape = []
    it = iter(t._shape)
    for c in target:
        shape.append(next(it) if c in labels else 1)
    return t.reshape(shape) if tuple(shape) != t._shape else t


# ---- tensordot -------------------------------------------------------------------------------

def tensordot(a, b, dims=2, out=None):
    """Sum products over the last ``dims`` dims of ``a`` and the first ``dims`` of ``b``, or
    over the explicit lists ``dims=([dims of a], [dims of b])``.

    >>> import fiamma
    >>> fiamma.tensordot(fiamma.ones(2, 3, 4), fiamma.ones(3, 4, 5)).shape
    fiamma.Size([2, 5])
    """
    op = "tensordot"
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"{op}: both inputs should have same dtype, got {a._dtype} and "
                           f"{b._dtype}")
    na, nb = len(a._shape), len(b._shape)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"{op}: expects dims >= 0, but got dims={dims}")
        if dims > na or dims > nb:
            raise RuntimeError(f"{op}: expects dims <= the number of dims of both tensors, got "
                               f"dims={dims} for tensors of {na} and {nb} dims")
        da = list(range(na - dims, na))
        db = list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError(f"{op}: dims must be an int or a pair of lists, got {dims!r}")
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise RuntimeError(f"{op}: both dimension lists should have same length, got "
                               f"{len(da)} and {len(db)}")
        da = [wrap_dim(d, na, op) for d in da]
        db = [wrap_dim(d, nb, op) for d in db]
    for x, y in zip(da, db):
        if a._shape[x] != b._shape[y]:
            raise RuntimeError(f"{op}: contracted dimensions need to match, but first has size "
                               f"{a._shape[x]} in dim {x} and second has size {b._shape[y]} in "
                               f"dim {y}")
    if len(set(da)) != len(da) or len(set(db)) != len(db):
        raise RuntimeError(f"{op}: repeated dims in {da} or {db}")
    fa = [d for d in range(na) if d not in da]
    fb = [d for d in range(nb) if d not in db]
    sa = tuple(a._shape[d] for d in fa)
    sb = tuple(b._shape[d] for d in fb)
    K = math.prod(a._shape[d] for d in da)
    A = a.permute(fa + da).reshape(math.prod(sa), K)
    B = b.permute(db + fb).reshape(K, math.prod(sb))
    r = A.matmul(B).reshape(sa + sb)
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, r._shape, r._dtype, op)
        out.copy_(r)
        return out
    return r


# ---- kron, cross, cdist ----------------------------------------------------------------------

def kron(input, other, *, out=None):
    """Kronecker product: blocks ``input[i] * other`` (dims aligned from the right).

    >>> import fiamma
    >>> fiamma.kron(fiamma.eye(2), fiamma.ones(2, 2)).shape
    fiamma.Size([4, 4])
    """
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"kron: expected {name} to be a Tensor, got {type(t).__name__}")
    nd = builtins.max(len(input._shape), len(other._shape))
    sa = (1,) * (nd - len(input._shape)) + input._shape
    sb = (1,) * (nd - len(other._shape)) + other._shape
    va = input.reshape([v for s in sa for v in (s, 1)])
    vb = other.reshape([v for s in sb for v in (1, s)])
    r = (va * vb).reshape(tuple(x * y for x, y in zip(sa, sb)))
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, r._shape, r._dtype, "kron")
        out.copy_(r)
        return out
    return r


def cross(input, other, dim=None, *, out=None):
    """Cross product of 3-vectors along ``dim`` (broadcast). ``dim=None`` uses the first dim
    of size 3 (PyTorch's ``torch.cross``; ``linalg.cross`` defaults to -1).

    >>> import fiamma
    >>> fiamma.cross(fiamma.tensor([1., 0, 0]), fiamma.tensor([0., 1, 0])).tolist()
    [0.0, 0.0, 1.0]
    """
    op = "cross"
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
    if len(input._shape) != len(other._shape):
        raise RuntimeError(f"{op}: inputs must have the same number of dimensions, got "
                           f"{len(input._shape)} and {len(other._shape)}")
    shape = broadcast_shapes(input._shape, other._shape, op=op)
    if dim is None:
        d = next((i for i, s in enumerate(shape) if s == 3), None)
        if d is None:
            raise RuntimeError(f"{op}: no dimension of size 3 in input (shape {list(shape)})")
    else:
        d = wrap_dim(dim, len(shape), op)
    if input._shape[d] != 3 or other._shape[d] != 3:
        raise RuntimeError(f"{op}: inputs dimension {d} must have length 3. Got "
                           f"{input._shape[d]} and {other._shape[d]}")
    a, b = input, other
    if a._shape != shape:
        a = a.expand(shape)
    if b._shape != shape:
        b = b.expand(shape)
    from fiamma._ops.join import cat

    # a doubled copy along d gives the two cyclic shifts as views: (a1, a2, a0), (a2, a0, a1)
    aa, bb = cat([a, a], d), cat([b, b], d)
    r = aa.narrow(d, 1, 3) * bb.narrow(d, 2, 3) - aa.narrow(d, 2, 3) * bb.narrow(d, 1, 3)
    if out is not None:
        from fiamma._ops._common import check_out

        check_out(out, r._shape, r._dtype, op)
        out.copy_(r)
        return out
    return r


_CDIST_BLOCK = 1 << 22  # elements of the difference tensor computed at once (direct path)
_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
          "donot_use_mm_for_euclid_dist")


def _chebyshev(diff):
    """max |diff| over the last dim, differentiated as PyTorch's cdist/pdist with p=inf: every
    coordinate at the maximum gets the full gradient (not a share, as amax's ties do)."""
    ad = diff.abs()
    m = ad.amax(-1, keepdim=True).detach()
    live = (ad == m) & ~ad.isinf()
    ad0 = ad.masked_fill(~live, 0.0)  # (ad0 - ad0.detach()) is 0 with ad's gradient on ties
    return (m + (ad0 - ad0.detach()).sum(-1, keepdim=True)).squeeze(-1)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between the rows of ``x1`` (B..., P, M) and ``x2`` (B..., R, M):
    result (B..., P, R). For p=2 with more than 25 rows (or ``compute_mode=
    'use_mm_for_euclid_dist'``) it uses ``|x|^2 + |y|^2 - 2 x.y`` through matmul (faster,
    slightly less exact).

    >>> import fiamma
    >>> fiamma.cdist(fiamma.tensor([[0., 0]]), fiamma.tensor([[3., 4]])).tolist()
    [[5.0]]
    """
    op = "cdist"
    for name, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
        if t._dtype._kind != 2:
            raise RuntimeError(f"{op}: cdist only supports floating-point dtypes, {name} got: "
                               f"{t._dtype}")
        if len(t._shape) < 2:
            raise RuntimeError(f"{op}: cdist only supports at least 2D tensors, {name} got: "
                               f"{len(t._shape)}D")
    if x1._shape[-1] != x2._shape[-1]:
        raise RuntimeError(f"{op}: X1 and X2 must have the same number of columns. X1: "
                           f"{x1._shape[-1]} X2: {x2._shape[-1]}")
    if x1._dtype is not x2._dtype:
        raise RuntimeError(f"{op}: X1 and X2 must have the same dtype, got {x1._dtype} and "
                           f"{x2._dtype}")
    p = builtins.float(p)
    if p < 0:
        raise RuntimeError(f"{op}: cdist only supports non-negative p values, got {p}")
    if compute_mode not in _MODES:
        raise ValueError(f"{op}: {compute_mode} is not a valid value for compute_mode")
    batch = broadcast_shapes(x1._shape[:-2], x2._shape[:-2], op=op)
    P, R, M = x1._shape[-2], x2._shape[-2], x1._shape[-1]
    a = x1.expand(batch + (P, M)) if x1._shape[:-2] != batch else x1
    b = x2.expand(batch + (R, M)) if x2._shape[:-2] != batch else x2
    use_mm = p == 2.0 and (compute_mode == _MODES[1] or (
        compute_mode == _MODES[0] and (P > 25 or R > 25)))
    if P == 0 or R == 0 or M == 0:  # zeros, still a function of the inputs (as PyTorch)
        return (a.unsqueeze(-2) - b.unsqueeze(-3)).norm(p, -1)
    if use_mm:
        # |x - y|^2 = |x|^2 - 2 x.y + |y|^2, 0 where rounding leaves it <= 0: there the
        # gradient is 0 (PyTorch's), not sqrt's infinite slope times 0
        a2 = (a * a).sum(-1, keepdim=True)
        b2 = (b * b).sum(-1).unsqueeze(-2)
        d2 = (a2 + b2) - 2 * a.matmul(b.transpose(-1, -2))
        off = d2 <= 0
        return d2.masked_fill(off, 1.0).sqrt().masked_fill(off, 0.0)
    # the (P, R, M) differences, a block of rows at a time to bound the memory used
    step = builtins.max(1, _CDIST_BLOCK // builtins.max(1, R * M * math.prod(batch)))
    parts = []
    for s in range(0, P, step):
        blk = a.narrow(-2, s, builtins.min(step, P - s))
        diff = blk.unsqueeze(-2) - b.unsqueeze(-3)
        parts.append(_chebyshev(diff) if p == math.inf else diff.norm(p, -1))
    if len(parts) == 1:
        return parts[0]
    from fiamma._ops.join import cat

    return cat(parts, -2)
