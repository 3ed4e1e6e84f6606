"""Ops recorded as themselves while a trace runs (their strides alone would bake in this trace's
sizes): transposes/permutes (one moving only a size-1 batch dim looks like a reshape),
unsqueeze/squeeze, tril/triu (core applies them as a ``where`` with a mask of this size) and
basic indexing whose positions depend on the size (bounds read from shapes, positions counted
from the end)."""

import fiamma
from fiamma import Tensor

from ._symbolic import _BIG, SymInt, _size_arg

__all__ = ["patch_logical"]


def patch_logical(h):
    """Wrap the ops; ``h`` carries the size patcher's helpers (put, live, mine, record_node,
    record_chain)."""
    put, live, mine, record_node, record_chain = (h.put, h.live, h.mine, h.record_node,
                                                  h.record_chain)

    def perm_like(meth):
        """The logical permutation (core records the strides, and a permutation that moves
        only size-1 dims looks like a reshape, which another size would not follow)."""
        orig = Tensor.__dict__[meth]

        def fn(self, *a):
            out = orig(self, *a)
            nd = len(self._shape)
            if out is self or nd < 2 or not mine(self):
                return out
            if meth == "permute":
                dims = tuple(int(d) % nd for d in _size_arg(a))
            elif meth == "t":
                dims = (1, 0)
            else:
                dims = list(range(nd))
                i, j = int(a[0]) % nd, int(a[1]) % nd
                dims[i], dims[j] = dims[j], dims[i]
                dims = tuple(dims)
            if dims == tuple(range(nd)):
                return out
            return record_node("permute", self, out, {"arg": dims})
        put(Tensor, meth, fn)

    for m in ("permute", "transpose", "swapaxes", "swapdims", "t"):
        perm_like(m)

    unsqueeze_orig, squeeze_orig = Tensor.__dict__["unsqueeze"], Tensor.__dict__["squeeze"]

    def unsqueeze(self, dim):
        """As itself: inserting a size-1 dim next to a size-1 batch looks like a reshape."""
        out = unsqueeze_orig(self, dim)
        if not mine(self):
            return out
        return record_node("unsqueeze", self, out, {"dim": int(dim) % (self.dim() + 1)})

    def squeeze(self, dim=None):
        out = squeeze_orig(self, dim)
        if out is self or not mine(self) or out.dim() == self.dim():
            return out
        nd = self.dim()
        ds = range(nd) if dim is None else \
            [int(d) % nd for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
        gone = tuple(sorted({d for d in ds if self._shape[d] == 1}))
        return record_node("squeeze", self, out, {"dim": gone})

    put(Tensor, "unsqueeze", unsqueeze)
    put(Tensor, "squeeze", squeeze)

    def tri_like(name):
        """tril/triu as themselves (core applies them as a where with a mask of this size)."""
        orig = getattr(fiamma, name)

        def fn(input, diagonal=0, **kw):
            out = orig(input, diagonal, **kw)
            if kw.get("out") is not None or not mine(input) or out is input:
                return out
            return record_node(name, input, out, {"diagonal": int(diagonal)})
        put(fiamma, name, fn)
        if Tensor.__dict__.get(name) is orig:
            put(Tensor, name, fn)

    tri_like("tril")
    tri_like("triu")

    getitem_orig = Tensor.__dict__["__getitem__"]

    def _is_int(i):
        return isinstance(i, int) and not isinstance(i, bool)

    def _from_end(v):
        return v is not None and (isinstance(v, SymInt) or (_is_int(v) and v < 0))

    def _masks_as_indices(idx):
        """Boolean masks the trace follows, replaced by their nonzero positions (recorded, so
        the number of selected elements follows the values): ``scores[scores > t]``."""
        items = idx if isinstance(idx, tuple) else (idx,)
        if not any(isinstance(i, Tensor) and i.dtype == fiamma.bool and mine(i) for i in items):
            return idx
        new = []
        for i in items:
            if isinstance(i, Tensor) and i.dtype == fiamma.bool and mine(i) and i.dim() > 0:
                new.extend(fiamma.nonzero(i, as_tuple=True))
            else:
                new.append(i)
        return tuple(new)

    def _past_end(self, items):
        """A slice whose stop is at or past the end of its axis: a no-op at this size that
        cuts at others (``keep[:100]`` of a list of kept boxes)."""
        ax = 0
        nd = self.dim()
        for i in items:
            if i is Ellipsis:
                ax = nd - sum(1 for j in items[items.index(i) + 1:]
                              if j is not None and j is not Ellipsis)
                continue
            if i is None:
                continue
            if isinstance(i, slice) and _is_int(i.stop) and not isinstance(i.stop, SymInt) \
                    and 0 < self._shape[ax] <= i.stop and ax < nd:
                return True
            ax += 1
        return False

    def getitem(self, idx):
        """Basic indexing whose positions depend on the size: bounds read from shapes
        (nanoGPT's ``bias[:, :, :T, :T]``), counted from the end (``out[:, -1]``,
        ``x[..., -3:]``) or past the end (``keep[:100]``), which the strides of this trace
        would fix to this size's positions; boolean masks as their recorded nonzero
        positions."""
        if live():
            idx = _masks_as_indices(idx)
        out = getitem_orig(self, idx)
        if not live() or not isinstance(out, Tensor):
            return out
        items = idx if isinstance(idx, tuple) else (idx,)
        if not all(isinstance(i, slice) or i is Ellipsis or i is None or _is_int(i)
                   for i in items):
            return out  # tensor/bool/list indices: recorded by core
        real = [i for i in items if i is not None and i is not Ellipsis]
        if sum(i is Ellipsis for i in items) > 1 or len(real) > self.dim():
            return out
        if not any(_from_end(v) for i in items for v in (
                (i.start, i.stop) if isinstance(i, slice) else (i,) if _is_int(i) else ())) \
                and not (mine(self) and _past_end(self, items)) and 1 not in self._shape:
            # positions from the start: the same at every size. (With a size-1 dim, the view's
            # strides are ambiguous, e.g. a batch of 1 inside a permuted view: recorded as
            # itself below, so another batch size replays it right.)
            return out
        if Ellipsis in items:
            k = items.index(Ellipsis)
            items = items[:k] + (slice(None),) * (self.dim() - len(real)) + items[k + 1:]
        arg, syms, drop, new = [], [], [], []
        ax = pos = 0
        for i in items:
            if i is None:
                new.append(pos)
                pos += 1
                continue
            if isinstance(i, slice):
                pos += 1
                if i == slice(None):
                    ax += 1
                    continue
                start = 0 if i.start is None else i.start
                stop = _BIG if i.stop is None else i.stop
                step = 1 if i.step is None else i.step
            else:
                start, step = i, 1
                stop = _BIG if (not isinstance(i, SymInt) and i == -1) else i + 1
                drop.append(ax)
            arg.append((ax, int(start), int(stop), int(step)))
            syms.append(tuple(v.expr if isinstance(v, SymInt) else None
                              for v in (start, stop)))
            ax += 1
        steps = [("slice", {"arg": tuple(arg), "symsize": syms})]
        if drop:
            steps.append(("squeeze", {"dim": tuple(drop)}))
        for p in new:
            steps.append(("unsqueeze", {"dim": p}))
        return record_chain(self, out, steps)

    put(Tensor, "__getitem__", getitem)
