"""``fiamma.utils._pytree``: nested Python containers as trees of leaves (PyTorch's
``torch.utils._pytree``, a private module that many libraries use).

Nodes are tuples, lists, dicts (their key order), ``OrderedDict``, ``defaultdict``, ``deque``,
namedtuples, ``fiamma.Size`` and the types given to :func:`register_pytree_node`; everything
else (``None`` included) is a leaf. ``tree_flatten`` gives the leaves and a :class:`TreeSpec`;
``tree_unflatten`` rebuilds the tree from new leaves.

>>> from fiamma.utils._pytree import tree_flatten, tree_unflatten, tree_map
>>> leaves, spec = tree_flatten({"a": (1, 2), "b": [3, None]})
>>> leaves
[1, 2, 3, None]
>>> tree_unflatten([4, 5, 6, 7], spec)
{'a': (4, 5), 'b': [6, 7]}
>>> tree_map(lambda x, y: x + y, [1, (2, 3)], [10, (20, 30)])
[11, (22, 33)]

Not provided: the key paths (``tree_flatten_with_path``, ``keystr``, ``key_get``) and the
serialisation of specs (``treespec_dumps``/``treespec_loads``).
"""

import collections
import typing
import warnings

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_is_leaf", "tree_flatten",
           "tree_unflatten", "tree_iter", "tree_leaves", "tree_structure", "tree_map",
           "tree_map_", "tree_map_only", "tree_map_only_", "tree_all", "tree_any",
           "tree_all_only", "tree_any_only", "treespec_pprint", "is_namedtuple",
           "is_namedtuple_class", "is_namedtuple_instance"]


class _Node:
    __slots__ = ("flatten", "unflatten")

    def __init__(self, flatten, unflatten):
        self.flatten = flatten      # tree -> (children, context)
        self.unflatten = unflatten  # (children, context) -> tree

    # PyTorch's NodeDef names of the two functions
    @property
    def flatten_fn(self):
        return self.flatten

    @property
    def unflatten_fn(self):
        return self.unflatten


def _dict_flatten(d):
    keys = list(d.keys())
    return [d[k] for k in keys], keys


def _defaultdict_flatten(d):
    keys = list(d.keys())
    return [d[k] for k in keys], [d.default_factory, keys]


def _defaultdict_unflatten(values, context):
    factory, keys = context
    return collections.defaultdict(factory, zip(keys, values))


def _deque_flatten(d):
    return list(d), d.maxlen


SUPPORTED_NODES = {
    tuple: _Node(lambda t: (list(t), None), lambda v, c: tuple(v)),
    list: _Node(lambda t: (list(t), None), lambda v, c: list(v)),
    dict: _Node(_dict_flatten, lambda v, c: dict(zip(c, v))),
    collections.OrderedDict: _Node(_dict_flatten,
                                   lambda v, c: collections.OrderedDict(zip(c, v))),
    collections.defaultdict: _Node(_defaultdict_flatten, _defaultdict_unflatten),
    collections.deque: _Node(_deque_flatten, lambda v, c: collections.deque(v, maxlen=c)),
}


def _register_size():
    import fiamma

    size = getattr(fiamma, "Size", None)
    if isinstance(size, type) and size not in SUPPORTED_NODES:
        SUPPORTED_NODES[size] = _Node(lambda t: (list(t), None), lambda v, c: size(v))


_register_size()


def is_namedtuple_class(cls):
    """Whether ``cls`` is a namedtuple class (a tuple subclass with ``_fields``)."""
    return (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple))


