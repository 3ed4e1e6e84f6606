"""PyTorch names that libraries built on PyTorch (Hugging Face transformers, accelerate) use at
import time or in passing: tensors with Python attributes, ``x in t``, the float8 dtypes (named,
no tensors), ``torch.utils.hooks.RemovableHandle``, ``torch._dynamo.eval_frame.OptimizedModule``
and ``torch._dynamo._trace_wrapped_higher_order_op.TransformGetItemToIndex``."""

import copy
import importlib.util
import pickle

import numpy as np
import pytest

import fiamma
from fiamma._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
from fiamma._dynamo.eval_frame import OptimizedModule
from fiamma.utils.hooks import RemovableHandle, unserializable_hook

FLOAT8 = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"]


# ---- Python attributes on tensors ------------------------------------------------------------

def test_tensor_takes_python_attributes():
    t = fiamma.ones(3)
    t._is_hf_initialized = True
    assert t._is_hf_initialized is True and t.__dict__ == {"_is_hf_initialized": True}
    assert not hasattr(fiamma.ones(3), "_is_hf_initialized")  # per tensor, not per class
    del t._is_hf_initialized
    assert not hasattr(t, "_is_hf_initialized")


def test_tensor_attribute_does_not_shadow_slots_or_change_values():
    t = fiamma.tensor([1.0, 2.0])
    t.tag = "w"
    assert (t + 1).tolist() == [2.0, 3.0] and not hasattr(t + 1, "tag")
    assert "requires_grad" not in t.__dict__ and t.__dict__ == {"tag": "w"}
    if importlib.util.find_spec("fiamma.autograd") is not None:
        t.requires_grad = True  # a slot: still the autograd flag
        assert t.requires_grad and "requires_grad" not in t.__dict__
    # a view is a new tensor: it has its own (empty) attributes, like PyTorch's
    assert not hasattr(t[:1], "tag")


def test_tensor_attribute_survives_deepcopy():
    t = fiamma.ones(2)
    t.note = [1]
    c = copy.deepcopy(t)
    assert getattr(c, "note", None) == [1] and c.note is not t.note


# ---- x in t ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [3, 5, 2.0, 2.5, -1])
def test_contains_matches_numpy(value):
    a = np.array([[1, 2], [3, 4]])
    t = fiamma.tensor(a)
    assert (value in t) == bool((a == value).any())


def test_contains_tensor_and_rejects_other_types():
    t = fiamma.tensor([[1, 2], [3, 4]])
    assert fiamma.tensor(4) in t and fiamma.tensor(7) not in t
    assert fiamma.tensor([9, 4]) in t  # broadcast: any element equal, as PyTorch's
    with pytest.raises(RuntimeError, match="__contains__ only supports Tensor or scalar"):
        "a" in t  # noqa: B015


def test_contains_does_not_iterate_rows():
    # Python's fallback would compare rows and fail on bool(row == x)
    t = fiamma.tensor([[0, 5], [6, 7]])
    assert 0 in t[:, [-1, 0]]


# ---- float8 dtypes ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", FLOAT8)
def test_float8_dtypes_are_named_and_compare(name):
    d = getattr(fiamma, name)
    assert isinstance(d, fiamma.dtype) and repr(d) == f"fiamma.{name}"
    assert d.is_floating_point and not d.is_complex and d.itemsize == 1
    assert d != fiamma.float32 and fiamma.float32 != d and d == getattr(fiamma, name)
    assert pickle.loads(pickle.dumps(d)) is d
    assert fiamma.ones(2).dtype != d


@pytest.mark.parametrize("make", [
    lambda d: fiamma.empty(2, dtype=d), lambda d: fiamma.zeros(2, dtype=d),
    lambda d: fiamma.tensor([1.0], dtype=d), lambda d: fiamma.ones(2).to(d),
    lambda d: fiamma.ones(2).to(dtype=d)])
def test_float8_tensors_raise_naming_the_dtype(make):
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        make(fiamma.float8_e4m3fn)


