"""Zero-copy exchange with NumPy (from_numpy, .numpy(), __array__, __array_interface__),
DLPack both ways (NumPy, and PyTorch when installed), and fiamma.asarray."""

import weakref

import numpy as np
import pytest
from conftest import (
    ALL_DTYPES,
    LAYOUTS,
    NP_DTYPE,
    NUMPY_DTYPES,
    dtype_id,
    make_pair,
    random_array,
    shapes,
    to_numpy,
)
from hypothesis import given, settings, strategies as st

import fiamma
from fiamma import _interop

try:
    import torch
except ImportError:  # PyTorch is an optional peer
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


VIEWS = {
    "transposed": lambda a: a.T,
    "stepped": lambda a: a[tuple(slice(None, None, 2) for _ in a.shape)],
    "offset": lambda a: a[1:],
}


def np_views(a):
    """Non-contiguous views of a (>= 1-d) array: transposed, stepped, offset."""
    return [(name, f(a)) for name, f in VIEWS.items()]


def strides_in_elements(a):
    return tuple(s // a.itemsize for s in a.strides)


def collect():
    """Nothing: the interop objects form no reference cycles, so reference counting alone must
    free them (a test that needed gc.collect() here would reveal a cycle)."""


# ---- from_numpy ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
@settings(max_examples=15, deadline=None)
@given(shape=shapes(), seed=st.integers(0, 2**32 - 1))
def test_from_numpy_every_dtype_and_shape(dt, shape, seed):
    a = random_array(shape, dt, np.random.default_rng(seed))
    t = fiamma.from_numpy(a)
    assert t.dtype is dt
    assert t.shape == a.shape
    assert t.stride() == strides_in_elements(a)
    assert t.data_ptr() == a.__array_interface__["data"][0]
    assert t.storage_offset() == 0
    np.testing.assert_array_equal(to_numpy(t), a)


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
def test_from_numpy_shares_memory_both_ways(dt):
    a = random_array((3, 4), dt, np.random.default_rng(1))
    t = fiamma.from_numpy(a)
    a[1, 2] = 1
    assert t.tolist()[1][2] == 1
    t.fill_(0)
    assert not a.any()


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
def test_from_numpy_non_contiguous_views(dt):
    base = random_array((4, 6, 3), dt, np.random.default_rng(2))
    for name, view in VIEWS.items():
        v = view(base)
        t = fiamma.from_numpy(v)
        assert t.shape == v.shape, name
        assert t.stride() == strides_in_elements(v), name
        assert t.data_ptr() == v.__array_interface__["data"][0], name
        assert t.is_contiguous() == v.flags.c_contiguous, name
        np.testing.assert_array_equal(to_numpy(t), v)
        # a write lands in the base array, at the viewed places only
        before = base.copy()
        t.fill_(1)
        inside = np.zeros(base.shape, bool)
        view(inside)[...] = True
        expected = before.copy()
        expected[inside] = 1
        np.testing.assert_array_equal(base, expected)
        base[...] = before


def test_from_numpy_0d_and_empty():
    t = fiamma.from_numpy(np.array(2.5))
    assert t.shape == () and t.item() == 2.5 and t.stride() == ()
    for shape in [(0,), (0, 3), (3, 0, 2)]:
        a = np.zeros(shape, dtype=np.int32)
        t = fiamma.from_numpy(a)
        assert t.shape == shape and t.numel() == 0 and t.dtype is fiamma.int32
        assert t.numpy().shape == shape


def test_from_numpy_keeps_array_alive():
    a = np.arange(1000.0)
    t = fiamma.from_numpy(a)
    w = weakref.ref(a) if hasattr(a, "__weakref__") else None
    del a
    collect()
    assert t.tolist()[999] == 999.0
    if w is not None:
        assert w() is not None


def test_from_numpy_readonly_warns_and_shares():
    a = np.arange(4.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        t = fiamma.from_numpy(a)
    assert t.data_ptr() == a.__array_interface__["data"][0]
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("typ", ["<i4", ">i4", ">f8", ">f2", "<f4"])
def test_from_numpy_byte_order(typ):
    a = np.arange(5).astype(typ)
    if np.dtype(typ).isnative:
        assert fiamma.from_numpy(a).tolist() == [0, 1, 2, 3, 4]
    else:
        with pytest.raises(ValueError, match="byte order"):
            fiamma.from_numpy(a)


def test_from_numpy_native_aliases():
    for npdt, dt in [(np.intc, fiamma.int32), (np.longlong, fiamma.int64),
                     (np.int_, fiamma.int64), (np.ubyte, fiamma.uint8), (np.byte, fiamma.int8),
                     (np.short, fiamma.int16), (np.half, fiamma.float16),
                     (np.single, fiamma.float32), (np.double, fiamma.float64),
                     (np.bool_, fiamma.bool), (np.dtype("=i8"), fiamma.int64)]:
        assert fiamma.from_numpy(np.zeros(2, npdt)).dtype is dt, npdt


@pytest.mark.parametrize("npdt", [np.clongdouble,
                                  np.longdouble, object, "U3", "V4",
                                  [("a", np.int32), ("b", np.float32)]])
def test_from_numpy_unsupported_dtypes(npdt):
    with pytest.raises(TypeError):
        fiamma.from_numpy(np.zeros(3, dtype=npdt))


def test_from_numpy_rejects_bad_layouts_and_types():
    with pytest.raises(ValueError, match="negative"):
        fiamma.from_numpy(np.arange(5.0)[::-1])
    with pytest.raises(ValueError, match="negative"):
        fiamma.from_numpy(np.arange(6.0).reshape(2, 3)[:, ::-1])
    # a field of a structured array: strides not a multiple of the field's size
    rec = np.zeros(4, dtype=[("a", np.int8), ("b", np.int32)])
    with pytest.raises(ValueError):
        fiamma.from_numpy(rec["b"])
    unaligned = np.frombuffer(bytearray(8 * 5 + 1), dtype=np.float64, offset=1, count=5)
    assert not unaligned.flags.aligned
    with pytest.raises(ValueError, match="aligned"):
        fiamma.from_numpy(unaligned)
    for bad in [[1, 2], 3.0, (1,), fiamma.zeros(2)]:
        with pytest.raises(TypeError, match="from_numpy"):
            fiamma.from_numpy(bad)


def test_as_tensor_copies_what_from_numpy_rejects():
    a = np.arange(5.0)[::-1]
    t = fiamma.as_tensor(a)
    assert t.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]


# ---- .numpy() / __array__ / __array_interface__ --------------------------------------------------

@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_is_a_view(dt, layout, rng):
    for shape in [(3, 4), (2, 3, 5), (1,), (4, 1, 2)]:
        t, ref = make_pair(shape, dt, rng, layout)
        a = t.numpy()
        assert a.dtype == NP_DTYPE[dt]
        assert a.shape == t.shape
        assert strides_in_elements(a) == t.stride()
        assert a.__array_interface__["data"][0] == t.data_ptr()
        np.testing.assert_array_equal(a, ref)
        # a write through NumPy shows in the tensor
        a[(0,) * len(shape)] = 1
        assert t.numpy()[(0,) * len(shape)] == 1


def test_numpy_0d_empty_and_lifetime():
    t = fiamma.full((), 3.0)
    a = t.numpy()
    assert a.shape == () and a[()] == 3.0
    e = fiamma.zeros(0, 4, dtype=fiamma.int16)
    assert e.numpy().shape == (0, 4) and e.numpy().dtype == np.int16
    t = fiamma.ones(10000)
    a = t.numpy()
    w = weakref.ref(t._storage)
    del t
    collect()
    assert w() is not None, "the array must keep the tensor's storage alive"
    assert a.sum() == 10000
    del a
    collect()
    assert w() is None, "the storage must be freed with the last array"


def test_numpy_errors():
    with pytest.raises(TypeError, match="BFloat16"):
        fiamma.ones(2, dtype=fiamma.bfloat16).numpy()
    t = fiamma.ones(2)
    t.requires_grad = True  # the slot, without going through autograd
    with pytest.raises(RuntimeError, match="detach"):
        t.numpy()
    a = t.numpy(force=True)
    assert a.tolist() == [1.0, 1.0] and a.__array_interface__["data"][0] == t.data_ptr()


def test_numpy_of_grad_requiring_tensor_with_grad_mode_off():
    # PyTorch refuses only while grad mode is on; under no_grad the array shares the memory
    # (BoTorch reads its parameters into scipy's vector this way)
    t = fiamma.ones(3)
    t.requires_grad = True
    with fiamma.no_grad():
        a = t.numpy()
    assert a.tolist() == [1.0, 1.0, 1.0] and a.__array_interface__["data"][0] == t.data_ptr()
    with pytest.raises(RuntimeError, match="detach"):
        t.numpy()  # grad mode is back on


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
def test_np_asarray_shares_and_np_array_copies(dt, rng):
    t, ref = make_pair((3, 5), dt, rng, "strided")
    a = np.asarray(t)
    assert a.__array_interface__["data"][0] == t.data_ptr()
    assert a.dtype == NP_DTYPE[dt]
    np.testing.assert_array_equal(a, ref)
    b = np.array(t)
    assert b.__array_interface__["data"][0] != t.data_ptr()
    np.testing.assert_array_equal(b, ref)
    c = np.asarray(t, copy=False)
    assert c.__array_interface__["data"][0] == t.data_ptr()
    d = np.asarray(t, dtype=np.float64)
    np.testing.assert_array_equal(d, ref.astype(np.float64))


def test_array_protocol_details():
    t = fiamma.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4)).T
    iface = t.__array_interface__
    assert iface["version"] == 3
    assert iface["shape"] == (4, 3)
    assert iface["typestr"] == np.dtype(np.int32).str
    assert iface["strides"] == (4, 16)
    assert iface["data"] == (t.data_ptr(), False)
    # __array__ with the NumPy 2 arguments
    assert t.__array__().__array_interface__["data"][0] == t.data_ptr()
    assert t.__array__(copy=True).__array_interface__["data"][0] != t.data_ptr()
    assert t.__array__(np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="copy"):
        t.__array__(np.float32, copy=False)
    # NumPy operands defer to tensors (__array_priority__), scalars from arrays work
    assert float(np.float64(2.0) * fiamma.ones(()).numpy()) == 2.0


