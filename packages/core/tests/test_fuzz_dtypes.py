"""Differences found by a differential fuzz against PyTorch over float16/bfloat16/complex/int8/
int16 operands, mixed-dtype promotion, non-contiguous layouts, keyword arguments and in-place
forms (2026-11-29). The NumPy tests run everywhere; the parity tests compare with PyTorch."""
import cmath

import numpy as np
import pytest

import fiamma

C = [1 + 2j, -3 + 0.5j, 0j, 2 - 1j]


def _c(v=C, dt=fiamma.complex64):
    return fiamma.tensor(v, dtype=dt)


# ---- complex operands were cast to a real dtype (the imaginary part dropped silently) --------

def test_float_power_of_complex_is_complex128():
    r = fiamma.float_power(_c(), 2)
    assert r.dtype is fiamma.complex128
    np.testing.assert_allclose(r.numpy(), np.array(C, np.complex128) ** 2)
    r = fiamma.float_power(fiamma.tensor([2, 3]), 1j)
    assert r.dtype is fiamma.complex128
    np.testing.assert_allclose(r.numpy(), np.array([2, 3]) ** 1j)
    assert fiamma.float_power(fiamma.tensor([2, 3]), 2).dtype is fiamma.float64


def test_float_power_inplace_needs_the_result_dtype():
    x = _c(dt=fiamma.complex128)
    x.float_power_(2)
    np.testing.assert_allclose(x.numpy(), np.array(C) ** 2)
    with pytest.raises(RuntimeError, match="complex128"):
        _c().float_power_(2)
    with pytest.raises(RuntimeError, match="complex128"):
        fiamma.tensor([1.0], dtype=fiamma.float64).float_power_(1j)


def test_sinc_of_complex():
    z = np.array(C, np.complex128)
    r = fiamma.sinc(_c(dt=fiamma.complex128))
    assert r.dtype is fiamma.complex128
    np.testing.assert_allclose(r.numpy(), np.sinc(z), rtol=1e-12)
    x = _c(dt=fiamma.complex128)
    x.sinc_()
    np.testing.assert_allclose(x.numpy(), np.sinc(z), rtol=1e-12)


def test_logaddexp_of_complex():
    a = np.array([1 + 2j, -1000 + 1j, 1000 - 3j, 0.5j], np.complex128)
    b = np.array([0.5, -1000 + 2j, 2 + 1j, -2 + 0j], np.complex128)
    r = fiamma.logaddexp(fiamma.tensor(a), fiamma.tensor(b))
    assert r.dtype is fiamma.complex128
    # the reference, shifted by hand where exp would overflow
    ref = [cmath.log(cmath.exp(x) + cmath.exp(y)) if abs(x.real) < 500 else
           x + cmath.log(1 + cmath.exp(y - x)) for x, y in zip(a, b)]
    np.testing.assert_allclose(r.numpy(), ref, rtol=1e-12)
    assert fiamma.logaddexp(_c(), fiamma.tensor([1.0])).dtype is fiamma.complex64


@pytest.mark.parametrize("fn", ["lgamma", "digamma", "erfinv", "i0", "xlogy", "logaddexp2"])
def test_real_only_special_functions_reject_complex(fn):
    f = getattr(fiamma, fn)
    args = (_c(), _c()) if fn in ("xlogy", "logaddexp2") else (_c(),)
    # NotImplementedError, as PyTorch's kernels raise for complex dtypes
    with pytest.raises(NotImplementedError, match=f"{fn}: not implemented for complex"):
        f(*args)


def test_isreal_of_complex():
    x = fiamma.tensor([[1 + 0j, 1j], [2, 3 + 0j]])
    assert x.isreal().tolist() == [[True, False], [True, True]]
    assert x.t().isreal().tolist() == [[True, True], [False, True]]
    assert fiamma.isreal(fiamma.tensor([1.0, 2.0])).tolist() == [True, True]


# ---- complex operands the real kernels refused ----------------------------------------------

@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops_of_complex(op):
    a = _c([1j, 0j, 1, 0j])
    b = fiamma.tensor([1, 1, 0, 0], dtype=fiamma.int8)
    r = getattr(fiamma, op)(a, b)
    ref = getattr(np, op)(np.array([1j, 0, 1, 0]), np.array([1, 1, 0, 0]))
    assert r.dtype is fiamma.bool and r.tolist() == ref.tolist()
    assert fiamma.logical_not(a).tolist() == [False, True, False, True]