def is_namedtuple_instance(obj):
    """Whether ``obj`` is a namedtuple."""
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj):
    """Whether ``obj`` (an instance or a class) is a namedtuple."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


_NAMEDTUPLE = _Node(lambda t: (list(t), type(t)), lambda v, c: c(*v))


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None):
    """Make ``cls`` a node: ``flatten_fn(obj) -> (children, context)`` and
    ``unflatten_fn(children, context) -> obj``. The serialisation and key-path hooks are
    accepted and unused (fiamma has no spec serialisation nor key paths)."""
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree_node: expected a class, got {cls!r}")
    if cls in SUPPORTED_NODES:
        raise ValueError(f"register_pytree_node: {cls} is already registered as a pytree node")
    if not callable(flatten_fn) or not callable(unflatten_fn):
        raise TypeError("register_pytree_node: flatten_fn and unflatten_fn must be callable")
    SUPPORTED_NODES[cls] = _Node(flatten_fn, unflatten_fn)


def _node_of(tree):
    t = type(tree)
    node = SUPPORTED_NODES.get(t)
    if node is None and is_namedtuple_class(t):
        return _NAMEDTUPLE, "namedtuple"
    return node, None


def tree_is_leaf(tree, is_leaf=None):
    """Whether ``tree`` is a leaf (not a registered node, or ``is_leaf(tree)`` is true)."""
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_of(tree)[0] is None


class TreeSpec:
    """The structure of a tree: the node's ``type``, its ``context`` (dict keys, the
    namedtuple class, ...) and a spec for each child; leaves are :class:`LeafSpec`."""

    def __init__(self, type, context, children_specs):
        self.type = type
        self.context = context
        self._children = list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self._children)
        self.num_leaves = sum(c.num_leaves for c in self._children)
        self.num_children = len(self._children)

    @property
    def children_specs(self):
        warnings.warn("`treespec.children_specs` is deprecated. Use `treespec.child(index)` to "
                      "access a single child, or `treespec.children()` to get all children.",
                      FutureWarning, stacklevel=2)
        return self._children

    def children(self):
        """The children's specs (a new list)."""
        return list(self._children)

    def child(self, index):
        """The spec of child ``index``."""
        return self._children[index]

    def is_leaf(self):
        return False

    def _type_name(self):
        if self.type is _NAMEDTUPLE_MARK:
            return "namedtuple"
        return getattr(self.type, "__name__", repr(self.type))

    def _repr(self, indent):
        sep = ",\n" + " " * (indent + 2)
        kids = sep.join(c._repr(indent + 2) for c in self._children)
        return f"TreeSpec({self._type_name()}, {self.context!r}, [{kids}])"

    def __repr__(self):
        return self._repr(0)

    def __eq__(self, other):
        if not isinstance(other, TreeSpec) or isinstance(other, LeafSpec):
            return NotImplemented if not isinstance(other, TreeSpec) else False
        return (self.type is other.type and self.context == other.context
                and self._children == other._children)

    def __hash__(self):
        return hash((self.type, self.num_nodes, self.num_leaves))

    def unflatten(self, leaves):
        """The tree of this structure holding ``leaves`` (in order)."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} "
                             f"but the spec refers to a pytree that holds {self.num_leaves} "
                             f"items ({self!r}).")
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        kids = [c._build(it) for c in self._children]
        if self.type is _NAMEDTUPLE_MARK:
            return self.context(*kids)
        return SUPPORTED_NODES[self.type].unflatten(kids, self.context)


class _NamedTupleMark:
    """The ``type`` of a namedtuple's spec (its class is the context), as PyTorch's."""


_NAMEDTUPLE_MARK = _NamedTupleMark
# a namedtuple's node: found by the type _get_node_type gives (PyTorch keys it so too)
SUPPORTED_NODES[_NAMEDTUPLE_MARK] = _NAMEDTUPLE

# PyTorch's annotation for "a tree": any object
PyTree = typing.Any


def _get_node_type(tree):
    """The key of ``tree``'s node in ``SUPPORTED_NODES`` (the namedtuple mark for a
    namedtuple, else its type; a leaf's type is not a key)."""
    if is_namedtuple_instance(tree):
        return _NAMEDTUPLE_MARK
    return type(tree)


class LeafSpec(TreeSpec):
    """The spec of a leaf (``repr``: ``*``)."""

    def __init__(self):
        super().__init__(None, None, [])
        self.num_nodes = 1
        self.num_leaves = 1

    def is_leaf(self):
        return True

    def _repr(self, indent):
        return "*"

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return isinstance(other, LeafSpec)

    def __hash__(self):
        return 1

    def _build(self, it):
        return next(it)


_LEAF = LeafSpec()


def _flatten(tree, leaves, is_leaf):
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return _LEAF
    node, kind = _node_of(tree)
    if node is None:
        leaves.append(tree)
        return _LEAF
    children, context = node.flatten(tree)
    specs = [_flatten(c, leaves, is_leaf) for c in children]
    if kind == "namedtuple":
        return TreeSpec(_NAMEDTUPLE_MARK, context, specs)
    return TreeSpec(type(tree), context, specs)


def tree_flatten(tree, is_leaf=None):
    """``(leaves, treespec)`` of ``tree``; ``is_leaf(x)`` true stops the descent at ``x``."""
    leaves = []
    spec = _flatten(tree, leaves, is_leaf)
    return leaves, spec


