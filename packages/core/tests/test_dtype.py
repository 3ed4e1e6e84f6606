"""dtypes: properties, PyTorch's promotion (promote_types, result_type, can_cast), finfo/iinfo,
fiamma.device, and casting copies between every pair of dtypes against NumPy's astype."""

import itertools
import math
import pickle
import warnings

import numpy as np
import pytest
from conftest import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NP_DTYPE, dtype_id, round_bf16, to_tensor

import fiamma

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")

B, U8, I8, I16, I32, I64 = (fiamma.bool, fiamma.uint8, fiamma.int8, fiamma.int16, fiamma.int32,
                            fiamma.int64)
F16, BF16, F32, F64 = fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64


# ---- dtype objects -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt,itemsize,floating,signed", [
    (B, 1, False, False), (U8, 1, False, False), (I8, 1, False, True), (I16, 2, False, True),
    (I32, 4, False, True), (I64, 8, False, True), (F16, 2, True, True), (BF16, 2, True, True),
    (F32, 4, True, True), (F64, 8, True, True)])
def test_dtype_properties(dt, itemsize, floating, signed):
    assert dt.itemsize == itemsize
    assert dt.is_floating_point is floating
    assert dt.is_signed is signed
    assert dt.is_complex is False
    assert dt.to_real is dt
    assert repr(dt) == str(dt) == "fiamma." + dt.name
    assert pickle.loads(pickle.dumps(dt)) is dt
    assert isinstance(dt, fiamma.dtype)
    t = fiamma.zeros(2, dtype=dt)
    assert t.dtype is dt and t.element_size() == itemsize
    assert t.is_floating_point() is floating and t.is_signed() is signed


def test_dtype_aliases_and_codes():
    assert fiamma.half is F16 and fiamma.float is F32 and fiamma.double is F64
    assert fiamma.short is I16 and fiamma.int is I32 and fiamma.long is I64
    assert [d.code for d in ALL_DTYPES] == list(range(10))  # the C dtype codes
    assert len({d.name for d in ALL_DTYPES}) == 10


# ---- promotion -----------------------------------------------------------------------------------

def _category(d):
    return 0 if d is B else 2 if d.is_floating_point else 1


def test_promote_types_rules():
    for a, b in itertools.product(ALL_DTYPES, repeat=2):
        r = fiamma.promote_types(a, b)
        assert r is fiamma.promote_types(b, a), "promotion is symmetric"
        assert _category(r) == max(_category(a), _category(b))
        if a is b:
            assert r is a
        if _category(a) == _category(b) and a is not b:
            assert r.itemsize >= max(a.itemsize, b.itemsize)
        if _category(a) != _category(b):
            higher = a if _category(a) > _category(b) else b
            assert r is higher, "a different category: the higher one wins as it is"
    assert fiamma.promote_types(U8, I8) is I16
    assert fiamma.promote_types(U8, I16) is I16
    assert fiamma.promote_types(U8, B) is U8
    assert fiamma.promote_types(F16, BF16) is F32
    assert fiamma.promote_types(BF16, F32) is F32
    assert fiamma.promote_types(I64, F16) is F16
    assert fiamma.promote_types(I32, I64) is I64
    assert fiamma.promote_types(B, B) is B


@needs_torch
def test_promote_types_and_can_cast_match_pytorch():
    for a, b in itertools.product(ALL_DTYPES, repeat=2):
        ta, tb = getattr(torch, a.name), getattr(torch, b.name)
        assert fiamma.promote_types(a, b).name == str(torch.promote_types(ta, tb))[6:], (a, b)
        assert fiamma.can_cast(a, b) == torch.can_cast(ta, tb), (a, b)


def test_can_cast_rules():
    for a, b in itertools.product(ALL_DTYPES, repeat=2):
        assert fiamma.can_cast(a, b) == (_category(a) <= _category(b)), (a, b)


def _tensor_of(dt, zero_dim):
    return fiamma.zeros(() if zero_dim else (2,), dtype=dt)


