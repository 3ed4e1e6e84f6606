"""The Tensor API that ported PyTorch code reaches for beyond the ops (fiamma._tensor_api and
fiamma._storage_api): new_*, device predicates, storage()/untyped_storage(), the in-place shape
methods, and indexing with ranges and nested lists. NumPy and hand references; (parity)
the same calls on torch."""

import warnings

import numpy as np
import pytest

import fiamma

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


# ---- new_* ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [fiamma.float64, fiamma.int32, fiamma.bool, fiamma.bfloat16])
def test_new_family_takes_dtype_and_device(dt):
    x = fiamma.zeros(2, dtype=dt)
    for y in (x.new_zeros(2, 3), x.new_zeros((2, 3)), x.new_zeros([2, 3])):
        assert y.dtype is dt and y.shape == (2, 3) and y.device == x.device
        assert not y.bool().any().item()
    assert x.new_ones(4).tolist() == fiamma.ones(4, dtype=dt).tolist()
    assert x.new_empty(3, 1).shape == (3, 1) and x.new_empty(()).shape == ()
    assert x.new_full((2,), 1).tolist() == fiamma.full((2,), 1, dtype=dt).tolist()
    t = x.new_tensor([[1, 0], [0, 1]])
    assert t.dtype is dt and t.tolist() == fiamma.tensor([[1, 0], [0, 1]], dtype=dt).tolist()


def test_new_family_overrides_and_copies():
    x = fiamma.zeros(3)
    y = x.new_zeros(2, dtype=fiamma.int64, requires_grad=False)
    assert y.dtype is fiamma.int64
    assert x.new_full((2, 2), 2.5, dtype=fiamma.float64).tolist() == [[2.5, 2.5]] * 2
    assert x.new_ones(2, device="cpu").device == fiamma.device("cpu")
    # new_tensor copies (never shares) and casts to x's dtype, not data's
    src = fiamma.tensor([1, 2, 3])
    c = x.new_tensor(src)
    assert c.dtype is fiamma.float32 and c.data_ptr() != src.data_ptr()
    a = np.arange(4, dtype=np.int16)
    c = fiamma.zeros(1, dtype=fiamma.int16).new_tensor(a)
    a[0] = 9
    assert c.tolist() == [0, 1, 2, 3]
    assert fiamma.zeros(1, dtype=fiamma.int64).new_tensor(2.9).item() == 2
    with pytest.raises(Exception, match="negative"):
        x.new_zeros(-1)


def test_new_family_on_parameter_like_subclass():
    class P(fiamma.Tensor):
        pass

    p = fiamma.ones(2, 2, dtype=fiamma.float64).as_subclass(P)
    z = p.new_zeros(p.shape)
    # the subclass's default __torch_function__ keeps its type, as PyTorch's
    assert type(z) is P and z.dtype is fiamma.float64 and z.tolist() == [[0.0] * 2] * 2


# ---- predicates ----------------------------------------------------------------------------

def test_device_predicates():
    x = fiamma.ones(2)
    for name in ("is_xpu", "is_mps", "is_meta", "is_cuda", "is_quantized", "is_sparse",
                 "is_mkldnn", "is_vulkan", "is_ipu", "is_hpu", "is_xla", "is_mtia", "is_maia",
                 "is_nested", "is_sparse_csr"):
        assert getattr(x, name) is False, name
    assert x.is_cpu is True
    assert x.get_device() == -1
    assert not x.is_inference()
    assert x.is_set_to(x) and not x.is_set_to(x.clone()) and not x.is_set_to(x[:1])


# ---- storages ------------------------------------------------------------------------------

def test_untyped_storage_shared_by_views():
    x = fiamma.arange(12, dtype=fiamma.float32).reshape(3, 4)
    s = x.untyped_storage()
    assert s is x.untyped_storage() is x[1:, 2].untyped_storage() is x.t().untyped_storage()
    assert s is not x.clone().untyped_storage()
    assert isinstance(s, fiamma.UntypedStorage)
    assert s.nbytes() == s.size() == len(s) == 48 and s.element_size() == 1
    assert s.data_ptr() == x.data_ptr() == x[1].untyped_storage().data_ptr()
    assert x[1].data_ptr() == s.data_ptr() + 16
    ref = np.arange(12, dtype=np.float32).view(np.uint8)
    assert s.tolist() == ref.tolist() and list(s) == ref.tolist()
    assert s[5] == ref[5] and s[-1] == ref[-1]
    with pytest.raises(IndexError, match="out of range"):
        s[48]
    s[0] = 300  # bytes wrap as PyTorch's do
    assert s[0] == 44
    s[0] = 0
    sub = s[4:8]
    assert sub.nbytes() == 4 and sub.data_ptr() == s.data_ptr() + 4
    sub.fill_(0)
    assert x[0, 1].item() == 0.0
    c = s.clone()
    assert c.data_ptr() != s.data_ptr() and c.tolist() == s.tolist()
    assert s.device == fiamma.device("cpu") and not s.is_cuda and s.resizable()