def test_complex32_is_named_for_comparisons_only():
    d = fiamma.complex32
    assert fiamma.chalf is d and repr(d) == "fiamma.complex32"
    assert d.is_complex and not d.is_floating_point and d.itemsize == 4
    assert d != fiamma.complex64 and d in (fiamma.float32, fiamma.complex32)
    assert fiamma.zeros(1, dtype=fiamma.complex64).dtype != d
    assert pickle.loads(pickle.dumps(d)) is d
    for make in (lambda: fiamma.zeros(2, dtype=d), lambda: fiamma.ones(2).to(fiamma.chalf),
                 lambda: fiamma.tensor([1j], dtype=d)):
        with pytest.raises(TypeError, match="no tensors of dtype fiamma.complex32"):
            make()


# ---- torch.utils.hooks -----------------------------------------------------------------------

def test_removable_handle_removes_from_all_dicts():
    from collections import OrderedDict

    hooks, extra = OrderedDict(), {}
    h = RemovableHandle(hooks, extra_dict=extra)
    hooks[h.id], extra[h.id] = "a", "b"
    h2 = RemovableHandle(hooks)
    hooks[h2.id] = "c"
    assert h2.id != h.id
    h.remove()
    assert list(hooks.values()) == ["c"] and extra == {}
    h.remove()  # twice is fine
    with h2:
        pass
    assert not hooks


def test_removable_handle_list_of_extra_dicts_and_pickle():
    a, b, c = {}, {}, {}
    h = RemovableHandle(a, extra_dict=[b, c])
    for d in (a, b, c):
        d[h.id] = 1
    h2 = pickle.loads(pickle.dumps(h))
    assert h2.id == h.id
    h.remove()
    assert a == b == c == {}
    assert RemovableHandle({}).id > h.id


def test_unserializable_hook_marks():
    def f(grad):
        return grad
    assert unserializable_hook(f) is f and f.__torch_unserializable__


# ---- torch._dynamo ---------------------------------------------------------------------------

def test_no_module_is_an_optimized_module():
    import fiamma._dynamo as dyn

    assert dyn.eval_frame.OptimizedModule is OptimizedModule
    f = fiamma.compile(lambda x: x + 1)
    assert not isinstance(f, OptimizedModule)
    with pytest.raises(NotImplementedError, match="OptimizedModule"):
        OptimizedModule(f)


def test_transform_getitem_to_index_changes_nothing():
    x = fiamma.arange(12).reshape(3, 4)
    i, j = fiamma.tensor(2), fiamma.tensor(1)
    want = x[i, j].item()
    with TransformGetItemToIndex() as ctx:
        assert isinstance(ctx, TransformGetItemToIndex)
        assert x[i, j].item() == want == 9


# ---- keyword names and meta results that transformers' models use ---------------------------