RESULT_TYPE_CASES = [
    # (operands, expected)
    ((("t", I32), 1.0), "default"),
    ((("t", I32), 1), I32),
    ((("t", U8), 1000), U8),
    ((("t", B), 1), I64),
    ((("t", B), 1.5), "default"),
    ((("t", B), True), B),
    ((("t", F16), 2.0), F16),
    ((("t", BF16), 7), BF16),
    ((("t", I8), ("z", I64)), I8),
    ((("t", I32), ("z", F64)), F64),
    ((("t", F16), ("z", F64)), F16),
    ((("t", U8), ("z", I8)), U8),
    ((("t", B), ("z", I8)), I8),
    ((("t", B), ("z", I8), 3), I8),
    ((("z", I32), ("z", I64)), I64),
    ((("z", I32), 1.0), "default"),
    ((("z", U8), 1), U8),
    ((("z", B), 1), I64),
    ((("t", I32), ("t", F16)), F16),
    ((("t", U8), ("t", I8)), I16),
    ((("t", I64), ("z", F16), 1.0), F16),
    ((("t", F32), ("z", F64), 1), F32),
    ((np.float64(1.0), ("t", I32)), "default"),
    ((np.int64(1), ("t", U8)), U8),
]


def _materialise(op):
    if isinstance(op, tuple):
        return _tensor_of(op[1], op[0] == "z")
    return op


@pytest.mark.parametrize("operands,expected", RESULT_TYPE_CASES)
def test_result_type_cases(operands, expected):
    ops = [_materialise(o) for o in operands]
    exp = fiamma.get_default_dtype() if expected == "default" else expected
    assert fiamma.result_type(*ops) is exp
    assert fiamma.result_type(*reversed(ops)) is exp


@needs_torch
def test_result_type_matches_pytorch():
    scalars = [None, True, 3, -2.5]
    for dim_dt, zero_dt, sc in itertools.product([None] + ALL_DTYPES, [None] + ALL_DTYPES,
                                                 scalars):
        ops, tops = [], []
        if dim_dt is not None:
            ops.append(_tensor_of(dim_dt, False))
            tops.append(torch.zeros(2, dtype=getattr(torch, dim_dt.name)))
        if zero_dt is not None:
            ops.append(_tensor_of(zero_dt, True))
            tops.append(torch.zeros((), dtype=getattr(torch, zero_dt.name)))
        if sc is not None:
            ops.append(sc)
            tops.append(sc)
        if len(ops) < 2:
            continue
        if len(tops) == 2:
            expected = torch.result_type(*tops)
        else:  # torch.result_type takes two operands; its elementwise promotion takes any
            from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

            expected = elementwise_dtypes(
                *tops, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]
        assert fiamma.result_type(*ops).name == str(expected)[6:], (dim_dt, zero_dt, sc)


def test_result_type_errors():
    with pytest.raises(TypeError):
        fiamma.result_type("a", fiamma.zeros(1))
    assert fiamma.result_type(F16, I64) is F16  # dtypes count as dimensioned operands


# ---- finfo / iinfo -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [F16, F32, F64], ids=dtype_id)
def test_finfo_matches_numpy(dt):
    fi, ni = fiamma.finfo(dt), np.finfo(NP_DTYPE[dt])
    assert fi.bits == ni.bits and fi.dtype == dt.name
    assert fi.eps == float(ni.eps) and fi.max == float(ni.max) and fi.min == float(ni.min)
    assert fi.tiny == fi.smallest_normal == float(ni.tiny)
    assert "finfo(" in repr(fi)


def test_finfo_bfloat16_and_default():
    fi = fiamma.finfo(BF16)
    assert fi.bits == 16 and fi.eps == 2.0 ** -7 and fi.tiny == 2.0 ** -126
    assert fi.max == (2 - 2.0 ** -7) * 2.0 ** 127 and fi.min == -fi.max
    assert fi.resolution == 0.01
    assert fiamma.finfo().dtype == fiamma.get_default_dtype().name
    with pytest.raises(TypeError):
        fiamma.finfo(I32)


def test_finfo_resolution_is_a_power_of_ten():
    assert fiamma.finfo(F16).resolution == 0.001
    assert fiamma.finfo(F32).resolution == 1e-06
    assert fiamma.finfo(F64).resolution == 1e-15


