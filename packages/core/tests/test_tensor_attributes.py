"""Arbitrary attributes on plain tensors (``t.foo = 1``), as PyTorch allows: set on tensors,
views and results of ops, kept by pickle, fiamma.save/load (PyTorch's
``_rebuild_from_type_v2`` state, both ways) and deepcopy, not carried by detach/clone/views."""

import copy
import io
import pickle

import pytest

import fiamma

try:
    import fiamma.autograd  # noqa: F401
    HAVE_AUTOGRAD = True
except ImportError:
    HAVE_AUTOGRAD = False


def test_set_get_delete_on_tensor_view_and_result():
    t = fiamma.zeros(2, 3)
    t.foo = 1
    assert t.foo == 1 and t.__dict__ == {"foo": 1}
    v = t.view(3, 2)
    v.bar = "x"
    r = t + 1
    r.baz = [1]
    assert v.bar == "x" and r.baz == [1]
    # a view or an op result starts with no attributes (PyTorch's too)
    assert not hasattr(v, "foo") and not hasattr(r, "foo") and not hasattr(t, "bar")
    del t.foo
    assert not hasattr(t, "foo")
    with pytest.raises(AttributeError):
        t.missing
    assert vars(fiamma.ones(1)) == {}


def test_attributes_do_not_shadow_tensor_state():
    t = fiamma.ones(2)
    t.__dict__["_shape"] = (7,)  # a slot (data descriptor) wins over the instance dict
    assert t.shape == (2,)


def test_detach_clone_do_not_carry():
    t = fiamma.ones(3)
    t.foo = 1
    for out in (t.detach(), t.clone(), t[1:], t.to(fiamma.float64), t.contiguous().view(3)):
        assert "foo" not in out.__dict__


def test_pickle_keeps_attributes():
    t = fiamma.arange(6.0).view(2, 3)
    t.foo = {"a": [1, 2]}
    t.n = 3
    r = pickle.loads(pickle.dumps(t))
    assert r.tolist() == t.tolist()
    assert r.__dict__ == {"foo": {"a": [1, 2]}, "n": 3}
    plain = pickle.loads(pickle.dumps(fiamma.ones(2)))
    assert plain.__dict__ == {}


def test_deepcopy_and_copy():
    t = fiamma.ones(2)
    t.foo = {"k": [1]}
    d = copy.deepcopy(t)
    assert d.__dict__ == t.__dict__
    assert d.__dict__["foo"] is not t.__dict__["foo"]  # deep
    d.__dict__["foo"]["k"].append(2)
    assert t.foo == {"k": [1]}
    # the memo is honoured: the same attribute object shared by two tensors stays shared
    shared = [0]
    a, b = fiamma.ones(1), fiamma.ones(1)
    a.s, b.s = shared, shared
    a2, b2 = copy.deepcopy([a, b])
    assert a2.s is b2.s and a2.s is not shared
    c = copy.copy(t)
    assert c.foo == {"k": [1]}


@pytest.mark.skipif(not HAVE_AUTOGRAD, reason="needs fiamma-autograd")
def test_deepcopy_leaf_keeps_requires_grad_and_attributes():
    t = fiamma.ones(2).requires_grad_()
    t.tag = "w"
    d = copy.deepcopy(t)
    assert d.requires_grad and d.is_leaf and d.tag == "w"


def test_save_load_round_trip(tmp_path):
    t = fiamma.arange(4.0)
    t.foo = 1
    t.meta = {"name": "x", "ids": (1, 2)}
    u = fiamma.ones(2)
    path = tmp_path / "a.pt"
    fiamma.save({"t": t, "u": u, "again": t}, path)
    r = fiamma.load(path)
    assert r["t"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert r["t"].__dict__ == {"foo": 1, "meta": {"name": "x", "ids": (1, 2)}}
    assert r["u"].__dict__ == {}
    assert r["again"] is r["t"]


def test_save_uint_dtype_with_attribute(tmp_path):
    t = fiamma.tensor([1, 2], dtype=fiamma.uint16)
    t.foo = 2
    fiamma.save(t, tmp_path / "u.pt")
    r = fiamma.load(tmp_path / "u.pt")
    assert r.dtype is fiamma.uint16 and r.tolist() == [1, 2] and r.foo == 2


def test_load_refuses_bad_state():
    from fiamma._unpickler import UnpicklingError, _set_tensor_state

    t = fiamma.ones(1)
    with pytest.raises(UnpicklingError, match="str keys"):
        _set_tensor_state(t, {1: 2})
    with pytest.raises(UnpicklingError, match="slot state"):
        _set_tensor_state(t, ({}, {"_shape": (3,)}))
    assert _set_tensor_state(t, None) is t and t.__dict__ == {}
    assert _set_tensor_state(t, ({"a": 1}, None)).a == 1


@pytest.mark.parity
def test_files_move_both_ways_with_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    t = fiamma.arange(3.0)
    t.foo = 1
    t.bar = "x"
    fiamma.save([t, fiamma.zeros(1)], tmp_path / "f.pt")
    r = torch.load(tmp_path / "f.pt")
    assert r[0].tolist() == [0.0, 1.0, 2.0] and r[0].__dict__ == {"foo": 1, "bar": "x"}
    assert r[1].__dict__ == {}

    tt = torch.arange(2.0)
    tt.note = "hi"
    tt.n = [5]
    buf = io.BytesIO()
    torch.save({"w": tt}, buf)
    buf.seek(0)
    w = fiamma.load(buf)["w"]
    assert w.tolist() == [0.0, 1.0] and w.__dict__ == {"note": "hi", "n": [5]}
    # what PyTorch's own pickling keeps and drops
    assert copy.deepcopy(tt).__dict__ == {"note": "hi", "n": [5]}
    assert tt.detach().__dict__ == {} and tt.clone().__dict__ == {}