def test_addcmul_addcdiv_lerp_of_complex():
    a, b, c = _c(), fiamma.tensor([2, 1, 3, 4]), _c([1 + 1j, 2, 1j, -1])
    na, nb, nc = np.array(C), np.array([2, 1, 3, 4]), np.array([1 + 1j, 2, 1j, -1])
    np.testing.assert_allclose(fiamma.addcmul(a, b, c, value=2).numpy(), na + 2 * nb * nc,
                               rtol=1e-6)
    np.testing.assert_allclose(fiamma.addcdiv(a, b, c, value=0.5j).numpy(), na + 0.5j * nb / nc,
                               rtol=1e-6)
    e = _c([2, 2j, 1, 0])
    ne = np.array([2, 2j, 1, 0])
    np.testing.assert_allclose(fiamma.lerp(a, e, 0.25).numpy(), na + 0.25 * (ne - na), rtol=1e-6)
    np.testing.assert_allclose(fiamma.lerp(a, e, c).numpy(), na + nc * (ne - na), rtol=1e-6)
    x = a.clone()
    x.lerp_(e, 0.5j)
    np.testing.assert_allclose(x.numpy(), na + 0.5j * (ne - na), rtol=1e-6)
    with pytest.raises(RuntimeError, match="value 2j cannot be converted"):
        fiamma.addcmul(fiamma.tensor([1.0]), fiamma.tensor([2.0]), fiamma.tensor([1.0]), value=2j)


def test_diff_of_complex():
    x = _c()
    np.testing.assert_allclose(x.diff().numpy(), np.diff(np.array(C)), rtol=1e-6)


def test_inplace_abs_of_complex_raises():
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex"):
        _c().abs_()
    x = fiamma.tensor([-1.0, 2.0])
    x.abs_()
    assert x.tolist() == [1.0, 2.0]


# ---- promotion and argument checks ----------------------------------------------------------

def test_ldexp_result_dtype_is_the_promoted_one():
    i32, f16 = fiamma.tensor([1, 2], dtype=fiamma.int32), fiamma.tensor([1.0, 2.0],
                                                                      dtype=fiamma.float16)
    assert fiamma.ldexp(i32, f16).dtype is fiamma.float16
    assert fiamma.ldexp(f16, fiamma.tensor([1, 2])).dtype is fiamma.float16
    assert fiamma.ldexp(i32, fiamma.tensor([1, 2])).dtype is fiamma.float32
    assert fiamma.ldexp(f16, fiamma.tensor([3, -1])).tolist() == [8.0, 1.0]
    # the power of two is not rounded to bfloat16 before the product
    r = fiamma.ldexp(fiamma.tensor([1 + 1j, 2]), fiamma.tensor([0.3, -1.7]).bfloat16())
    e = np.array([0.30078125, -1.703125])  # the exponents as bfloat16
    np.testing.assert_allclose(r.numpy(), np.array([1 + 1j, 2]) * 2.0 ** e, rtol=1e-6)


def test_nextafter_promotes_and_steps_in_half_precision():
    r = fiamma.nextafter(fiamma.tensor([1.0]), fiamma.tensor([2.0], dtype=fiamma.float64))
    assert r.dtype is fiamma.float64 and r.item() == np.nextafter(1.0, 2.0)
    x = np.array([0.0, -0.0, 1.0, -1.0, 65504.0, 6e-8, np.inf, 3.5, np.nan, 2.0], np.float16)
    y = np.array([1.0, -1.0, 2.0, 0.0, np.inf, 0.0, 0.0, 3.5, 1.0, -np.inf], np.float16)
    r = fiamma.nextafter(fiamma.from_numpy(x), fiamma.from_numpy(y)).numpy()
    with np.errstate(over="ignore"):
        ref = np.nextafter(x, y)
    np.testing.assert_array_equal(r, ref)
    assert (np.signbit(r) == np.signbit(ref)).all()
    b = fiamma.nextafter(fiamma.tensor([1.0, 0.0, -1.0]).bfloat16(),
                         fiamma.tensor([2.0, -1.0, -2.0]).bfloat16()).float().tolist()
    assert b == [1.0078125, -2 ** -133, -1.0078125]
    with pytest.raises(RuntimeError, match="nextafter"):
        fiamma.nextafter(fiamma.tensor([1]), fiamma.tensor([2]))