def test_bfloat16_through_array_protocol():
    t = fiamma.full((2, 2), 1.5, dtype=fiamma.bfloat16)
    assert not hasattr(t, "__array_interface__")
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.tolist() == [[1.5, 1.5], [1.5, 1.5]]
    with pytest.raises(ValueError, match="bfloat16"):
        np.asarray(t, copy=False)


# ---- DLPack --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_np_from_dlpack_of_tensor(dt, layout, rng):
    for shape in [(3, 4), (2, 1, 3), (5,), ()]:
        t, ref = make_pair(shape, dt, rng, layout)
        a = np.from_dlpack(t)
        assert a.dtype == NP_DTYPE[dt]
        assert a.shape == t.shape
        assert a.__array_interface__["data"][0] == t.data_ptr()
        if a.ndim:
            nontrivial = [i for i, n in enumerate(a.shape) if n > 1]
            assert [strides_in_elements(a)[i] for i in nontrivial] == \
                [t.stride(i) for i in nontrivial]
        np.testing.assert_array_equal(a, ref)


@pytest.mark.parametrize("dt", NUMPY_DTYPES, ids=dtype_id)
def test_fiamma_from_dlpack_of_numpy(dt):
    base = random_array((4, 6), dt, np.random.default_rng(3))
    for name, v in [("contiguous", base)] + list(np_views(base)):
        t = fiamma.from_dlpack(v)
        assert t.dtype is dt, name
        assert t.shape == v.shape, name
        assert t.data_ptr() == v.__array_interface__["data"][0], name
        assert t.stride() == strides_in_elements(v), name
        np.testing.assert_array_equal(to_numpy(t), v)
    t = fiamma.from_dlpack(base)
    t.fill_(0)
    assert not base.any()