@needs_torch
@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=dtype_id)
def test_finfo_matches_pytorch(dt):
    fi, ti = fiamma.finfo(dt), torch.finfo(getattr(torch, dt.name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal"):
        assert getattr(fi, attr) == getattr(ti, attr), attr


@pytest.mark.parametrize("dt", INT_DTYPES, ids=dtype_id)
def test_iinfo(dt):
    ii, ni = fiamma.iinfo(dt), np.iinfo(NP_DTYPE[dt])
    assert (ii.min, ii.max, ii.bits, ii.dtype) == (int(ni.min), int(ni.max), ni.bits, dt.name)
    assert isinstance(ii.min, int) and "iinfo(" in repr(ii)
    with pytest.raises(TypeError):
        fiamma.iinfo(F32)


# ---- device --------------------------------------------------------------------------------------

def test_device():
    cpu = fiamma.device("cpu")
    assert cpu is fiamma.device("cpu") and cpu.type == "cpu" and cpu.index is None
    assert repr(cpu) == "device(type='cpu')" and str(cpu) == "cpu"
    c1 = fiamma.device("cuda:1")
    assert (c1.type, c1.index) == ("cuda", 1)
    assert c1 == fiamma.device("cuda", 1) == fiamma.device(1) == "cuda:1"
    assert repr(c1) == "device(type='cuda', index=1)" and str(c1) == "cuda:1"
    assert fiamma.device(c1) is c1
    assert fiamma.device("cuda") != fiamma.device("cuda:0")  # as in PyTorch
    assert cpu == "cpu" and cpu != "cuda" and cpu != "bogus" and cpu != 3
    assert hash(fiamma.device("cuda", 1)) == hash(c1)
    assert len({fiamma.device("cpu"), fiamma.device("cpu"), c1}) == 2
    assert fiamma.device("meta").type == "meta"
    for bad in ("tpu", "cuda:x", "cpu:-1"):
        with pytest.raises(ValueError):
            fiamma.device(bad)
    with pytest.raises(ValueError):
        fiamma.device("cuda:0", 1)
    with pytest.raises(TypeError):
        fiamma.device(1.5)
    with pytest.raises(AttributeError):
        cpu.type = "cuda"
    assert fiamma.zeros(1).device == cpu


def test_tensors_on_other_devices_fail_clearly():
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        fiamma.zeros(2, device="cuda")
    assert fiamma.zeros(2, device="meta").device.type == "meta"  # shape only (test_meta.py)
    assert fiamma.zeros(2, device="cpu").device == "cpu"


# ---- casting copies between every pair of dtypes -------------------------------------------------

def _source_values(dt, rng):
    """NumPy values of ``dt`` (float32 for bfloat16) covering its range and special values."""
    if dt is B:
        return np.array([True, False, True, True, False])
    if not dt.is_floating_point:
        info = np.iinfo(NP_DTYPE[dt])
        edges = [info.min, info.min + 1, -1, 0, 1, 2, 127, 128, 255, 256, info.max - 1, info.max]
        edges = [v for v in edges if info.min <= v <= info.max]
        rand = rng.integers(info.min, info.max, size=64, endpoint=True, dtype=np.int64)
        return np.array(edges + list(rand)).astype(NP_DTYPE[dt])
    npdt = np.float32 if dt is BF16 else NP_DTYPE[dt]
    fi = fiamma.finfo(dt)
    special = [0.0, -0.0, 0.5, -0.5, 0.75, 1.0, -1.0, 1.5, -2.5, 127.9, 128.0, 255.0, 255.5,
               -128.0, -129.0, 32767.0, 65504.0, 65520.0, 1e5, 2.0 ** 31, 2.0 ** 40, 2.0 ** 63,
               1e-3, 1e-5, 1e-8, 3e-39, fi.tiny, fi.max, -fi.max, math.inf, -math.inf, math.nan]
    rand = np.concatenate([rng.standard_normal(40) * 10.0 ** rng.integers(-6, 6, 40),
                           rng.uniform(-300, 300, 40), rng.integers(-1000, 1000, 20)])
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vals = np.array(special + list(rand), dtype=np.float64).astype(npdt)
    if dt is BF16:
        vals = round_bf16(vals)
    return vals


def _reference(src_vals, dst):
    """NumPy's astype of ``src_vals`` to ``dst`` (bfloat16: float32 rounded to bf16), and the
    positions where the result is defined (float -> int of nan/inf/out-of-range is not)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dst is BF16:
            ref = round_bf16(src_vals.astype(np.float32))
        else:
            ref = src_vals.astype(NP_DTYPE[dst])
    valid = np.ones(src_vals.shape, bool)
    if src_vals.dtype.kind == "f" and dst._kind == 1:
        info = np.iinfo(NP_DTYPE[dst])
        with np.errstate(invalid="ignore"):
            trunc = np.trunc(src_vals.astype(np.float64))
            top = 2.0 ** (info.bits - (info.min < 0))  # exact, unlike float(info.max)
            valid = np.isfinite(trunc) & (trunc >= info.min) & (trunc < top)
    return ref, valid


@pytest.mark.parametrize("src", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("dst", ALL_DTYPES, ids=dtype_id)
def test_cast_every_pair_matches_numpy(src, dst):
    rng = np.random.default_rng(src.code * 10 + dst.code)
    vals = _source_values(src, rng)
    ref, valid = _reference(vals, dst)
    t = to_tensor(vals, src)
    if src is BF16:
        assert (t.float().numpy() == vals)[~np.isnan(vals)].all()
    # contiguous (one C loop over the buffer) and strided (the N-d iterator) source layouts,
    # and a strided destination through copy_
    n = len(vals)
    strided_src = to_tensor(np.repeat(vals, 2), src).as_strided((n,), (2,), 1) \
        if src is not BF16 else to_tensor(np.repeat(vals, 2), F32).to(BF16).as_strided(
            (n,), (2,), 1)
    strided_dst = fiamma.zeros(2 * n, dtype=dst).as_strided((n,), (2,), 1)
    strided_dst.copy_(t)
    for out in (t.to(dst), strided_src.to(dst), strided_dst):
        assert out.dtype is dst and out.shape == (n,)
        got = out.float().numpy() if dst is BF16 else out.numpy()
        np.testing.assert_array_equal(got[valid], ref[valid], err_msg=f"{src} -> {dst}")


def test_cast_2d_non_contiguous_all_pairs():
    rng = np.random.default_rng(7)
    a = rng.integers(-100, 100, size=(5, 7))
    for src, dst in itertools.product(ALL_DTYPES, repeat=2):
        vals = (a > 0) if src is B else np.abs(a) if src is U8 else a
        t = to_tensor(vals.T.copy(), src).T  # transposed layout
        ref, _ = _reference(vals.astype(np.float32) if src is BF16 else
                            vals.astype(NP_DTYPE[src]), dst)
        out = t.to(dst)
        got = out.float().numpy() if dst is BF16 else out.numpy()
        np.testing.assert_array_equal(got, ref, err_msg=f"{src} -> {dst}")


def test_float_to_int_conversion_truncates_toward_zero():
    f = to_tensor(np.array([2.9, -2.9, 0.5, -0.5, 100.99]), F64)
    assert f.to(I32).tolist() == [2, -2, 0, 0, 100]
    assert f.to(I8).tolist() == [2, -2, 0, 0, 100]
    assert f.to(B).tolist() == [True, True, True, True, True]
    z = to_tensor(np.array([0.0, -0.0, np.nan]), F32)
    assert z.to(B).tolist() == [False, False, True]
    # nan/inf/out of range do not crash (values are implementation-defined)
    to_tensor(np.array([np.nan, np.inf, -np.inf, 1e30]), F32).to(I64)
    to_tensor(np.array([np.nan, np.inf, -np.inf, 1e30]), F64).to(U8)


def test_bfloat16_rounding_and_specials():
    v = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3.4e38, -0.0, np.inf, np.nan,
                  1e-40], dtype=np.float32)
    b = to_tensor(v, F32).to(BF16).float().numpy()
    assert b[0] == 1.0  # a tie rounds to even
    assert b[1] == 1.0 + 2.0 ** -6
    assert b[2] == np.float32(round_bf16(np.array([3.4e38]))[0])
    assert math.copysign(1, b[3]) == -1 and b[4] == np.inf and np.isnan(b[5])
    assert b[6] == round_bf16(np.array([1e-40], dtype=np.float32))[0]  # subnormals kept


def test_kind_is_numpys_letter():
    import numpy as np

    for dt in (fiamma.bool, fiamma.uint8, fiamma.uint16, fiamma.uint32, fiamma.uint64,
               fiamma.int8, fiamma.int16, fiamma.int32, fiamma.int64, fiamma.float16,
               fiamma.float32, fiamma.float64, fiamma.complex64, fiamma.complex128):
        assert dt.kind == np.dtype(dt.name).kind, dt
    assert fiamma.bfloat16.kind == "f"