def test_add_alpha_follows_the_result_dtype():
    # a float alpha is fine when the result is complex; a complex alpha needs a complex result
    r = fiamma.add(fiamma.tensor([1, 2]), fiamma.tensor([1j]), alpha=0.5)
    assert r.tolist() == [1 + 0.5j, 2 + 0.5j]
    x = _c([1j, 2])
    x.add_(fiamma.tensor([1, 2], dtype=fiamma.uint8), alpha=0.5)
    assert x.tolist() == [0.5 + 1j, 3 + 0j]
    assert fiamma.tensor([1j, 2]).sub(0.5, alpha=0.5j).tolist() == [0.75j, 2 - 0.25j]
    with pytest.raises(RuntimeError, match="alpha must not be a complex"):
        fiamma.add(fiamma.tensor([1.0]), 1, alpha=1j)
    with pytest.raises(RuntimeError, match="alpha must not be a floating"):
        fiamma.add(fiamma.tensor([1]), 1, alpha=0.5)


@pytest.mark.parametrize("expr", ["x - True", "True - x", "x.sub(False)", "x.sub_(True)",
                                  "fiamma.sub(x, True, alpha=2)", "fiamma.rsub(x, True)"])
def test_subtracting_a_python_bool_raises(expr):
    x = fiamma.tensor([1.0, 2.0])  # noqa: F841 (used by eval)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool"):
        eval(expr)


# ---- empty dims and indices -----------------------------------------------------------------

def test_logcumsumexp_of_an_empty_dim():
    r = fiamma.logcumsumexp(fiamma.zeros(0, 3), 0)
    assert r.shape == (0, 3) and r.dtype is fiamma.float32
    with pytest.raises(IndexError):
        fiamma.logcumsumexp(fiamma.zeros(0, 3), 2)


def test_take_along_dim_counts_negative_indices_from_the_end():
    x = fiamma.arange(6.0).reshape(2, 3)
    assert fiamma.take_along_dim(x, fiamma.tensor([[-1, 0, -2]]), 1).tolist() == \
        [[2.0, 0.0, 1.0], [5.0, 3.0, 4.0]]
    assert fiamma.take_along_dim(x, fiamma.tensor([[-2]]), 0).tolist() == [[0.0, 1.0, 2.0]]
    with pytest.raises(IndexError):  # beyond -size: an error (PyTorch reads out of range)
        fiamma.take_along_dim(x, fiamma.tensor([[-3]]), 0)


# ---- parity ---------------------------------------------------------------------------------

PARITY = [
    "lib.float_power(lib.tensor([1 + 1j, -2j]), 2)",
    "lib.float_power(lib.tensor([2, 3], dtype=lib.int8), 1j)",
    "lib.sinc(lib.tensor([1 + 1j, 0j, 2.5 - 0.5j]))",
    "lib.logaddexp(lib.tensor([1 + 2j, -1000 + 1j, 1000 - 3j]), lib.tensor([0.5, -1000 + 2j, 2]))",
    "lib.isreal(lib.tensor([[1 + 0j, 1j], [2, 3 + 0j]]).t())",
    "lib.logical_xor(lib.tensor([1j, 0j, 1]), lib.tensor([1, 1, 0], dtype=lib.uint8))",
    "lib.logical_not(lib.tensor([1j, 0j]))",
    "lib.addcmul(lib.tensor([1j]), lib.tensor([2]), lib.tensor([1 + 1j]), value=2)",
    "lib.addcdiv(lib.tensor([1j]), lib.tensor([2]), lib.tensor([1 + 1j]), value=0.5j)",
    "lib.lerp(lib.tensor([1j, 2]), lib.tensor([2 + 0j, 1j]), lib.tensor([0.5 + 1j, 0.25]))",
    "lib.diff(lib.tensor([1j, 2, 3 + 3j]))",
    "lib.ldexp(lib.tensor([1, 2], dtype=lib.int32), lib.tensor([1.0, 2.0], dtype=lib.float16))",
    "lib.ldexp(lib.tensor([1, 2.0], dtype=lib.bfloat16), lib.tensor([1, 2]))",
    "lib.nextafter(lib.tensor([1.0, 0.0, -0.0]).half(), lib.tensor([2.0, -1.0, 1.0]).half())",
    "lib.nextafter(lib.tensor([1.0, 0.0]), lib.tensor([2.0, -1.0], dtype=lib.float64))",
    "lib.add(lib.tensor([1, 2]), lib.tensor([1j]), alpha=0.5)",
    "lib.logcumsumexp(lib.zeros(0, 3), 0)",
    "lib.take_along_dim(lib.arange(6.0).reshape(2, 3), lib.tensor([[-1, 0, -3]]), 1)",
    "lib.add(0.5, lib.tensor([3, 200], dtype=lib.uint8), alpha=-1)",
    "lib.nan_to_num(lib.tensor([complex(float(\"nan\"), float(\"inf\")), -float(\"inf\") + 1j]))",
    "lib.addcmul(lib.tensor([0.1], dtype=lib.float64), lib.tensor([1 / 3 + 0.1j]),"
    " lib.tensor([0.3j]))",
]


