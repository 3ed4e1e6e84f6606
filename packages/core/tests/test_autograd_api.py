"""The typed core/autograd seam (fiamma.autograd_hook: ``ops``, the tensor accessors and the
documented hot slots): what an autograd engine may rely on, pinned here in core."""

import gc

import pytest

import fiamma
from fiamma import autograd_hook as H

# ---- recorded-op keys ---------------------------------------------------------------------------

def test_op_keys_are_their_names_with_flags():
    assert H.ops.mul == "mul" and hash(H.ops.mul) == hash("mul")
    assert H.ops["mul"] is H.ops.mul and "mul" in H.ops and H.ops.get("nope") is None
    assert type(H.ops.mul.name) is str and H.ops.mul.name == "mul"
    assert repr(H.ops.mul) == "ops.mul"
    assert H.ops.mul.differentiable and not H.ops.mul.is_view
    assert H.ops.transpose.is_view and H.ops.getitem.is_view and not H.ops.clone.is_view
    assert not H.ops.eq.differentiable and not H.ops.isnan.differentiable
    assert len(H.ops) == len(list(H.ops)) > 250
    assert all(isinstance(k, H.OpKey) for k in H.ops)
    assert {"add": 1}[H.ops.add] == 1 and {H.ops.add: 1}["add"] == 1


def test_unknown_or_misspelled_op_raises_naming_it():
    # an ordinary missing attribute (no __getattr__ hook: ``ops.mul`` is on every record site's
    # path); Python's traceback adds "Did you mean: 'mul'?"
    with pytest.raises(AttributeError, match="no attribute 'mull'"):
        H.ops.mull
    with pytest.raises(KeyError, match="no op named 'mull'"):
        H.ops["mull"]
    with pytest.raises(AttributeError, match="read-only"):
        H.ops.mull = 1


def test_declare_op_returns_the_one_key_and_checks_flags():
    t = H.OpTable()
    k = t.declare("frob", is_view=True)
    assert t.declare("frob", is_view=True) is k and t.frob is k and k.is_view
    with pytest.raises(ValueError, match="already declared"):
        t.declare("frob")
    with pytest.raises(TypeError, match="identifier"):
        t.declare("not a name")
    with pytest.raises(TypeError, match="identifier"):
        t.declare(3)
    with pytest.raises(ValueError, match="attribute of the table"):
        t.declare("get")
    assert H.declare_op("mul") is H.ops.mul
    with pytest.raises(ValueError, match="already declared"):
        H.declare_op("mul", differentiable=False)


def test_ops_recorded_by_core_are_declared():
    seen = []

    class Rec:
        def record(self, op, out, inputs, kwargs):
            seen.append(op)
            for o in (out if isinstance(out, tuple) else (out,)):
                o.requires_grad = True   # follow the result, as a tracer does

    prev = H.set_trace_hook(Rec())
    try:
        x = fiamma.ones(2, 3)
        x.requires_grad = True   # the slot only: the trace hook receives the records
        (x * 2).t().exp().sum()
        fiamma.cat([x, x]).clone()
    finally:
        H.set_trace_hook(prev)
    assert seen == ["mul", "transpose", "exp", "sum", "cat", "clone"]
    assert all(op in H.ops for op in seen)


# ---- tensor accessors ---------------------------------------------------------------------------

def test_version_counter_is_shared_by_views_and_bumped_in_place():
    x = fiamma.zeros(4)
    v = x[1:3]
    v0 = H.version(x)
    assert H.version(v) == v0 == x._version
    v.add_(1.0)
    assert H.version(x) == H.version(v) == v0 + 1
    x.copy_(fiamma.ones(4))
    assert H.version(v) == v0 + 2
    assert H.version(x.clone()) == 0


def test_same_storage():
    x = fiamma.zeros(2, 3)
    assert H.same_storage(x, x.t()) and H.same_storage(x, x[1])
    assert not H.same_storage(x, x.clone())


def test_meta_slot_is_the_engines_alone():
    x = fiamma.ones(2)
    assert H.get_meta(x) is None
    m = object()
    H.set_meta(x, m)
    assert H.get_meta(x) is m
    assert H.get_meta(x.t()) is None and H.get_meta(x * 1) is None
    H.set_meta(x, None)
    assert H.get_meta(x) is None


def test_clear_base():
    x = fiamma.ones(2, 3)
    v = x.t()
    assert v._base is x
    H.clear_base(v)
    assert getattr(v, "_base", None) is None and H.same_storage(v, x)
    assert v.tolist() == [[1.0, 1.0]] * 3


def test_shape_and_geometry():
    x = fiamma.zeros(3, 4)[1:, ::2]
    assert H.shape(x) == (2, 2) and type(H.shape(x)) is tuple and H.shape(x) is H.shape(x)
    s = H.shape(x)
    gc.collect()
    assert not gc.is_tracked(s)   # a tuple of ints: the collector untracks it
    shape, stride, offset = H.geometry(x)
    assert shape == tuple(x.shape) and stride == x.stride() and offset == x.storage_offset() == 4
    y = fiamma.zeros(12).as_strided(shape, stride, offset - 2)
    assert H.geometry(y) == (shape, stride, 2)


def test_owns_memory():
    # (results are kept in variables: pytest's assertion rewriting holds extra references)
    def check(t):
        return H.owns_memory(t, 1)   # the local t of this frame

    fresh = check(fiamma.ones(3))
    x = fiamma.ones(3)
    held_elsewhere = H.owns_memory(x, 0)   # the caller holds x once, not zero times
    held = H.owns_memory(x, 1)
    view_of_held = check(x[:2])
    copy = check(fiamma.ones(2, 3).t().contiguous())
    strided = check(fiamma.ones(2, 3).t())               # not contiguous
    whole_view = check(fiamma.ones(2, 3).reshape(6))     # a view of all of a temporary
    part_view = check(fiamma.ones(6)[:3])                # a view of part of a temporary
    assert fresh and held and copy and whole_view
    assert not (held_elsewhere or view_of_held or strided or part_view)


def test_hot_slots_hold_what_the_contract_says():
    x = fiamma.ones(2, 3, dtype=fiamma.float64)
    for name in H.HOT_SLOTS:
        assert name in fiamma.Tensor.__slots__, name
    assert x._shape is H.shape(x) and x._ag is H.get_meta(x)
    assert x._dtype is x.dtype and x._dtype._kind == 2
    assert fiamma.ones(1, dtype=fiamma.complex64)._dtype._kind == 3
    assert fiamma.ones(1, dtype=fiamma.int32)._dtype._kind < 2
    assert x._storage is x.t()._storage and x._storage.version == H.version(x)