def test_from_dlpack_0d_empty_and_negative_strides():
    t = fiamma.from_dlpack(np.array(7, dtype=np.int16))
    assert t.shape == () and t.item() == 7 and t.dtype is fiamma.int16
    e = fiamma.from_dlpack(np.zeros((0, 5), np.float32))
    assert e.shape == (0, 5) and e.numel() == 0
    a = np.arange(10.0)
    r = fiamma.from_dlpack(a[::-2])  # negative strides: a copy
    assert r.tolist() == [9.0, 7.0, 5.0, 3.0, 1.0]
    assert r.is_contiguous()
    m = np.arange(6).reshape(2, 3)[:, ::-1]
    assert fiamma.from_dlpack(m).tolist() == m.tolist()
    with pytest.raises(BufferError, match="copy"):
        fiamma.from_dlpack(a[::-1], copy=False)


def test_from_dlpack_copy_argument():
    a = np.arange(4.0)
    c = fiamma.from_dlpack(a, copy=True)
    assert c.data_ptr() != a.__array_interface__["data"][0]
    c.fill_(9.0)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    s = fiamma.from_dlpack(a, copy=False)
    assert s.data_ptr() == a.__array_interface__["data"][0]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3), (2, 0)])
def test_capsule_round_trip(dt, max_version, rng):
    t, ref = make_pair((3, 4), dt, rng, "transposed")
    cap = t.__dlpack__(max_version=max_version)
    versioned = max_version is not None
    assert f'"{"dltensor_versioned" if versioned else "dltensor"}"' in repr(cap)
    u = fiamma.from_dlpack(cap)
    assert f'"{"used_dltensor_versioned" if versioned else "used_dltensor"}"' in repr(cap)
    assert u.dtype is dt
    assert u.shape == t.shape and u.stride() == t.stride()
    assert u.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(to_numpy(u), ref)
    with pytest.raises(ValueError, match="consumed only once"):
        fiamma.from_dlpack(cap)