def _np(x):
    import torch

    if isinstance(x, torch.Tensor):
        return str(x.dtype).split(".")[-1], x.to(torch.complex128 if x.is_complex() else
                                                  torch.float64).numpy()
    return str(x.dtype).split(".")[-1], x.to(fiamma.complex128 if x.is_complex() else
                                              fiamma.float64).numpy()


@pytest.mark.parity
@pytest.mark.parametrize("expr", PARITY)
def test_parity(expr):
    torch = pytest.importorskip("torch")
    tdt, t = _np(eval(expr, {"lib": torch}))
    fdt, f = _np(eval(expr, {"lib": fiamma}))
    assert fdt == tdt
    np.testing.assert_allclose(f, t, rtol=1e-6, atol=1e-7)


@pytest.mark.parity
@pytest.mark.parametrize("expr", [
    "lib.tensor([1.0]) - True", "True - lib.tensor([1.0])", "lib.tensor([1]).sub_(False)",
    "lib.add(lib.tensor([1.0]), 1, alpha=1j)", "lib.tensor([1j]).abs_()",
    "lib.lgamma(lib.tensor([1j]))", "lib.tensor([1j]).float_power_(2)",
])
def test_parity_errors(expr):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception):
        eval(expr, {"lib": torch})
    with pytest.raises((RuntimeError, TypeError)):
        eval(expr, {"lib": fiamma})



def test_scalar_plus_alpha_times_uint8_does_not_wrap():
    x = fiamma.tensor([3, 200], dtype=fiamma.uint8)
    assert fiamma.add(0.5, x, alpha=-1).tolist() == [-2.5, -199.5]
    assert fiamma.sub(0.5, x, alpha=2).tolist() == [-5.5, -399.5]


def test_nan_to_num_of_complex_replaces_each_part():
    big = float(np.finfo(np.float32).max)
    x = fiamma.tensor([complex(float("nan"), float("inf")), complex(-float("inf"), 1)])
    assert fiamma.nan_to_num(x).tolist() == [complex(0, big), complex(-big, 1)]
    assert x.nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0).tolist() == [1 + 2j, -3 + 1j]


def test_complex_ternary_computes_in_the_result_dtype():
    a = fiamma.tensor([0.1], dtype=fiamma.float64)
    b = fiamma.tensor([1 / 3 + 0.1j], dtype=fiamma.complex64)
    r = fiamma.addcmul(a, b, b)
    bb = complex(np.complex64(1 / 3 + 0.1j))
    assert r.dtype is fiamma.complex128 and r.item() == 0.1 + bb * bb


@pytest.mark.parametrize("call", [
    lambda o: fiamma.add(fiamma.tensor([1.0, 2.0, 3.0]), 1, out=o),
    lambda o: fiamma.sum(fiamma.ones(2, 3), 0, out=o),
    lambda o: fiamma.matmul(fiamma.ones(1, 3), fiamma.ones(3, 3), out=o),
    lambda o: fiamma.exp(fiamma.zeros(3), out=o),
])
def test_out_of_the_wrong_shape_is_resized_with_a_warning(call):
    out = fiamma.zeros(7)
    with pytest.warns(UserWarning, match="was resized since it had shape \\[7\\]"):
        r = call(out)
    assert r is out and out.numel() == 3 and out.is_contiguous()
    assert out.flatten().tolist() in ([2.0, 3.0, 4.0], [3.0, 3.0, 3.0], [1.0, 1.0, 1.0],
                                      [2.0, 2.0, 2.0])
    with pytest.raises(RuntimeError, match="can't be cast"):
        fiamma.add(fiamma.tensor([1.5]), 1, out=fiamma.zeros(1, dtype=fiamma.int64))


