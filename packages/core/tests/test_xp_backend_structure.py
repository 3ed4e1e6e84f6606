"""The array-module backend's assembly: XpBackend is built from family mixins (and XpBase), and
Python's MRO silently picks one definition when two of them define the same name (a private
helper such as ``_flat`` written twice with different meanings breaks one family without an
error). Every attribute must be defined by exactly one of them."""

import collections

from fiamma._backend.xp import PRIMITIVES, XpBackend


def _clashes(cls):
    """{name: [classes defining it]} for names defined by more than one base of ``cls``."""
    owners = collections.defaultdict(list)
    for base in cls.__mro__[1:]:
        if base is object:
            continue
        for name in vars(base):
            if not (name.startswith("__") and name.endswith("__")):
                owners[name].append(base.__name__)
    return {name: where for name, where in owners.items() if len(where) > 1}


def test_no_two_mixins_define_the_same_attribute():
    clashes = _clashes(XpBackend)
    assert clashes == {}, ("attributes defined by several parts of XpBackend (the MRO would "
                           f"silently pick the first): {clashes}")


def test_the_clash_check_sees_a_shadowed_helper():
    class A:
        def _helper(self):
            return 1

    class B:
        def _helper(self):
            return 2

        def other(self):
            return 3

    class Both(A, B):
        pass

    assert _clashes(Both) == {"_helper": ["A", "B"]}


def test_every_primitive_is_defined_once():
    where = {}
    for base in XpBackend.__mro__[1:]:
        for name in vars(base):
            if name in PRIMITIVES:
                where.setdefault(name, base.__name__)
    missing = [p for p in PRIMITIVES if p not in where]
    assert missing == [], f"primitives no mixin of XpBackend defines: {missing}"
