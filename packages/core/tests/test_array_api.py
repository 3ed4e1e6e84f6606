"""fiamma.array_api: the standard's names, signatures, promotion and semantics, against NumPy
(NumPy 2 implements the standard in its main namespace)."""

import inspect
import math

import numpy as np
import pytest

import fiamma
import fiamma.array_api as xp


def A(v, dtype=None):
    return xp.asarray(v, dtype=dtype)


def close(a, b, rtol=1e-6, atol=1e-9):
    assert isinstance(a, fiamma.Tensor) and type(a) is fiamma.Tensor
    np.testing.assert_allclose(a.numpy(), np.asarray(b), rtol=rtol, atol=atol)


# ---- namespace, constants, info --------------------------------------------------------------

def test_namespace_and_constants():
    x = fiamma.zeros(2)
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match="unsupported array API version"):
        x.__array_namespace__(api_version="2019.01")
    assert xp.__array_api_version__ == "2023.12"
    assert (xp.e, xp.pi) == (math.e, math.pi)
    assert math.isinf(xp.inf) and math.isnan(xp.nan) and xp.newaxis is None
    assert fiamma.array_api is xp
    # the PyTorch namespace is untouched
    assert isinstance(fiamma.sort(fiamma.tensor([2, 1])), tuple)


def test_info():
    info = xp.__array_namespace_info__()
    caps = info.capabilities()
    assert caps["boolean indexing"] and caps["data-dependent shapes"]
    assert info.default_device() == fiamma.device("cpu")
    assert fiamma.device("cpu") in info.devices()
    d = info.default_dtypes()
    assert d["integral"] is xp.int64 and d["indexing"] is xp.int64
    assert d["real floating"] is fiamma.get_default_dtype()
    assert d["complex floating"] is fiamma.get_default_dtype().to_complex
    assert set(info.dtypes(kind="complex floating").values()) == {xp.complex64, xp.complex128}
    assert set(info.dtypes(kind=("bool", xp.float64)).values()) == {xp.bool, xp.float64}
    with pytest.raises(ValueError, match="device"):
        info.dtypes(device="tpu")
    with pytest.raises(ValueError, match="unknown device"):
        info.default_dtypes(device="cuda:99")


def test_to_device_and_device():
    x = A([1, 2])
    assert x.device == fiamma.device("cpu")
    assert x.to_device("cpu") is x
    assert xp.asarray(x, device=x.device) is x


def test_signatures_use_standard_names():
    sig = inspect.signature(xp.sum)
    assert list(sig.parameters) == ["x", "axis", "dtype", "keepdims"]
    assert sig.parameters["x"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert list(inspect.signature(xp.linspace).parameters) == [
        "start", "stop", "num", "dtype", "device", "endpoint"]
    assert list(inspect.signature(xp.full).parameters) == ["shape", "fill_value", "dtype",
                                                           "device"]


# ---- dtypes and promotion --------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [
    ("int8", "uint8"), ("int16", "uint8"), ("int8", "int64"), ("uint8", "uint8"),
    ("float32", "float64"), ("float32", "complex64"), ("float64", "complex64"),
    ("complex64", "complex128"), ("bool", "bool"), ("int32", "int64"),
])
def test_result_type_matches_numpy(a, b):
    assert xp.result_type(getattr(xp, a), getattr(xp, b)).name == \
        np.result_type(getattr(np, a), getattr(np, b)).name


def test_zero_d_arrays_and_scalars_promote():
    # a 0-d array takes part in promotion like any array (unlike fiamma's operators)
    x = A([1, 2], dtype=xp.int8)
    y = A(3, dtype=xp.int16)
    assert xp.add(x, y).dtype is xp.int16
    assert (x + y).dtype is xp.int8  # fiamma.Tensor's operator keeps PyTorch's rule
    assert xp.multiply(A([1.0], xp.float32), A(2.0, xp.float64)).dtype is xp.float64
    # Python scalars take the array's dtype
    assert xp.add(x, 1).dtype is xp.int8
    assert xp.add(A([1.0], xp.float32), 1.5).dtype is xp.float32
    assert xp.multiply(2j, A([1.0], xp.float64)).dtype is xp.complex128
    assert xp.result_type(xp.int16, 1, xp.asarray(1, dtype=xp.uint8)) is xp.int16
    with pytest.raises(TypeError, match="expected arrays"):
        xp.add([1], x)