def test_complex_numbers_fill_bool_tensors_by_truth():
    assert fiamma.full((2,), 1j, dtype=fiamma.bool).tolist() == [True, True]
    assert fiamma.ones(2, dtype=fiamma.bool).fill_(0j).tolist() == [False, False]
    m = fiamma.tensor([True, False, True])
    assert fiamma.zeros(3, dtype=fiamma.bool).masked_fill(m, 2j).tolist() == [True, False, True]
    x = fiamma.zeros(2, 3, dtype=fiamma.bool)
    x[0] = 1j
    x[1, fiamma.tensor([0, 2])] = 0.5j
    assert x.tolist() == [[True, True, True], [True, False, True]]
    with pytest.raises(RuntimeError, match="cannot be converted"):
        fiamma.full((1,), 1j, dtype=fiamma.int32)


def test_where_promotes_a_bool_tensor_with_a_number():
    c = fiamma.tensor([True, False])
    r = fiamma.where(c, fiamma.tensor([True, True]), -1)
    assert r.dtype is fiamma.int64 and r.tolist() == [1, -1]
    r = fiamma.where(c, fiamma.tensor([True, True]), 0.5)
    assert r.dtype is fiamma.float32 and r.tolist() == [1.0, 0.5]
    r = fiamma.where(c, fiamma.tensor([1.5, 2.0]), 3)  # the fast path: no promotion needed
    assert r.dtype is fiamma.float32 and r.tolist() == [1.5, 3.0]
    r = fiamma.where(c, fiamma.tensor([1, 2], dtype=fiamma.uint8), 7)
    assert r.dtype is fiamma.uint8 and r.tolist() == [1, 7]


def test_gcd_of_bool_and_integer_promotes():
    r = fiamma.gcd(fiamma.tensor([True, False]), fiamma.tensor([2, 3], dtype=fiamma.int8))
    assert r.dtype is fiamma.int8 and r.tolist() == [1, 3]
    with pytest.raises(RuntimeError, match="gcd: expected integer"):
        fiamma.gcd(fiamma.tensor([True]), fiamma.tensor([True]))


def test_lerp_weight_dtype():
    a, e = fiamma.tensor([1.0, 2.0]), fiamma.tensor([3.0, 4.0])
    # a 0-d weight takes part in type promotion: a complex one makes the result complex
    r = fiamma.lerp(a, e, fiamma.tensor(0.5 + 1j))
    assert r.dtype is fiamma.complex64 and r.tolist() == [2 + 2j, 3 + 2j]
    w64 = fiamma.tensor(0.5, dtype=fiamma.float64)
    r = fiamma.lerp(fiamma.tensor(1.0), fiamma.tensor(3.0), w64)
    assert r.dtype is fiamma.float64 and r.item() == 2.0
    assert fiamma.lerp(a, e, fiamma.tensor(0.5, dtype=fiamma.float64)).dtype is fiamma.float32
    with pytest.raises(RuntimeError, match="expected dtype fiamma.float32 for `weight`"):
        fiamma.lerp(a, e, fiamma.tensor([0.5, 0.5], dtype=fiamma.float64))
    with pytest.raises(RuntimeError, match="cannot be converted"):
        fiamma.lerp(a, e, 0.5 + 1j)


def test_copy_into_an_expanded_view_raises():
    with pytest.raises(RuntimeError, match="copy_: unsupported operation: more than one element"):
        fiamma.zeros(1, 3).expand(2, 3).copy_(fiamma.ones(2, 3))
    x = fiamma.zeros(1, 3).expand(1, 3)  # size-1 dims may have any stride
    assert x.copy_(fiamma.ones(1, 3)).tolist() == [[1.0, 1.0, 1.0]]