def test_untyped_storage_created_and_kept_alive():
    u = fiamma.UntypedStorage(5)
    assert u.nbytes() == 5 and u.tolist() == [0] * 5
    x = fiamma.ones(3)
    s = x.untyped_storage()
    ptr = s.data_ptr()
    del x
    assert s.data_ptr() == ptr and len(s.tolist()) == 12  # the storage keeps the memory
    with pytest.raises(TypeError, match="pickled"):
        import pickle

        pickle.dumps(s)


def test_typed_storage_elements():
    x = fiamma.arange(6, dtype=fiamma.float64).reshape(2, 3)
    v = x[1, 1:]
    t = v.storage()
    assert isinstance(t, fiamma.TypedStorage) and t.dtype is fiamma.float64
    assert t.size() == len(t) == 6 and t.nbytes() == 48 and t.element_size() == 8
    assert t.data_ptr() == x.data_ptr() and t.untyped() is x.untyped_storage()
    assert t.tolist() == list(range(6)) and t[4] == 4.0 and t[-1] == 5.0
    t[0] = 7
    t[1:3] = 9
    assert x.tolist() == [[7.0, 9.0, 9.0], [3.0, 4.0, 5.0]]
    assert t.long().tolist() == [7, 9, 9, 3, 4, 5] and t.long().dtype is fiamma.int64
    assert t.float().dtype is fiamma.float32 and t.double() is t
    with pytest.raises(IndexError, match="out of range"):
        t[6]
    with pytest.raises(RuntimeError, match="slices"):
        t[1:2]
    assert fiamma.tensor([True, False]).storage()[0] is True
    assert fiamma.TypedStorage(3, dtype=fiamma.int16).size() == 3
    assert fiamma.TypedStorage([1, 2], dtype=fiamma.int64).tolist() == [1, 2]


# ---- in-place shape methods ----------------------------------------------------------------

def _pair():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return fiamma.tensor(a), a


@pytest.mark.parametrize("call,ref", [
    (lambda t: t.unsqueeze_(1), lambda a: np.expand_dims(a, 1)),
    (lambda t: t.unsqueeze_(-1), lambda a: np.expand_dims(a, -1)),
    (lambda t: t.transpose_(0, 2), lambda a: np.swapaxes(a, 0, 2)),
    (lambda t: t.swapdims_(0, 1), lambda a: np.swapaxes(a, 0, 1)),
    (lambda t: t.swapaxes_(1, 2), lambda a: np.swapaxes(a, 1, 2)),
    (lambda t: t.as_strided_((3, 2), (1, 4), 2),
     lambda a: np.lib.stride_tricks.as_strided(a.reshape(-1)[2:], (3, 2), (4, 16))),
])
def test_inplace_shape_methods_match_numpy(call, ref):
    t, a = _pair()
    ptr = t.data_ptr()
    st = t.untyped_storage()
    out = call(t)
    assert out is t and t.untyped_storage() is st
    np.testing.assert_array_equal(t.numpy(), ref(a))
    assert t.data_ptr() == ptr + 4 * t.storage_offset()


def test_squeeze_and_t_inplace():
    t = fiamma.zeros(1, 3, 1, 2)
    assert t.squeeze_(0).shape == (3, 1, 2)
    assert t.squeeze_().shape == (3, 2)
    assert t.t_().shape == (2, 3) and t.stride() == (1, 2)
    v = fiamma.zeros(2, 3)
    row = v[0]
    row.unsqueeze_(0)
    assert row.shape == (1, 3) and v.shape == (2, 3)  # the base is untouched
    row.fill_(1)
    assert v.tolist() == [[1.0] * 3, [0.0] * 3]
    with pytest.raises(IndexError):
        fiamma.zeros(2).unsqueeze_(3)
    with pytest.raises(RuntimeError):
        fiamma.zeros(2, 2, 2).t_()