def test_from_dlpack_of_tensor_shares():
    t = fiamma.zeros(2, 3, dtype=fiamma.bfloat16)
    u = fiamma.from_dlpack(t)
    assert u.dtype is fiamma.bfloat16 and u.data_ptr() == t.data_ptr()
    u.fill_(2.5)
    assert t.tolist() == [[2.5] * 3] * 2


def test_dlpack_lifetimes():
    # a consumer keeps the fiamma storage alive; it is freed after the consumer dies
    t = fiamma.ones(1000)
    w = weakref.ref(t._storage)
    a = np.from_dlpack(t)
    del t
    collect()
    assert w() is not None and a.sum() == 1000
    del a
    collect()
    assert w() is None
    # an unconsumed capsule frees what it holds
    t = fiamma.ones(10)
    w = weakref.ref(t._storage)
    cap = t.__dlpack__()
    del t
    collect()
    assert w() is not None
    del cap
    collect()
    assert w() is None
    # a fiamma import keeps the producer alive and calls its deleter at the end
    t = fiamma.ones(10)
    w = weakref.ref(t._storage)
    u = fiamma.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    v = u.narrow(0, 2, 3)  # a view of the import keeps it alive too
    del t, u
    collect()
    assert w() is not None and v.tolist() == [1.0, 1.0, 1.0]
    del v
    collect()
    assert w() is None


def test_dlpack_import_keeps_numpy_producer_alive():
    a = np.arange(100.0)
    wa = weakref.ref(a.base) if a.base is not None else None
    t = fiamma.from_dlpack(a)
    del a
    collect()
    assert t.tolist()[99] == 99.0
    assert wa is None or wa() is not None


def test_np_from_dlpack_bfloat16_fails_cleanly():
    t = fiamma.ones(3, dtype=fiamma.bfloat16)
    w = weakref.ref(t._storage)
    with pytest.raises(RuntimeError, match="dtype"):  # NumPy's own error, not SystemError
        np.from_dlpack(t)
    del t
    collect()
    assert w() is None


def test_dlpack_device_and_export_errors():
    t = fiamma.ones(3)
    assert t.__dlpack_device__() == (1, 0)
    assert type(t.__dlpack__(dl_device=(1, 0))).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)
    t.__dlpack__(stream=None)
    t.requires_grad = True
    with pytest.raises(RuntimeError, match="gradient"):
        t.__dlpack__()


def test_dlpack_copy_export():
    t = fiamma.ones(4)
    a = np.from_dlpack(t, copy=True)
    assert a.__array_interface__["data"][0] != t.data_ptr()
    a[:] = 5
    assert t.tolist() == [1.0] * 4
    b = np.from_dlpack(t, copy=False)
    assert b.__array_interface__["data"][0] == t.data_ptr()