def test_baddbmm_addbmm_take_pytorch_keyword_names():
    rs = np.random.RandomState(0)
    c, a, b = (rs.randn(*s).astype(np.float32) for s in ((2, 3, 4), (2, 3, 5), (2, 5, 4)))
    C, A, B = (fiamma.tensor(v) for v in (c, a, b))
    np.testing.assert_allclose(C.baddbmm(batch1=A, batch2=B, beta=0.5, alpha=2.0).numpy(),
                               0.5 * c + 2.0 * a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(C[0].addbmm(batch1=A, batch2=B).numpy(),
                               c[0] + (a @ b).sum(0), rtol=1e-5, atol=1e-5)


def test_vector_norm_of_a_meta_tensor_is_a_meta_tensor():
    w = fiamma.empty(4, 2, 3, device="meta")
    r = fiamma.linalg.vector_norm(w, 2, dim=(0, 1), keepdim=True)
    assert r.device.type == "meta" and r.shape == (1, 1, 3) and r.dtype == fiamma.float32
    assert fiamma.linalg.vector_norm(w).shape == ()
    # the linear algebra proper gives shape-only results too
    r = fiamma.linalg.inv(fiamma.empty(3, 3, device="meta"))
    assert r.device.type == "meta" and r.shape == (3, 3)


def test_mark_static_address_checks_its_argument():
    import fiamma._dynamo as dyn

    t = fiamma.zeros(2, 3)
    assert dyn.mark_static_address(t) is None and t.tolist() == [[0.0] * 3] * 2
    with pytest.raises(TypeError, match="mark_static_address"):
        dyn.mark_static_address([1, 2])


# ---- attributes through fiamma.save / pickle -------------------------------------------------

def test_save_load_and_pickle_keep_tensor_attributes(tmp_path):
    import io

    t = fiamma.arange(6.0).reshape(2, 3)
    t.note, t.n = "hi", 3
    u = fiamma.ones(2, dtype=fiamma.uint16)  # the _rebuild_tensor_v3 path
    u.tag = [1, 2]
    b = io.BytesIO()
    fiamma.save({"t": t, "u": u, "plain": fiamma.ones(1)}, b)
    b.seek(0)
    d = fiamma.load(b)
    assert (d["t"].note, d["t"].n, d["t"].tolist()) == ("hi", 3, t.tolist())
    assert d["u"].tag == [1, 2] and d["u"].dtype == fiamma.uint16
    assert d["plain"].__dict__ == {}
    q = pickle.loads(pickle.dumps(t))
    assert q.note == "hi" and q.tolist() == t.tolist()


@pytest.mark.parity
def test_tensor_attributes_cross_load_with_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    t = fiamma.arange(4.0)
    t.note = "from fiamma"
    fiamma.save({"t": t}, tmp_path / "f.pt")
    got = torch.load(tmp_path / "f.pt")  # PyTorch's weights_only loader accepts it
    assert got["t"].note == "from fiamma" and got["t"].tolist() == [0.0, 1.0, 2.0, 3.0]
    p = torch.arange(3.0)
    p.note = "from torch"
    torch.save({"p": p}, tmp_path / "p.pt")
    back = fiamma.load(tmp_path / "p.pt")
    assert back["p"].note == "from torch" and back["p"].tolist() == [0.0, 1.0, 2.0]


# ---- names diffusers reads at import (sub-byte dtypes, torch.Stream/Event, cuda memory) ------

SUB_BYTE = [f"uint{b}" for b in range(1, 8)] + [f"int{b}" for b in range(1, 8)]


@pytest.mark.parametrize("name", SUB_BYTE)
def test_sub_byte_dtypes_are_named_without_tensors(name):
    d = getattr(fiamma, name)
    assert isinstance(d, fiamma.dtype) and repr(d) == f"fiamma.{name}" and d.itemsize == 1
    assert not d.is_floating_point and not d.is_complex
    assert d.is_signed == name.startswith("int") and d.kind == ("i" if d.is_signed else "u")
    assert pickle.loads(pickle.dumps(d)) is d
    assert d != fiamma.uint8 and d != fiamma.int8 and fiamma.ones(2).dtype != d
    assert len({getattr(fiamma, n) for n in SUB_BYTE}) == len(SUB_BYTE)
    with pytest.raises(TypeError, match=name):
        fiamma.zeros(2, dtype=d)
    with pytest.raises(TypeError, match=name):
        fiamma.ones(2).to(d)


def test_generic_stream_and_event_on_cpu():
    s = fiamma.Stream()  # no accelerator here: a CPU stream, as PyTorch's
    if fiamma.accelerator.current_accelerator() is None:
        assert s.device == fiamma.device("cpu") and s.device_type == "cpu"
        assert repr(s).startswith("Stream device_type=cpu")
    s = fiamma.Stream("cpu", priority=0)
    assert s.query() is True and s.synchronize() is None and s.wait_stream(s) is None
    assert s == fiamma.Stream("cpu") and isinstance(s, fiamma.Stream)
    e = fiamma.Event("cpu")
    assert e.device == fiamma.device("cpu") and e.query() is True
    with pytest.raises(RuntimeError, match="doesn't support events"):
        e.record()
    with pytest.raises(RuntimeError, match="Stream: expected a cpu or cuda device"):
        fiamma.Stream("meta")


def test_cuda_memory_old_names_without_cuda():
    c = fiamma.cuda
    assert c.reset_max_memory_allocated() is None and c.reset_max_memory_cached() is None
    assert c.memory_cached() == c.memory_reserved() and c.max_memory_cached() == \
        c.max_memory_reserved()
    if not c.is_available():
        assert c.memory_cached() == 0
