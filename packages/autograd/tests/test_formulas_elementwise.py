"""First and second derivatives of the elementwise ops against finite differences (float64), on
broadcast, non-contiguous, 0-d and empty operands; PyTorch's conventions at the special points
(ties, zeros, clamp bounds); float32 gradients against float64."""

import math
import zlib

import numpy as np
import pytest
from _formula_check import check, leaf, noncontig, rand

import fiamma
from fiamma.autograd import gradcheck

# name -> (function, low, high): inputs drawn uniformly from [low, high] (None: normal)
UNARY = {
    "exp": (fiamma.exp, None, None),
    "exp2": (fiamma.exp2, None, None),
    "expm1": (fiamma.expm1, None, None),
    "log": (fiamma.log, 0.5, 2.0),
    "log2": (fiamma.log2, 0.5, 2.0),
    "log10": (fiamma.log10, 0.5, 2.0),
    "log1p": (fiamma.log1p, -0.5, 2.0),
    "sqrt": (fiamma.sqrt, 0.5, 2.0),
    "rsqrt": (fiamma.rsqrt, 0.5, 2.0),
    "reciprocal": (fiamma.reciprocal, 0.5, 2.0),
    "sin": (fiamma.sin, None, None),
    "cos": (fiamma.cos, None, None),
    "tan": (fiamma.tan, -1.0, 1.0),
    "asin": (fiamma.asin, -0.9, 0.9),
    "acos": (fiamma.acos, -0.9, 0.9),
    "atan": (fiamma.atan, None, None),
    "sinh": (fiamma.sinh, None, None),
    "cosh": (fiamma.cosh, None, None),
    "tanh": (fiamma.tanh, None, None),
    "asinh": (fiamma.asinh, None, None),
    "acosh": (fiamma.acosh, 1.5, 3.0),
    "atanh": (fiamma.atanh, -0.9, 0.9),
    "sigmoid": (fiamma.sigmoid, None, None),
    "erf": (fiamma.erf, None, None),
    "erfc": (fiamma.erfc, None, None),
    "neg": (fiamma.neg, None, None),
    "abs": (fiamma.abs, None, None),
    "square": (fiamma.square, None, None),
    "frac": (fiamma.frac, 0.1, 0.9),
    "relu": (fiamma.relu, None, None),
    "nan_to_num": (fiamma.nan_to_num, None, None),
    "sign": (fiamma.sign, None, None),
    "floor": (fiamma.floor, 0.1, 0.9),
    "ceil": (fiamma.ceil, 0.1, 0.9),
    "trunc": (fiamma.trunc, 0.1, 0.9),
    "round": (fiamma.round, 0.1, 0.4),
    "round_decimals": (lambda x: fiamma.round(x, decimals=1), 0.11, 0.14),
    "pow_scalar_2": (lambda x: x ** 2, None, None),
    "pow_scalar_half": (lambda x: x ** 0.5, 0.5, 2.0),
    "pow_scalar_m1": (lambda x: x ** -1, 0.5, 2.0),
    "pow_scalar_3": (lambda x: fiamma.pow(x, 3), None, None),
    "pow_scalar_frac": (lambda x: x ** 1.7, 0.5, 2.0),
    "rpow": (lambda x: 2.5 ** x, None, None),
    "float_power": (lambda x: fiamma.float_power(x, 2.5), 0.5, 2.0),
}


def _log_sigmoid():
    # the private op fiamma.nn's logsigmoid calls; recorded as "log_sigmoid"
    from fiamma._ops._unary import _log_sigmoid
    return _log_sigmoid


UNARY["log_sigmoid"] = (lambda x: _log_sigmoid()(x), None, None)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, lo, hi = UNARY[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) % 1000)
    check(fn, rand(2, 3, rng=rng, low=lo, high=hi))
    check(fn, noncontig(3, 2, rng=rng, low=lo, high=hi))
    check(fn, rand(rng=rng, low=lo, high=hi))          # 0-d
    check(fn, rand(0, 3, rng=rng, low=lo, high=hi))    # empty