class _OldProducer:
    """A producer from before max_version/copy existed, with a legacy capsule."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


class _GpuProducer:
    def __dlpack__(self, **kw):
        raise AssertionError("must not be called for a non-CPU device")

    def __dlpack_device__(self):
        return (2, 0)


def test_from_dlpack_producers_and_errors():
    a = np.arange(6, dtype=np.int8).reshape(2, 3)
    t = fiamma.from_dlpack(_OldProducer(a))
    assert t.tolist() == a.tolist() and t.data_ptr() == a.__array_interface__["data"][0]
    with pytest.raises(BufferError, match="CPU"):
        fiamma.from_dlpack(_GpuProducer())
    with pytest.raises(TypeError, match="from_dlpack"):
        fiamma.from_dlpack([1, 2, 3])
    with pytest.raises(BufferError, match="cpu"):
        fiamma.from_dlpack(a, device="cuda")
    assert fiamma.from_dlpack(a, device="cpu").tolist() == a.tolist()


def _patched_capsule(field, value):
    """A NumPy-made capsule whose DLTensor has one field changed (to test import errors)."""
    cap = np.arange(4, dtype=np.float32).__dlpack__()
    obj = _interop._dl_tensor(*_interop._managed(cap))
    *path, last = field.split(".")
    for p in path:
        obj = getattr(obj, p)
    setattr(obj, last, value)
    return cap


@pytest.mark.parametrize("field,value,match", [
    ("device.device_type", 2, "device type"),
    ("dtype.lanes", 4, "lanes"),
    ("dtype.code", 5, "unsupported DLPack dtype"),   # complex
    ("dtype.bits", 8, "unsupported DLPack dtype"),   # float8
])
def test_from_dlpack_rejects_what_it_cannot_represent(field, value, match):
    cap = _patched_capsule(field, value)
    with pytest.raises(BufferError, match=match):
        fiamma.from_dlpack(cap)
    assert '"dltensor"' in repr(cap)  # not consumed: the producer's destructor frees it


def test_from_dlpack_readonly_numpy_warns():
    a = np.arange(3.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="read-only"):
        t = fiamma.from_dlpack(a)
    assert t.tolist() == [0.0, 1.0, 2.0]


# ---- PyTorch as a peer ---------------------------------------------------------------------------

TORCH_DTYPES = {}
if torch is not None:
    TORCH_DTYPES = {fiamma.bool: torch.bool, fiamma.uint8: torch.uint8, fiamma.int8: torch.int8,
                    fiamma.int16: torch.int16, fiamma.int32: torch.int32,
                    fiamma.int64: torch.int64, fiamma.float16: torch.float16,
                    fiamma.bfloat16: torch.bfloat16, fiamma.float32: torch.float32,
                    fiamma.float64: torch.float64}


@needs_torch
@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_from_dlpack_of_tensor(dt, layout, rng):
    t, ref = make_pair((3, 4), dt, rng, layout)
    tt = torch.from_dlpack(t)
    assert tt.dtype is TORCH_DTYPES[dt]
    assert tuple(tt.shape) == t.shape and tt.stride() == t.stride()
    assert tt.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(tt.float().numpy() if dt is fiamma.bfloat16 else tt.numpy(),
                                  ref)
    back = fiamma.from_dlpack(tt)
    assert back.dtype is dt and back.data_ptr() == t.data_ptr()


@needs_torch
@pytest.mark.parametrize("dt", ALL_DTYPES, ids=dtype_id)
def test_fiamma_from_dlpack_of_torch(dt):
    src = (torch.arange(24) % 7).reshape(2, 3, 4).to(TORCH_DTYPES[dt])
    for view in [src, src.transpose(0, 2), src[:, 1:, ::2], src[1, 2], src[:0]]:
        t = fiamma.from_dlpack(view)
        assert t.dtype is dt
        assert t.shape == tuple(view.shape)
        if view.numel():
            assert t.stride() == view.stride()
            assert t.data_ptr() == view.data_ptr()
        np.testing.assert_array_equal(to_numpy(t), view.double().numpy())
    cap = torch.utils.dlpack.to_dlpack(src)
    t = fiamma.from_dlpack(cap)
    assert t.data_ptr() == src.data_ptr()


@needs_torch
def test_torch_sharing_and_lifetime():
    x = torch.zeros(5)
    t = fiamma.from_dlpack(x)
    t.fill_(3.0)
    assert x.tolist() == [3.0] * 5
    del x
    collect()
    assert t.tolist() == [3.0] * 5  # the torch storage is alive through the owner
    f = fiamma.ones(100, dtype=fiamma.bfloat16)
    w = weakref.ref(f._storage)
    tt = torch.from_dlpack(f)
    tt.mul_(2)
    assert f.tolist() == [2.0] * 100
    del f
    collect()
    assert w() is not None
    del tt
    collect()
    assert w() is None


# ---- fiamma.asarray ------------------------------------------------------------------------------

def test_asarray():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = fiamma.asarray(a)
    assert t.dtype is fiamma.float32 and t.data_ptr() == a.__array_interface__["data"][0]
    c = fiamma.asarray(a, copy=True)
    assert c.data_ptr() != t.data_ptr() and c.tolist() == a.tolist()
    d = fiamma.asarray(a, dtype=fiamma.float64)
    assert d.dtype is fiamma.float64 and d.tolist() == a.tolist()
    assert fiamma.asarray(t) is t or fiamma.asarray(t).data_ptr() == t.data_ptr()
    lst = fiamma.asarray([[1, 2], [3, 4]])
    assert lst.dtype is fiamma.int64 and lst.tolist() == [[1, 2], [3, 4]]
    assert fiamma.asarray([1.5]).dtype is fiamma.get_default_dtype()
    rev = fiamma.asarray(np.arange(4)[::-1])  # can't share negative strides: copies
    assert rev.tolist() == [3, 2, 1, 0]
    if torch is not None:
        x = torch.arange(4.0)
        y = fiamma.asarray(x)
        assert y.data_ptr() == x.data_ptr() and y.tolist() == [0.0, 1.0, 2.0, 3.0]
