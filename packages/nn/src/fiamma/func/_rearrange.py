"""``rearrange``: einops-style reordering by a pattern (PyTorch's ``torch.func.rearrange``),
as one reshape, one permute and one reshape."""

import math
import re

import fiamma
from fiamma import Tensor

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def _parse(side, pattern):
    """A side of the pattern -> list of items; an item is '...' or a list of axis names
    (a parenthesised group; '1' and '()' are anonymous axes of length 1)."""
    items, group = [], None
    for tok in re.findall(r"\.\.\.|\(|\)|[^\s()]+", side):
        if tok == "(":
            if group is not None:
                raise ValueError(f"rearrange: nested parentheses in {pattern!r}")
            group = []
        elif tok == ")":
            if group is None:
                raise ValueError(f"rearrange: unbalanced parentheses in {pattern!r}")
            items.append(group)
            group = None
        elif tok == "...":
            if group is not None:
                raise ValueError(f"rearrange: an ellipsis inside parentheses in {pattern!r}")
            if "..." in items:
                raise ValueError(f"rearrange: more than one ellipsis on one side of {pattern!r}")
            items.append("...")
        elif tok == "1" or _NAME.match(tok):
            if group is not None:
                group.append(tok)
            else:
                items.append([tok])
        else:
            raise ValueError(f"rearrange: invalid axis name {tok!r} in {pattern!r}")
    if group is not None:
        raise ValueError(f"rearrange: unbalanced parentheses in {pattern!r}")
    names = [n for it in items if it != "..." for n in it if n != "1"]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"Indexing expression contains duplicate dimension {dup[0]!r}")
    return items, names


def rearrange(tensor, pattern, **axes_lengths):
    """Reorder, merge and split dimensions by an einops pattern (PyTorch's
    ``torch.func.rearrange``): ``"b h w c -> b c h w"`` permutes, ``"b h w c -> b (h w c)"``
    merges, ``"b (h1 h) w c -> (b h1) h w c"`` splits (give all but one size of a split
    group as keyword arguments), ``...`` stands for the remaining dimensions and ``1`` or
    ``()`` for a dimension of length 1. A list or tuple of tensors is stacked first.

    >>> import fiamma
    >>> from fiamma.func import rearrange
    >>> x = fiamma.zeros(2, 6, 5)
    >>> rearrange(x, "b (h w) c -> b c h w", h=2).shape
    fiamma.Size([2, 5, 2, 3])
    >>> rearrange([fiamma.ones(3), fiamma.ones(3)], "n d -> (n d)").shape
    fiamma.Size([6])
    """
    if isinstance(tensor, (list, tuple)):
        tensor = fiamma.stack(list(tensor))
    if not isinstance(tensor, Tensor):
        raise TypeError(f"rearrange: expected a Tensor or a sequence of Tensors, got "
                        f"{type(tensor).__name__}")
    if pattern.count("->") != 1:
        raise ValueError("Pattern must contain a single '->' separator")
    left_s, right_s = pattern.split("->")
    left, lnames = _parse(left_s, pattern)
    right, rnames = _parse(right_s, pattern)
    if "..." in right and "..." not in left:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern {pattern}")
    if "..." in left and "..." not in right:
        raise ValueError(f"Ellipsis found in left side, but not right side of a pattern {pattern}")
    one_side = set(lnames) ^ set(rnames)
    if one_side:
        raise ValueError("Identifiers only on one side of rearrange expression (should be on "
                         f"both): {one_side}")
    unknown = set(axes_lengths) - set(lnames)
    if unknown:
        raise ValueError(f"Identifiers not found in rearrange expression: {unknown}")

    n_fixed = sum(1 for it in left if it != "...")
    ndim = tensor.dim()
    if ("..." in left and n_fixed > ndim) or ("..." not in left and n_fixed != ndim):
        raise ValueError(f"Number of dimensions in pattern ({n_fixed}) must be equal to the "
                         f"number of dimensions in the tensor ({ndim})")
    sizes = {}
    ell = []
    elementary = []  # left's axes one by one (names, '1', ellipsis dims as ('...', i))
    dim = 0
    for it in left:
        if it == "...":
            n = ndim - n_fixed
            ell = list(tensor.shape[dim:dim + n])
            elementary += [("...", i) for i in range(n)]
            dim += n
            continue
        size = tensor.shape[dim]
        dim += 1
        known = 1
        missing = []
        for n in it:
            if n == "1":
                continue
            if n in axes_lengths:
                sizes[n] = int(axes_lengths[n])
                known *= sizes[n]
            else:
                missing.append(n)
        if len(missing) > 1:
            raise ValueError(f"rearrange: cannot infer the sizes of {missing} at once in "
                             f"{pattern!r}: give all but one as keyword arguments")
        if missing:
            if known == 0 or size % known:
                given = {n: sizes[n] for n in it if n in sizes}
                raise ValueError(f"rearrange: dimension of size {size} cannot be split into "
                                 f"{it} with the given sizes {given}")
            sizes[missing[0]] = size // known
        elif known != size:
            raise ValueError(f"rearrange: dimension of size {size} does not match {it} with "
                             f"sizes {({n: sizes.get(n, 1) for n in it})} (product {known})")
        elementary += [n for n in it if n != "1"]
    split_shape = [ell[e[1]] if isinstance(e, tuple) else sizes[e] for e in elementary]
    x = tensor.reshape(split_shape)
    order = []
    for it in right:
        if it == "...":
            order += [elementary.index(("...", i)) for i in range(len(ell))]
        else:
            order += [elementary.index(n) for n in it if n != "1"]
    x = x.permute(order)
    final = []
    for it in right:
        if it == "...":
            final += ell
        else:
            final.append(math.prod(sizes[n] for n in it if n != "1"))
    return x.reshape(final)
