"""fiamma.utils._pytree (torch.utils._pytree): flatten/unflatten of the node types, tree_map
over several trees, registered nodes, the structure errors, and (parity) the same leaves,
specs and rebuilt trees as PyTorch's."""

import collections
import warnings

import pytest

import fiamma
from fiamma.utils import _pytree as P

NT = collections.namedtuple("NT", "a b")


def _sample():
    return {"x": (1, None, [2, 3]), "y": NT(4, 5), "z": collections.OrderedDict(k=6),
            "d": collections.defaultdict(int, q=7), "e": collections.deque([8], maxlen=2),
            "s": fiamma.Size([9, 10])}


def test_flatten_unflatten_round_trip():
    tree = _sample()
    leaves, spec = P.tree_flatten(tree)
    assert leaves == [1, None, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert spec.num_leaves == 11 and spec.num_children == 6
    back = P.tree_unflatten([v * 10 if v is not None else None for v in leaves], spec)
    assert back["x"] == (10, None, [20, 30]) and type(back["y"]) is NT and back["y"].b == 50
    assert type(back["z"]) is collections.OrderedDict and back["z"]["k"] == 60
    assert type(back["d"]) is collections.defaultdict and back["d"].default_factory is int
    assert back["e"] == collections.deque([80]) and back["e"].maxlen == 2
    assert type(back["s"]) is fiamma.Size and tuple(back["s"]) == (90, 100)
    assert list(back) == ["x", "y", "z", "d", "e", "s"]
    assert P.tree_leaves(None) == [None] and P.tree_structure(5) == P.LeafSpec()
    assert P.tree_flatten(())[0] == [] and P.tree_unflatten([], P.tree_structure({})) == {}


def test_tree_map_and_friends():
    assert P.tree_map(lambda a, b: a + b, [1, (2, 3)], [10, (20, 30)]) == [11, (22, 33)]
    # a deeper second tree gives its subtrees
    assert P.tree_map(lambda a, b: (a, b), [1, 2], [(3, 4), {"q": 5}]) == [(1, (3, 4)),
                                                                         (2, {"q": 5})]
    assert P.tree_map_only(int, lambda x: x * 2, (1, "a", 2.0)) == (2, "a", 2.0)
    assert P.tree_map_only([int, float], lambda x: x * 2, [1, "a", 2.0]) == [2, "a", 4.0]
    seen = []
    tree = (1, [2])
    assert P.tree_map_(seen.append, tree) is tree and seen == [1, 2]
    assert list(P.tree_iter({"a": [1, 2]})) == [1, 2]
    assert P.tree_all(lambda x: x > 0, [1, 2]) and not P.tree_any(lambda x: x > 5, [1, 2])
    assert P.tree_all_only(str, lambda x: x == "a", [1, "a"])
    assert not P.tree_any_only(int, lambda x: x > 1, [1, "b"])
    leaves, spec = P.tree_flatten([1, [2]], is_leaf=lambda x: isinstance(x, list) and len(x) == 1)
    assert leaves == [1, [2]] and spec.num_children == 2
    assert P.tree_is_leaf(3) and not P.tree_is_leaf([3])


@pytest.mark.parametrize("other, kind", [([1], "arity"), ((1, 2), "type"),
                                         ({"b": 1}, "context")])
def test_tree_map_structure_mismatch_raises(other, kind):
    first = {"a": 1} if kind == "context" else [1, 2]
    with pytest.raises(ValueError, match={"arity": "arity mismatch", "type": "type mismatch",
                                          "context": "context mismatch"}[kind]):
        P.tree_map(lambda a, b: a, first, other)


def test_unflatten_wrong_count_and_spec():
    spec = P.tree_structure((1, [2, 3]))
    with pytest.raises(ValueError, match="has length 2 but the spec refers to a pytree that "
                                         "holds 3 items"):
        P.tree_unflatten([1, 2], spec)
    with pytest.raises(TypeError, match="TreeSpec"):
        P.tree_unflatten([1], (1,))


def test_register_pytree_node():
    class Pt:
        def __init__(self, x, y):
            self.x, self.y = x, y

    P.register_pytree_node(Pt, lambda p: ([p.x, p.y], "ctx"), lambda v, c: Pt(*v))
    try:
        out = P.tree_map(lambda v: v * 10, [Pt(1, 2), 3])
        assert (out[0].x, out[0].y, out[1]) == (10, 20, 30)
        spec = P.tree_structure(Pt(1, 2))
        assert spec.type is Pt and spec.context == "ctx" and spec.num_leaves == 2
        with pytest.raises(ValueError, match="already registered"):
            P.register_pytree_node(Pt, lambda p: ([], None), lambda v, c: Pt(0, 0))
    finally:
        del P.SUPPORTED_NODES[Pt]
    with pytest.raises(TypeError, match="expected a class"):
        P.register_pytree_node(3, lambda p: ([], None), lambda v, c: None)


def test_spec_accessors_and_equality():
    spec = P.tree_structure((1, [2, 3]))
    assert spec.num_nodes == 5 and spec.child(1).num_leaves == 2
    assert [c.is_leaf() for c in spec.children()] == [True, False]
    assert spec == P.tree_structure((7, [8, 9])) and spec != P.tree_structure([7, [8, 9]])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert len(spec.children_specs) == 2
    assert any(issubclass(x.category, FutureWarning) for x in w)
    assert P.treespec_pprint(P.tree_structure((1, [2, {"k": 3}], NT(1, 2)))) == \
        "(*, [*, {'k': *}], NT(a=*, b=*))"


@pytest.mark.parity
def test_pytree_parity():
    pytest.importorskip("torch")
    import torch.utils._pytree as TP

    trees = [{"x": (1, None, [2, 3]), "y": NT(4, 5), "z": collections.OrderedDict(k=6)},
             collections.defaultdict(int, a=1), collections.deque([1, 2]), (), [[]], 5, None,
             {"b": 1, "a": [2, (3,)]}]
    for tree in trees:
        tl, ts = TP.tree_flatten(tree)
        fl, fs = P.tree_flatten(tree)
        assert fl == tl
        assert repr(fs) == repr(ts)
        assert (fs.num_leaves, fs.num_nodes) == (ts.num_leaves, ts.num_nodes)
        new = list(range(100, 100 + len(tl)))
        assert P.tree_unflatten(new, fs) == TP.tree_unflatten(new, ts)
        assert P.treespec_pprint(fs) == TP.treespec_pprint(ts)
    a, b = [1, (2, {"k": 3})], [10, (20, {"k": 30})]
    assert P.tree_map(lambda x, y: x * y, a, b) == TP.tree_map(lambda x, y: x * y, a, b)


def test_reachable_as_an_attribute_of_fiamma_utils():
    import fiamma.utils

    assert fiamma.utils._pytree is P
