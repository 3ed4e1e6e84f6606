"""Nested Python containers of tensors (PyTorch's pytrees) for fiamma.func.

Containers are tuples, lists, dicts (insertion order; OrderedDict too) and namedtuples,
by exact type as in PyTorch; everything else (``None``, ``fiamma.Size`` and
other subclasses included) is a leaf. ``in_dims``/``out_dims`` are *prefixes* of
such a tree: a leaf of the prefix (an int or None) applies to the whole subtree under it.
"""

from collections import OrderedDict


class TreeSpec:
    """The shape of a tree: its container type, context (dict keys) and children's specs.
    A leaf's spec is :data:`LEAF`. ``repr`` follows PyTorch's (``TreeSpec(tuple, None, [*])``)."""

    __slots__ = ("type", "context", "children")

    def __init__(self, type_, context, children):
        self.type = type_
        self.context = context
        self.children = children

    @property
    def num_leaves(self):
        return sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and self.type is other.type
                and self.context == other.context and self.children == other.children)

    def __hash__(self):
        return hash((self.type, tuple(self.children)))

    def __repr__(self):
        ctx = None if self.context is None else list(self.context)
        kids = ", ".join(repr(c) for c in self.children)
        return f"TreeSpec({self.type.__name__}, {ctx}, [{kids}])"


class _LeafSpec(TreeSpec):
    __slots__ = ()

    def __init__(self):
        super().__init__(object, None, [])

    @property
    def num_leaves(self):
        return 1

    def __eq__(self, other):
        return isinstance(other, _LeafSpec)

    def __hash__(self):
        return 0

    def __repr__(self):
        return "*"


LEAF = _LeafSpec()


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


_CONTAINERS = (tuple, list, dict, OrderedDict)


def is_container(x):
    return type(x) in _CONTAINERS or _is_namedtuple(x)


def _children(x):
    """(type, context, children) of a container."""
    if isinstance(x, dict):
        keys = list(x.keys())
        return type(x), keys, [x[k] for k in keys]
    if _is_namedtuple(x):
        return type(x), None, list(x)
    if isinstance(x, tuple):
        return tuple, None, list(x)
    return list, None, list(x)


def tree_flatten(tree):
    """``(leaves, spec)``.

    >>> leaves, spec = tree_flatten({"a": (1, 2), "b": [3]})
    >>> leaves
    [1, 2, 3]
    >>> spec
    TreeSpec(dict, ['a', 'b'], [TreeSpec(tuple, None, [*, *]), TreeSpec(list, None, [*])])
    >>> tree_unflatten([4, 5, 6], spec)
    {'a': (4, 5), 'b': [6]}
    """
    leaves = []
    spec = _flatten(tree, leaves)
    return leaves, spec


def _flatten(x, leaves):
    if not is_container(x):
        leaves.append(x)
        return LEAF
    t, ctx, kids = _children(x)
    return TreeSpec(t, ctx, [_flatten(k, leaves) for k in kids])


def tree_unflatten(leaves, spec):
    it = iter(leaves)
    out = _build(it, spec)
    return out


def _build(it, spec):
    if isinstance(spec, _LeafSpec):
        return next(it)
    kids = [_build(it, c) for c in spec.children]
    t = spec.type
    if issubclass(t, dict):
        d = t()
        for k, v in zip(spec.context, kids):
            d[k] = v
        return d
    if t is tuple or t is list:
        return t(kids)
    return t(*kids)  # namedtuple


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, spec):
    """The leaves of ``prefix`` repeated over ``spec``'s leaves (``prefix`` is a tree prefix of
    the tree ``spec`` describes); None if the structures do not match."""
    out = []
    return out if _broadcast(prefix, spec, out) else None


def _broadcast(prefix, spec, out):
    if not is_container(prefix):
        out.extend([prefix] * spec.num_leaves)
        return True
    if isinstance(spec, _LeafSpec):
        return False
    t, ctx, kids = _children(prefix)
    if t is not spec.type or len(kids) != len(spec.children):
        return False
    if ctx is not None and ctx != spec.context:
        if set(ctx) != set(spec.context):
            return False
        kids = [prefix[k] for k in spec.context]
    return all(_broadcast(k, s, out) for k, s in zip(kids, spec.children))