SHAPES = [((2, 3), (3,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((3,), ()), ((0, 2), (2,)),
          ((2, 3), (2, 3))]

BINARY = {
    "add": (fiamma.add, None),
    "add_alpha": (lambda a, b: fiamma.add(a, b, alpha=2.5), None),
    "sub": (fiamma.sub, None),
    "sub_alpha": (lambda a, b: fiamma.sub(a, b, alpha=-3), None),
    "rsub": (lambda a, b: fiamma.rsub(a, b, alpha=2), None),
    "mul": (fiamma.mul, None),
    "div": (fiamma.div, "pos_b"),
    "true_divide": (fiamma.true_divide, "pos_b"),
    "div_floor": (lambda a, b: fiamma.div(a, b, rounding_mode="floor"), "pos_b"),
    "div_trunc": (lambda a, b: fiamma.div(a, b, rounding_mode="trunc"), "pos_b"),
    "floor_divide": (fiamma.floor_divide, "pos_b"),
    "remainder": (fiamma.remainder, "pos_b"),
    "fmod": (fiamma.fmod, "pos_b"),
    "pow": (fiamma.pow, "pos_a"),
    "float_power": (fiamma.float_power, "pos_a"),
    "atan2": (fiamma.atan2, None),
    "hypot": (fiamma.hypot, None),
    "copysign": (fiamma.copysign, None),
    "maximum": (fiamma.maximum, None),
    "minimum": (fiamma.minimum, None),
    "fmax": (fiamma.fmax, None),
    "fmin": (fiamma.fmin, None),
    "clamp_tensors": (lambda a, b: fiamma.clamp(a, min=b), None),
    "max_tensor": (lambda a, b: fiamma.max(a, b), None),
}


def _operands(kind, sa, sb, rng):
    a = rand(*sa, rng=rng, low=0.5 if kind == "pos_a" else None,
             high=2.0 if kind == "pos_a" else None)
    b = rand(*sb, rng=rng, low=0.5 if kind == "pos_b" else None,
             high=2.0 if kind == "pos_b" else None)
    return a, b


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    fn, kind = BINARY[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) % 1000)
    for sa, sb in SHAPES:
        a, b = _operands(kind, sa, sb, rng)
        check(fn, a, b)
    # non-contiguous operands
    lo, hi = (0.5, 2.0) if kind else (None, None)
    check(fn, noncontig(3, 4, rng=rng, low=lo, high=hi), noncontig(3, 4, rng=rng, low=lo,
                                                                       high=hi))


SCALAR_FORMS = {
    "t+s": lambda a: a + 2.5, "s+t": lambda a: 2.5 + a, "t-s": lambda a: a - 1,
    "s-t": lambda a: 3 - a, "t*s": lambda a: a * -1.5, "t/s": lambda a: a / 4,
    "s/t": lambda a: 2 / a, "t%s": lambda a: a % 0.7, "s%t": lambda a: 3.3 % a,
    "t**s": lambda a: a ** 2.2, "s**t": lambda a: 1.7 ** a, "t//s": lambda a: a // 0.3,
    "atan2_s": lambda a: fiamma.atan2(a, fiamma.tensor(0.5, dtype=fiamma.float64)),
    "fmod_s": lambda a: fiamma.fmod(a, 0.6), "copysign_s": lambda a: fiamma.copysign(a, -1.0),
}


@pytest.mark.parametrize("name", sorted(SCALAR_FORMS))
def test_with_python_scalar(name):
    check(SCALAR_FORMS[name], rand(2, 3, seed=3, low=0.55, high=2.0))


def test_binary_both_from_one_tensor():
    # the same tensor on both sides: the gradients add up
    check(lambda a: a * a + a / (a + 3), rand(3, 2, seed=4, low=0.5, high=2.0))


# ---- special points ----------------------------------------------------------------------------

def _grad(f, *xs):
    out = f(*xs)
    return fiamma.autograd.grad(out.sum(), xs, allow_unused=True)


def test_abs_relu_at_zero_have_zero_gradient():
    x = fiamma.tensor([-1.0, 0.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = _grad(fiamma.abs, x)
    assert g.tolist() == [-1.0, 0.0, 1.0]
    (g,) = _grad(fiamma.relu, x)
    assert g.tolist() == [0.0, 0.0, 1.0]


def test_pow_zero_base_and_zero_exponent():
    base = fiamma.tensor([0.0, 0.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    exp = fiamma.tensor([2.0, 0.0, 0.0], dtype=fiamma.float64, requires_grad=True)
    gb, ge = _grad(fiamma.pow, base, exp)
    assert gb.tolist() == [0.0, 0.0, 0.0]
    assert ge.tolist() == [0.0, 0.0, math.log(2.0)]  # no NaN from 0 * log(0)
    (g,) = _grad(lambda b: b ** 0, base)
    assert g.tolist() == [0.0, 0.0, 0.0]
    e = fiamma.tensor([1.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = _grad(lambda t: 0.0 ** t, e)
    assert g.tolist() == [0.0, 0.0]
    # second order through a zero base stays finite
    b = fiamma.tensor([0.0, 1.5], dtype=fiamma.float64, requires_grad=True)
    (g,) = fiamma.autograd.grad((b ** 3).sum(), b, create_graph=True)
    (gg,) = fiamma.autograd.grad(g.sum(), b)
    assert gg.tolist() == [0.0, 9.0]


def test_maximum_minimum_ties_split_evenly():
    a = fiamma.tensor([1.0, 2.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    b = fiamma.tensor([1.0, 5.0, 0.0], dtype=fiamma.float64, requires_grad=True)
    ga, gb = _grad(fiamma.maximum, a, b)
    assert ga.tolist() == [0.5, 0.0, 1.0] and gb.tolist() == [0.5, 1.0, 0.0]
    ga, gb = _grad(fiamma.minimum, a, b)
    assert ga.tolist() == [0.5, 1.0, 0.0] and gb.tolist() == [0.5, 0.0, 1.0]


def test_fmax_ignores_nan():
    a = fiamma.tensor([float("nan"), 2.0, 1.0], dtype=fiamma.float64, requires_grad=True)
    b = fiamma.tensor([1.0, float("nan"), 3.0], dtype=fiamma.float64, requires_grad=True)
    ga, gb = _grad(fiamma.fmax, a, b)
    assert ga.tolist() == [0.0, 1.0, 0.0] and gb.tolist() == [1.0, 0.0, 1.0]


def test_clamp_bounds():
    x = fiamma.tensor([-2.0, 0.0, 0.5, 1.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = _grad(lambda t: fiamma.clamp(t, 0.0, 1.0), x)
    assert g.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]  # the bounds themselves pass the gradient
    (g,) = _grad(lambda t: fiamma.clamp(t, min=0.0), x)
    assert g.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0]
    (g,) = _grad(lambda t: fiamma.clamp(t, max=0.5), x)
    assert g.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    lo = fiamma.tensor([0.0, 0.0, 2.0, 0.0, 0.0], dtype=fiamma.float64, requires_grad=True)
    hi = fiamma.tensor([1.0, 1.0, 1.0, 2.0, 2.0], dtype=fiamma.float64, requires_grad=True)
    gx, glo, ghi = _grad(fiamma.clamp, x, lo, hi)
    # min > max at index 2: the result is max
    assert gx.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert glo.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert ghi.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0]


def test_clamp_equal_tensor_bounds():
    # lo == hi: x above gives the gradient to hi, x on it to x, x below to none of them
    # (PyTorch's rules: lo's gradient needs lo < hi)
    x = fiamma.tensor([1.0, 2.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    lo = fiamma.full((3,), 2.0, dtype=fiamma.float64, requires_grad=True)
    hi = fiamma.full((3,), 2.0, dtype=fiamma.float64, requires_grad=True)
    gx, glo, ghi = _grad(fiamma.clamp, x, lo, hi)
    assert gx.tolist() == [0.0, 1.0, 0.0]
    assert glo.tolist() == [0.0, 0.0, 0.0]
    assert ghi.tolist() == [0.0, 0.0, 1.0]


def test_nan_to_num_blocks_non_finite():
    x = fiamma.tensor([float("nan"), float("inf"), 1.0, -float("inf")], dtype=fiamma.float64,
                      requires_grad=True)
    (g,) = _grad(fiamma.nan_to_num, x)
    assert g.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_copysign_at_zero():
    x = fiamma.tensor([0.0, -2.0, 3.0], dtype=fiamma.float64, requires_grad=True)
    (g,) = _grad(lambda t: fiamma.copysign(t, -1.0), x)
    assert g.tolist() == [0.0, 1.0, -1.0]


# ---- ternary ---------------------------------------------------------------------------------

def test_clamp_random():
    rng = np.random.default_rng(7)
    x = rand(3, 4, rng=rng)
    check(lambda t: fiamma.clamp(t, -0.5, 0.5), x)
    check(lambda t: fiamma.clamp(t, min=-0.3), noncontig(3, 4, rng=rng))
    check(lambda t: fiamma.clip(t, max=0.2), rand(rng=rng))
    lo = rand(4, rng=rng, low=-1.0, high=-0.1)
    hi = rand(3, 1, rng=rng, low=0.1, high=1.0)
    check(fiamma.clamp, x, lo, hi)
    # some min > max entries
    check(fiamma.clamp, rand(2, 3, rng=rng), rand(2, 3, rng=rng), rand(3, rng=rng))


def test_where():
    rng = np.random.default_rng(8)
    cond = fiamma.tensor(rng.standard_normal((3, 1)) > 0)
    check(lambda a, b: fiamma.where(cond, a, b), rand(3, 4, rng=rng), rand(4, rng=rng))
    check(lambda a: fiamma.where(cond, a, 0.0), noncontig(3, 4, rng=rng))
    check(lambda b: fiamma.where(cond, 2.0, b), rand(1, 4, rng=rng))
    check(lambda a, b: a.where(a > 0, b), rand(3, 4, rng=rng), rand(3, 4, rng=rng))
    check(lambda a, b: fiamma.where(fiamma.tensor(True), a, b), rand(rng=rng), rand(rng=rng))


def test_lerp():
    rng = np.random.default_rng(9)
    check(lambda a, b: fiamma.lerp(a, b, 0.3), rand(3, 4, rng=rng), rand(3, 4, rng=rng))
    check(fiamma.lerp, rand(3, 4, rng=rng), rand(4, rng=rng), rand(3, 1, rng=rng))
    check(fiamma.lerp, noncontig(2, 3, rng=rng), rand(2, 3, rng=rng), rand(rng=rng))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(op):
    fn = getattr(fiamma, op)
    rng = np.random.default_rng(10)
    check(lambda a, b, c: fn(a, b, c, value=-0.7), rand(3, 4, rng=rng), rand(4, rng=rng),
          rand(3, 1, rng=rng, low=0.5, high=2.0))
    check(fn, noncontig(2, 3, rng=rng), rand(2, 3, rng=rng), rand(2, 3, rng=rng, low=0.5,
                                                                      high=2.0))


# ---- in-place forms go through the same formulas -------------------------------------------

def test_inplace_ops():
    rng = np.random.default_rng(11)

    def f(a, b):
        y = a * 1.0
        y.add_(b, alpha=2)
        y.mul_(b)
        y += 1.5
        y.clamp_(0.2, 2.8)
        y /= b + 3
        y.sigmoid_()  # last: it saves its result, y itself, as PyTorch's
        return y

    check(f, rand(3, 4, rng=rng), rand(4, rng=rng, low=0.5, high=2.0))


@pytest.mark.parametrize("name", ["relu_", "sigmoid_", "tanh_", "exp_"])
def test_inplace_op_saves_self_not_a_copy(name):
    """An in-place op whose formula saves its output keeps ``self`` (no second activation-sized
    tensor until backward, as PyTorch); writing into self afterwards is then an error at
    backward, as in PyTorch."""
    x = fiamma.tensor(np.linspace(-2, 2, 9), requires_grad=True)
    h = x * 1.5
    y = getattr(h, name)()
    assert y is h and h.grad_fn._out._storage is h._storage
    want = getattr(fiamma, name[:-1])(x.detach() * 1.5)
    (y * fiamma.arange(9.0)).sum().backward()
    d = {"relu_": (want > 0).double(), "sigmoid_": want * (1 - want),
         "tanh_": 1 - want * want, "exp_": want}[name]
    np.testing.assert_allclose(x.grad.numpy(), (1.5 * d * fiamma.arange(9.0)).numpy(),
                               rtol=1e-12)
    h2 = x * 1.5
    getattr(h2, name)()
    h2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h2.sum().backward()


# ---- float32 gradients agree with float64 -------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda a, b: (a * b).sin() / (b * b + 1),
    lambda a, b: fiamma.atan2(a, b) + fiamma.hypot(a, b),
    lambda a, b: fiamma.maximum(a, b).exp() * a.tanh(),
])
def test_float32_matches_float64(fn):
    rng = np.random.default_rng(12)
    a64, b64 = rand(3, 4, rng=rng), rand(4, rng=rng)
    a32 = a64.detach().to(fiamma.float32).requires_grad_()
    b32 = b64.detach().to(fiamma.float32).requires_grad_()
    g64 = fiamma.autograd.grad(fn(a64, b64).sum(), (a64, b64))
    g32 = fiamma.autograd.grad(fn(a32, b32).sum(), (a32, b32))
    for x, y in zip(g32, g64):
        assert x.dtype is fiamma.float32
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-4, atol=1e-5)


def test_engine_gradcheck_agrees():
    """The engine's full-Jacobian gradcheck on a few ops (it rebuilds every Jacobian column)."""
    rng = np.random.default_rng(13)
    a = rand(2, 3, rng=rng, low=0.5, high=2.0)
    b = rand(3, rng=rng, low=0.5, high=2.0)
    assert gradcheck(lambda x, y: x.pow(y) * x.log(), (a, b))
    assert gradcheck(lambda x: fiamma.where(x > 1, x.sqrt(), x.square()), (leaf(a.t()),))


def test_checker_catches_wrong_gradients():
    """The finite-difference checker fails on a deliberately wrong backward."""

    class Wrong(fiamma.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x * 3  # should be 2

    with pytest.raises(AssertionError, match="gradient mismatch"):
        check(Wrong.apply, rand(3, seed=0))