def tree_unflatten(leaves, treespec):
    """The tree of structure ``treespec`` holding ``leaves``."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance "
                        f"of TreeSpec but got item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf=None):
    """The leaves of ``tree``, one by one."""
    yield from tree_flatten(tree, is_leaf)[0]


def tree_leaves(tree, is_leaf=None):
    """The leaves of ``tree`` (a list)."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    """The :class:`TreeSpec` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def _flatten_up_to(spec, tree, is_leaf):
    """The subtrees of ``tree`` at the leaves of ``spec`` (``tree`` has ``spec``'s structure
    down to them)."""
    if isinstance(spec, LeafSpec):
        return [tree]
    node, kind = _node_of(tree)
    ttype = _NAMEDTUPLE_MARK if kind == "namedtuple" else type(tree)
    if node is None or (is_leaf is not None and is_leaf(tree)):
        raise ValueError(f"Expected a pytree node of type {spec._type_name()}, got a leaf "
                         f"{type(tree).__name__}.")
    if ttype is not spec.type:
        raise ValueError(f"Node type mismatch; expected {spec._type_name()}, but got "
                         f"{type(tree).__name__}.")
    children, context = node.flatten(tree)
    if len(children) != spec.num_children:
        raise ValueError(f"Node arity mismatch; expected {spec.num_children}, but got "
                         f"{len(children)}.")
    if context != spec.context:
        raise ValueError(f"Node context mismatch for custom node type {spec._type_name()}: "
                         f"expected {spec.context!r}, got {context!r}.")
    out = []
    for c, s in zip(children, spec._children):
        out.extend(_flatten_up_to(s, c, is_leaf))
    return out


_BUILTIN_NODES = (SUPPORTED_NODES[tuple], SUPPORTED_NODES[list], SUPPORTED_NODES[dict])


def _map1(func, tree):
    """``tree_map(func, tree)`` without building a spec for the plain containers (what
    ``__torch_dispatch__`` handlers map over each op's arguments); leaves in the same order."""
    t = type(tree)
    if t is tuple:
        return tuple([_map1(func, x) for x in tree])
    if t is list:
        return [_map1(func, x) for x in tree]
    if t is dict:
        return {k: _map1(func, v) for k, v in tree.items()}
    if t in SUPPORTED_NODES or issubclass(t, tuple):  # other containers: the general way
        leaves, spec = tree_flatten(tree)
        return spec.unflatten([func(x) for x in leaves])
    return func(tree)


def tree_map(func, tree, *rests, is_leaf=None):
    """A tree of ``tree``'s structure holding ``func(leaf, *same leaves of rests)``; each of
    ``rests`` has ``tree``'s structure (or a deeper one, whose subtrees are passed)."""
    if not rests and is_leaf is None and (SUPPORTED_NODES[tuple], SUPPORTED_NODES[list],
                                          SUPPORTED_NODES[dict]) == _BUILTIN_NODES:
        return _map1(func, tree)
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r, is_leaf) for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(leaves, *others))


def tree_map_(func, tree, *rests, is_leaf=None):
    """Call ``func`` on the leaves (as :func:`tree_map`) for its side effects; returns
    ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r, is_leaf) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _only(type_or_types, func):
    if isinstance(type_or_types, list):
        type_or_types = tuple(type_or_types)

    def wrapped(x):
        return func(x) if isinstance(x, type_or_types) else x
    return wrapped


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """:func:`tree_map` of ``func`` on the leaves that are instances of ``type_or_types``;
    other leaves are kept."""
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func, tree, is_leaf=None):
    """:func:`tree_map_` of ``func`` on the leaves of ``type_or_types``."""
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    """Whether ``pred`` holds for every leaf."""
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    """Whether ``pred`` holds for some leaf."""
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    """Whether ``pred`` holds for every leaf of ``type_or_types``."""
    if isinstance(type_or_types, list):
        type_or_types = tuple(type_or_types)
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    """Whether ``pred`` holds for some leaf of ``type_or_types``."""
    if isinstance(type_or_types, list):
        type_or_types = tuple(type_or_types)
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


class _Star:
    def __repr__(self):
        return "*"


def treespec_pprint(treespec):
    """A picture of the structure: the ``repr`` of the tree rebuilt with ``*`` leaves
    (``(*, [*])``)."""
    return repr(treespec.unflatten([_Star()] * treespec.num_leaves))