def test_resize():
    x = fiamma.arange(6.0)
    st = x.untyped_storage()
    assert x.resize_(2, 2).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert x.untyped_storage() is st  # shrinking keeps the storage
    x.resize_(4, 4)
    assert x.untyped_storage().nbytes() == 64 and x.stride() == (4, 1)
    assert x.reshape(-1)[:6].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    y = fiamma.zeros(1).resize_as_(fiamma.zeros(2, 5))
    assert y.shape == (2, 5)
    assert fiamma.zeros(3).resize_(0).shape == (0,)
    with pytest.raises(RuntimeError, match="negative"):
        fiamma.zeros(3).resize_(-1)
    b = fiamma.from_numpy(np.zeros(3, dtype=np.float32))
    b.resize_(3, 1)
    with pytest.raises(RuntimeError, match="not resizable"):
        b.resize_(10)


# ---- indexing with range objects and nested lists -----------------------------------------

_KEYS = [
    "range(2)", "range(0)", "(range(2), [1, 2])", "(range(3), range(1, 4))",
    "((0, 1), (1, 2))", "(slice(None), range(3, 0, -1))", "[range(3)]",
    "([[0, 1], [1, 2]], 0)", "(range(2), Ellipsis, [0, 3])",
]


@pytest.mark.parametrize("key", _KEYS)
def test_getitem_with_ranges_and_sequences(key):
    a = np.arange(3 * 4, dtype=np.int64).reshape(3, 4)
    k = eval(key)
    nk = tuple(list(i) if isinstance(i, range) else i for i in k) if isinstance(k, tuple) \
        else (list(k) if isinstance(k, range) else k)
    if isinstance(k, list):
        nk = tuple(list(i) if isinstance(i, range) else i for i in k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # [range(3)]: a list holding a sequence (a tuple)
        assert fiamma.tensor(a)[k].tolist() == a[nk].tolist()


def test_list_of_sequences_reads_as_tuple_with_a_warning():
    x = fiamma.arange(12).reshape(3, 4)
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert x[[[0, 1], [1, 2]]].tolist() == [1, 6]
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert x[[range(2), range(2)]].tolist() == [0, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x[[0, 2]].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
        assert x[np.array([[0, 1], [1, 2]])].shape == (2, 2, 4)  # an array is an index array
        assert x[[[0, 1]] * 32].shape == (32, 2, 4)  # 32 or more: an index array


def test_setitem_with_range_like_forward_forward():
    n, k = 5, 3
    y = fiamma.tensor([2, 0, 1, 1, 2])
    x = fiamma.zeros(n, k)
    x[range(n), y] = 1.0
    ref = np.zeros((n, k), dtype=np.float32)
    ref[np.arange(n), [2, 0, 1, 1, 2]] = 1.0
    np.testing.assert_array_equal(x.numpy(), ref)
    x[range(1, 3)] = fiamma.tensor([7.0, 8.0, 9.0])
    ref[1:3] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(x.numpy(), ref)


# ---- parity --------------------------------------------------------------------------------

@pytest.mark.parametrize("key", _KEYS + ["[[0, 1], [1, 2]]", "[[[0, 1]], [[1], [2]]]",
                                         "[0, [1, 2]]", "[(0, 1), (1, 2)]"])
@pytest.mark.parity
@needs_torch
def test_indexing_parity(key):
    a = np.arange(12).reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fiamma.tensor(a)[eval(key)]
        want = torch.tensor(a)[eval(key)]
        assert tuple(got.shape) == tuple(want.shape) and got.tolist() == want.tolist()
        g2, w2 = fiamma.tensor(a), torch.tensor(a)
        g2[eval(key)] = -1
        w2[eval(key)] = -1
        assert g2.tolist() == w2.tolist()


@pytest.mark.parity
@needs_torch
def test_tensor_api_parity():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    f, t = fiamma.tensor(a), torch.tensor(a)
    for name in ("new_zeros", "new_ones", "new_empty"):
        assert tuple(getattr(f, name)(2, 3).shape) == tuple(getattr(t, name)(2, 3).shape)
    assert f.new_full((2,), 3).tolist() == t.new_full((2,), 3).tolist()
    assert f.new_tensor([1, 2]).tolist() == t.new_tensor([1, 2]).tolist()
    for name in ("is_xpu", "is_mps", "is_meta", "is_cuda", "is_cpu", "is_quantized",
                 "is_sparse", "is_mkldnn", "is_nested"):
        assert getattr(f, name) == getattr(t, name), name
    assert f.get_device() == t.get_device()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fs, ts = f[1].storage(), t[1].storage()
        assert fs.size() == ts.size() and fs.tolist() == ts.tolist() and fs[7] == ts[7]
        assert f.untyped_storage().tolist() == t.untyped_storage().tolist()
        assert f.untyped_storage().nbytes() == t.untyped_storage().nbytes()
    for call in (lambda x: x.unsqueeze_(1), lambda x: x.transpose_(0, 2),
                 lambda x: x.squeeze_(), lambda x: x[0].t_(),
                 lambda x: x.as_strided_((3, 2), (1, 4), 2), lambda x: x.resize_(2, 2),
                 lambda x: x.swapdims_(0, 1)):
        y, z = call(fiamma.tensor(a)), call(torch.tensor(a))
        assert tuple(y.shape) == tuple(z.shape) and y.stride() == z.stride()
        assert y.tolist() == z.tolist()


def test_numpy_axis_and_keepdims_names_as_pytorch():
    # PyTorch's parser takes axis= for dim= and keepdims= for keepdim= (timm's JSD loss
    # writes ``stack(probs).mean(axis=0)``)
    x = fiamma.arange(12.0).reshape(3, 4)
    assert x.mean(axis=0).tolist() == [4.0, 5.0, 6.0, 7.0]
    assert fiamma.sum(x, axis=1, keepdims=True).tolist() == [[6.0], [22.0], [38.0]]
    assert x.sum(0, keepdims=True).shape == (1, 4)
    assert fiamma.cat([x, x], axis=1).shape == (3, 8)
    assert fiamma.stack([x, x], axis=0).shape == (2, 3, 4)
    assert x.amax(axis=1).tolist() == [3.0, 7.0, 11.0]
    assert x.max(axis=0).indices.tolist() == [2, 2, 2, 2]
    assert fiamma.argmax(x, axis=1).tolist() == [3, 3, 3]
    assert x.unsqueeze(axis=0).shape == (1, 3, 4)
    assert x.softmax(axis=1).sum(1).allclose(fiamma.ones(3))
    with pytest.raises(TypeError, match="both 'dim' and its alias 'axis'"):
        x.sum(dim=0, axis=0)
    # functions keep their names, signatures and picklability
    import inspect
    import pickle
    assert fiamma.sum.__name__ == "sum"
    assert list(inspect.signature(fiamma.sum).parameters)[:3] == ["input", "dim", "keepdim"]
    assert pickle.loads(pickle.dumps(fiamma.softmax)) is fiamma.softmax
    # ops without a dim parameter are not wrapped
    assert fiamma.add is fiamma._ops.elementwise.add


def test_varargs_methods_take_pytorchs_keywords():
    x = fiamma.arange(6.0).reshape(2, 3)
    assert x.view(size=(3, 2)).shape == (3, 2)
    assert x.view(dtype=fiamma.int32).dtype == fiamma.int32
    assert x.reshape(shape=(6,)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert x.permute(dims=(1, 0)).shape == (3, 2)
    assert x.expand(size=(2, 2, 3)).shape == (2, 2, 3)
    assert x.flip(dims=(0,))[0].tolist() == [3.0, 4.0, 5.0]
    assert x.repeat(repeats=(1, 2)).shape == (2, 6)
    assert x.tile(dims=(2,)).shape == (2, 6)
    assert x.new_zeros(size=(2,)).tolist() == [0.0, 0.0]
    assert x.new_ones(size=(1,)).dtype == x.dtype
    with pytest.raises(TypeError, match="multiple values for argument 'size'"):
        x.view(3, 2, size=(3, 2))
    with pytest.raises(TypeError, match="multiple values for argument 'dims'"):
        x.permute(1, 0, dims=(1, 0))


def test_untyped_storage_from_file(tmp_path):
    # PyTorch's UntypedStorage.from_file, which safetensors' PyTorch loader (safe_open with
    # framework="pt") calls to map a checkpoint
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(10)))
    s = fiamma.UntypedStorage.from_file(str(path), False, 4)
    assert s.nbytes() == 4 and s.tolist() == [0, 1, 2, 3]
    s[0] = 99  # copy-on-write: the file keeps its bytes
    assert s[0] == 99 and path.read_bytes()[:2] == b"\x00\x01"
    t = fiamma.asarray(s[1:3], dtype=fiamma.uint8)
    assert t.tolist() == [1, 2]
    shared = fiamma.UntypedStorage.from_file(str(path), shared=True, nbytes=4)
    shared[0] = 77
    del shared
    assert path.read_bytes()[:2] == b"M\x01"
    grown = tmp_path / "new.bin"
    assert fiamma.UntypedStorage.from_file(str(grown), True, 6).tolist() == [0] * 6
    assert grown.stat().st_size == 6
    assert fiamma.UntypedStorage.from_file(str(path), False, 0).nbytes() == 0
    with pytest.raises(RuntimeError, match="size <10> is smaller than the required mapping "
                                           "size <20>"):
        fiamma.UntypedStorage.from_file(str(path), False, 20)