def test_isin_of_bfloat16_and_of_a_tensor_requiring_grad():
    x = fiamma.tensor([1.0, 2.5, 3.0]).bfloat16()
    assert fiamma.isin(x, fiamma.tensor([2.5, 3.0]).bfloat16()).tolist() == [False, True, True]
    assert fiamma.isin(x, fiamma.tensor([3])).tolist() == [False, False, True]
    pytest.importorskip("fiamma.autograd")
    g = fiamma.tensor([1.0, 3.0], requires_grad=True)
    assert fiamma.isin(g, 3).tolist() == [False, True]


def test_complex_where_checks_its_out():
    c = fiamma.tensor([True, False])
    o = fiamma.zeros(5, dtype=fiamma.complex64)
    with pytest.warns(UserWarning, match="where: an output .* was resized"):
        fiamma.where(c, fiamma.tensor([1j, 2]), 3, out=o)
    assert o.tolist() == [1j, 3]
    with pytest.raises(RuntimeError, match="where: result type fiamma.complex64 can't be cast"):
        fiamma.where(c, fiamma.tensor([1j, 2]), 3, out=fiamma.zeros(2))


def test_exp2_of_complex_infinity():
    inf = float("inf")
    x = fiamma.tensor([complex(inf, 0), complex(-inf, 1), 1 + 2j], dtype=fiamma.complex128)
    r = fiamma.exp2(x).numpy()
    assert r[0] == complex(inf, 0) and r[1] == 0
    np.testing.assert_allclose(r[2], 2 ** (1 + 2j), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:fiamma.range is deprecated")
def test_range_with_an_integer_dtype_truncates_its_arguments():
    assert fiamma.range(2.5, 7, dtype=fiamma.int16).tolist() == [2, 3, 4, 5, 6, 7]
    assert fiamma.range(0.5, 3.7, 1.5, dtype=fiamma.int64).tolist() == [0, 1, 2, 3]
    assert fiamma.range(0.5, 3.5).tolist() == [0.5, 1.5, 2.5, 3.5]
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        fiamma.range(0, 3, 0.5, dtype=fiamma.int32)


def test_logspace_with_an_integer_dtype_truncates_start_and_end():
    # as linspace (and PyTorch): the exponents run between the truncated bounds
    assert fiamma.linspace(0.7, 2.9, 4, dtype=fiamma.int64).tolist() == [0, 0, 1, 2]
    assert fiamma.logspace(0.7, 2.9, 4, dtype=fiamma.int64).tolist() == [1, 4, 21, 100]
    assert fiamma.logspace(0.7, 2.9, 4, base=2, dtype=fiamma.int16).tolist() == [1, 1, 2, 4]
    assert fiamma.logspace(2.5, 0.5, 2, dtype=fiamma.int16).tolist() == [100, 1]
    np.testing.assert_allclose(fiamma.logspace(0.5, 1.5, 2).tolist(), [10 ** 0.5, 10 ** 1.5],
                               rtol=1e-6)


@pytest.mark.parametrize("op", ["tril_", "triu_"])
def test_tri_inplace_on_an_expanded_view_raises(op):
    with pytest.raises(RuntimeError, match=f"{op}: unsupported operation"):
        getattr(fiamma.arange(3.0).reshape(1, 3).expand(3, 3), op)()
    x = fiamma.arange(6.0).reshape(2, 3).t()  # strided, no overlap: fine
    getattr(x, op)()
    ref = np.tril if op == "tril_" else np.triu
    assert x.tolist() == ref(np.arange(6.0).reshape(2, 3).T).tolist()


def test_type_names_of_complex_tensors_and_to_none():
    assert _c().type() == "fiamma.ComplexFloatTensor"
    assert _c(dt=fiamma.complex128).type() == "fiamma.ComplexDoubleTensor"
    x = fiamma.tensor([1.0, 2.0])
    assert x.type("torch.ComplexDoubleTensor").dtype is fiamma.complex128
    assert x.type("fiamma.ComplexFloatTensor").tolist() == [1 + 0j, 2 + 0j]
    assert x.to(None) is x


def test_vander_of_complex_keeps_the_dtype():
    r = fiamma.vander(_c([1 + 1j, 2, 3]))
    assert r.dtype is fiamma.complex64
    np.testing.assert_allclose(r.numpy(), np.vander(np.array([1 + 1j, 2, 3])))
    assert fiamma.vander(_c([1 + 1j, 2]), 1).tolist() == [[1 + 0j], [1 + 0j]]


def test_histogram_of_a_tensor_requiring_grad():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor([0.0, 1.0, 1.5, 3.0], dtype=fiamma.float64, requires_grad=True)
    h, edges = fiamma.histogram(x, 3, weight=fiamma.ones(4, dtype=fiamma.float64,
                                                          requires_grad=True))
    ref = np.histogram([0.0, 1.0, 1.5, 3.0], 3)
    assert h.tolist() == ref[0].tolist() and edges.tolist() == ref[1].tolist()


def test_zero_dim_operands_of_the_numpy_backed_ops():
    # 0-d in, 0-d out (np.ascontiguousarray made them 1-d); a 0-d operand of the same
    # category does not promote
    assert fiamma.gcd(fiamma.tensor(4, dtype=fiamma.int8), fiamma.tensor(6)).shape == ()
    r = fiamma.lcm(fiamma.tensor([4, 6], dtype=fiamma.int16), fiamma.tensor(6))
    assert r.dtype is fiamma.int16 and r.tolist() == [12, 6]
    assert fiamma.isin(fiamma.tensor(2), fiamma.tensor([2, 3])).shape == ()


def test_clamp_with_a_number_and_a_0d_tensor_takes_both_as_numbers():
    # PyTorch's clamp(Tensor, Scalar, Scalar) overload: the 0-d tensor bound is a number there
    r = fiamma.clamp(fiamma.tensor(5, dtype=fiamma.int8), fiamma.tensor(-1, dtype=fiamma.int16), 2)
    assert r.dtype is fiamma.int8 and r.item() == 2
    u8 = fiamma.tensor([5], dtype=fiamma.uint8)
    r = fiamma.clamp(u8, fiamma.tensor(0.5, dtype=fiamma.float64), 1)
    assert r.dtype is fiamma.float32 and r.tolist() == [1.0]
    r = fiamma.clip(fiamma.tensor(1.5).half(), -0.5, fiamma.tensor(1.0))
    assert r.dtype is fiamma.float16 and r.item() == 1.0
    # two tensor bounds (0-d or not) promote as tensors
    lo = fiamma.tensor(0.5, dtype=fiamma.float64)
    r = fiamma.clamp(fiamma.tensor([5], dtype=fiamma.uint8), lo, fiamma.tensor(3))
    assert r.dtype is fiamma.float64 and r.tolist() == [3.0]
    assert fiamma.clamp(fiamma.tensor([5], dtype=fiamma.uint8), lo).dtype is fiamma.float64


def test_logcumsumexp_of_a_0d_tensor_and_complex_scatter_amax():
    assert fiamma.logcumsumexp(fiamma.tensor(1.5).half(), 0).item() == 1.5
    with pytest.raises(IndexError, match="Dimension out of range"):
        fiamma.logcumsumexp(fiamma.tensor(1.5), 1)
    x = fiamma.zeros(3, dtype=fiamma.complex64)
    with pytest.raises(TypeError, match="not implemented for dtype fiamma.complex64"):
        x.scatter_reduce_(0, fiamma.tensor([], dtype=fiamma.int64), fiamma.ones(0, dtype=x.dtype),
                          "amax", include_self=False)


def test_index_add_alpha_checks():
    x = fiamma.zeros(2, 3, dtype=fiamma.int64)
    with pytest.raises(RuntimeError, match="index_add_: For integral input tensors, argument "
                                           "alpha must not be a floating point"):
        x.index_add_(0, fiamma.tensor([1]), fiamma.tensor([[3, 4, 5]]), alpha=0.5)
    assert x.tolist() == [[0, 0, 0], [0, 0, 0]]  # PyTorch truncates alpha to 0 silently
    with pytest.raises(RuntimeError, match="alpha 1j cannot be converted"):
        fiamma.zeros(3).index_add_(0, fiamma.tensor([1]), fiamma.tensor([3.0]), alpha=1j)
    r = fiamma.zeros(3).index_add(0, fiamma.tensor([1]), fiamma.tensor([3.0]), alpha=0.5)
    assert r.tolist() == [0.0, 1.5, 0.0]