def test_can_cast_isdtype_finfo_iinfo():
    assert xp.can_cast(xp.int8, xp.int16) and not xp.can_cast(xp.int16, xp.int8)
    assert xp.can_cast(xp.uint8, xp.int16) and not xp.can_cast(xp.int8, xp.uint8)
    assert not xp.can_cast(xp.float64, xp.float32) and xp.can_cast(xp.float32, xp.complex64)
    assert not xp.can_cast(xp.bool, xp.int8) and xp.can_cast(A([1.0]), xp.float64)
    assert xp.isdtype(xp.int8, "signed integer") and not xp.isdtype(xp.uint8, "signed integer")
    assert xp.isdtype(xp.complex64, ("real floating", "complex floating"))
    assert not xp.isdtype(xp.bool, "numeric") and xp.isdtype(xp.float32, xp.float32)
    with pytest.raises(ValueError, match="unknown kind"):
        xp.isdtype(xp.int8, "integer")
    fi = xp.finfo(xp.complex64)
    assert fi.dtype is xp.float32 and fi.bits == 32 and fi.eps == np.finfo(np.float32).eps
    assert xp.finfo(xp.float64).smallest_normal == np.finfo(np.float64).smallest_normal
    ii = xp.iinfo(xp.int16)
    assert (ii.min, ii.max, ii.bits, ii.dtype) == (-32768, 32767, 16, xp.int16)
    with pytest.raises(TypeError, match="finfo"):
        xp.finfo(xp.int8)


def test_astype():
    x = A([1.7, -1.7, 2.5])
    assert xp.astype(x, xp.int32).tolist() == [1, -1, 2]
    y = xp.astype(x, x.dtype)
    assert y is not x and y.tolist() == x.tolist()
    assert xp.astype(x, x.dtype, copy=False) is x
    assert xp.astype(A([0, 2]), xp.bool).tolist() == [False, True]
    with pytest.raises(TypeError, match="not defined by the array API"):
        xp.astype(A([1j]), xp.float64)


# ---- creation --------------------------------------------------------------------------------

def test_creation_against_numpy():
    close(xp.arange(10, 1, -3), np.arange(10, 1, -3))
    close(xp.arange(0.5, 2.0, 0.25), np.arange(0.5, 2.0, 0.25))
    assert xp.arange(0, -1).shape == (0,) and xp.arange(5, 5).shape == (0,)
    assert xp.arange(3).dtype is xp.int64 and xp.arange(3.0).dtype is fiamma.get_default_dtype()
    close(xp.eye(3, 4, k=-1), np.eye(3, 4, k=-1))
    close(xp.eye(2, k=5), np.eye(2, k=5))
    close(xp.linspace(2, 3, 5, dtype=xp.float64), np.linspace(2, 3, 5))
    close(xp.linspace(2, 3, 5, endpoint=False, dtype=xp.float64),
          np.linspace(2, 3, 5, endpoint=False))
    assert xp.linspace(0, 1, 0).shape == (0,)
    close(xp.linspace(0, 1 + 2j, 3), np.linspace(0, 1 + 2j, 3))
    assert xp.full((2,), 3).dtype is xp.int64 and xp.full((), True).dtype is xp.bool
    assert xp.full((1,), 1j).dtype is fiamma.get_default_dtype().to_complex
    assert xp.zeros(3).shape == (3,) and xp.ones((2, 0)).shape == (2, 0)
    gx, gy = xp.meshgrid(A([1, 2, 3]), A([4, 5]))
    nx, ny = np.meshgrid([1, 2, 3], [4, 5])
    close(gx, nx)
    close(gy, ny)
    close(xp.tril(A([[1, 2], [3, 4]]), k=-1), np.tril([[1, 2], [3, 4]], k=-1))
    close(xp.triu(A([[1, 2], [3, 4]]), k=1), np.triu([[1, 2], [3, 4]], k=1))


def test_asarray_copy_semantics():
    x = A([1.0, 2.0])
    assert xp.asarray(x) is x
    c = xp.asarray(x, copy=True)
    c[0] = 9.0
    assert x[0].item() == 1.0
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray(x, dtype=xp.float64 if x.dtype is xp.float32 else xp.float32, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray([1, 2], copy=False)
    n = np.arange(3.0)
    v = xp.asarray(n, copy=False)
    n[0] = 7
    assert v[0].item() == 7
    assert xp.asarray([[True, False]]).dtype is xp.bool
    assert xp.asarray([1, 2.5]).dtype is fiamma.get_default_dtype()
    assert xp.asarray([A(1), A(2)]).tolist() == [1, 2]
    with pytest.raises(OverflowError):
        xp.asarray([2 ** 63])


def test_on_device(device):
    # the namespace is fiamma's ops: results stay on the arrays' device
    x = xp.asarray([[3.0, 1.0], [2.0, 5.0]], device=device, dtype=xp.float64)
    dev = fiamma.device(device)
    outs = [xp.sort(x, axis=1), xp.sum(x, axis=0), xp.where(x > 2, x, 0.0),
            xp.unique_counts(xp.asarray([1, 2, 2], device=device)).counts,
            xp.linalg.inv(x), xp.fft.rfft(x), xp.expm1(xp.asarray([1j], device=device)),
            xp.eye(2, device=device), xp.arange(3, device=device),
            xp.linspace(0, 1, 3, device=device), xp.add(x, xp.asarray(1, device=device))]
    assert all(o.device == dev for o in outs)
    np.testing.assert_allclose(outs[0].cpu().numpy(), [[1.0, 3.0], [2.0, 5.0]])
    np.testing.assert_allclose(outs[5].cpu().numpy(), np.fft.rfft([[3.0, 1.0], [2.0, 5.0]]))
    assert x.to_device("cpu").device == fiamma.device("cpu")
