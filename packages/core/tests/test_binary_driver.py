"""The binary-op driver: each entry (operator, reflected, function, in place) takes its one fast
test's case in one C call and gives what the general path gives for the same operands."""

import numpy as np
import pytest

import fiamma
from fiamma._ops import elementwise as E

OPS = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
       ("div", lambda a, b: a / b), ("floor_divide", lambda a, b: a // b),
       ("remainder", lambda a, b: a % b), ("pow", lambda a, b: a ** b),
       ("eq", lambda a, b: a == b), ("lt", lambda a, b: a < b), ("ge", lambda a, b: a >= b)]


def _strided(t):
    """``t`` as a non-contiguous view (never the fast test's case); numbers unchanged."""
    if not isinstance(t, fiamma.Tensor):
        return t
    v = fiamma.stack([t, t], -1)[..., 0]
    assert not v._cpu_contig
    return v


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("name,op", OPS)
def test_fast_entries_agree_with_the_general_path(name, op, dtype):
    rng = np.random.default_rng(0)
    a = fiamma.from_numpy(rng.integers(1, 5, (3, 5)).astype(dtype))
    b = fiamma.from_numpy(rng.integers(1, 5, (3, 5)).astype(dtype))
    for x, y in [(a, b), (a, 2), (a, 2.5), (3, b), (2.0, b)]:
        want = getattr(fiamma, name)(_strided(x), _strided(y))
        got = op(x, y)  # the operator, or the reflected one for a number x
        assert got.dtype == want.dtype, (name, x, y)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        got_fn = getattr(fiamma, name)(x, y)
        assert got_fn.dtype == want.dtype
        np.testing.assert_array_equal(got_fn.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floor_divide", "remainder"])
def test_inplace_entries_agree_with_the_general_path(name):
    a = fiamma.tensor([[1.5, -2.0, 3.0], [4.0, 5.0, -6.5]])
    b = fiamma.tensor([[2.0, 3.0, -1.0], [0.5, 2.0, 4.0]])
    want = getattr(fiamma, name)(a, b)
    for other in (b, 2.0):
        want = getattr(fiamma, name)(a, other)
        x = a.clone()
        v = x._version
        getattr(x, name + "_")(other)
        np.testing.assert_array_equal(x.numpy(), want.numpy())
        assert x._version == v + 1
        x = a.clone()
        op = {"add": "__iadd__", "sub": "__isub__", "mul": "__imul__", "div": "__itruediv__",
              "floor_divide": "__ifloordiv__", "remainder": "__imod__"}[name]
        assert getattr(x, op)(other) is x
        np.testing.assert_array_equal(x.numpy(), want.numpy())


def test_integer_true_division_and_bool_results_leave_the_fast_case():
    i = fiamma.tensor([1, 2, 3])
    assert (i / i).dtype == fiamma.get_default_dtype()
    assert fiamma.div(i, i).tolist() == [1.0, 1.0, 1.0]
    assert (i == i).dtype == fiamma.bool
    x = i.clone()
    with pytest.raises(RuntimeError):
        x /= i  # a float result cannot be written into an int tensor


def test_operators_return_notimplemented_for_foreign_operands():
    x = fiamma.tensor([1.0, 2.0])
    assert x.__add__(object()) is NotImplemented
    assert x.__radd__(object()) is NotImplemented
    assert x.__iadd__(object()) is NotImplemented
    assert (x == None) is False  # noqa: E711  (identity comparison after NotImplemented)
    with pytest.raises(TypeError):
        x + object()
    # the function entry converts what the operator declines
    assert fiamma.add(x, [1.0, 1.0]).tolist() == [2.0, 3.0]


def test_fast_case_records_for_autograd_and_errors_name_the_op():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor([1.0, 2.0], requires_grad=True)
    y = fiamma.tensor([3.0, 4.0])
    (x * y).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]
    b = fiamma.tensor([True, False])
    with pytest.raises(RuntimeError, match="sub"):
        b - b
    z = fiamma.tensor([1, 2])
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        z // fiamma.tensor([0, 1])


def test_general_path_never_calls_an_operator():
    # the driver's structure: the general path is plain code (no lookup of operator methods)
    import inspect

    src = inspect.getsource(E.binary)
    assert "__add__" not in src and "_OPERATOR" not in src
