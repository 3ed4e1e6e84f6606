"""fiamma.autograd.forward_ad: dual tensors, custom Function jvp, gradcheck(check_forward_ad)."""

import sys

import numpy as np
import pytest

import fiamma
import fiamma.autograd.forward_ad as fwAD
from fiamma.autograd import Function, gradcheck

D = fiamma.float64


def _fd_jvp(f, primals, tangents, eps=1e-6):
    """Central finite difference of f along tangents (float64)."""
    hi = f(*[p + eps * t for p, t in zip(primals, tangents)])
    lo = f(*[p - eps * t for p, t in zip(primals, tangents)])
    return (hi - lo) / (2 * eps)


def _jvp(f, primals, tangents):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        out = f(*duals)
        return fwAD.unpack_dual(out)


def _mlp(x, w1, b1, w2, b2):
    return (fiamma.tanh(x @ w1 + b1) @ w2 + b2).relu()


def _cases():
    g = fiamma.Generator().manual_seed(0)

    def r(*s):
        return fiamma.randn(*s, generator=g, dtype=D)

    return {
        "elementwise": (lambda x, y: x.sin() * y.exp() + x / (1 + y * y), [r(3, 4), r(3, 4)]),
        "broadcast": (lambda x, y: x * y - y.sigmoid(), [r(3, 4), r(4)]),
        "matmul": (lambda a, b: a @ b, [r(3, 5), r(5, 2)]),
        "sum_mean": (lambda x: x.sum(0) * x.mean(1).sum() + (x ** 2).amax(), [r(4, 3)]),
        "softmax": (lambda x: fiamma.softmax(x, -1).log(), [r(2, 5)]),
        "mlp": (_mlp, [r(6, 4), r(4, 8), r(8), r(8, 3), r(3)]),
        "norm_div": (lambda x: x / x.norm(), [r(5)]),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_jvp_matches_finite_differences(name):
    f, primals = _cases()[name]
    g = fiamma.Generator().manual_seed(1)
    tangents = [fiamma.randn(*p.shape, generator=g, dtype=D) for p in primals]
    res = _jvp(f, primals, tangents)
    expected = _fd_jvp(f, primals, tangents)
    assert res.tangent is not None and res.tangent.shape == expected.shape
    np.testing.assert_allclose(res.tangent.numpy(), expected.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(res.primal.detach().numpy(), f(*primals).numpy())


def test_partial_tangents_and_plain_inputs():
    x, y = fiamma.randn(3, dtype=D), fiamma.randn(3, dtype=D)
    t = fiamma.randn(3, dtype=D)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        out = d ** 2 + y ** 2      # y has no tangent: counts as zero
        np.testing.assert_allclose(fwAD.unpack_dual(out).tangent.numpy(), (2 * x * t).numpy())
        plain = y * 3
        assert fwAD.unpack_dual(plain).tangent is None
        assert fwAD.unpack_dual(y).tangent is None


def test_make_dual_identity_and_copy():
    p = fiamma.randn(4, 3)
    t = fiamma.randn(4, 3)
    with fwAD.dual_level():
        d = fwAD.make_dual(p, t)
        assert fwAD.unpack_dual(d).tangent is t
        # a tangent laid out differently is copied into the primal's layout
        tt = fiamma.randn(3, 4).T
        d2 = fwAD.make_dual(p, tt)
        t2 = fwAD.unpack_dual(d2).tangent
        assert t2 is not tt
        assert t2.stride() == p.stride()
        assert fiamma.equal(t2, tt)
        # a view of a bigger tensor has another storage layout: copied too
        big = fiamma.randn(20)
        tv = big[:12].view(4, 3)
        assert fwAD.unpack_dual(fwAD.make_dual(p, tv)).tangent is not tv
        # the dual is a view of the primal holding its values
        assert fiamma.equal(d.detach(), p)
        assert fiamma.equal(fwAD.unpack_dual(d).primal.detach(), p)
        # a tangent of another float dtype is kept as given (as in PyTorch)
        pd = fiamma.randn(3, dtype=D)
        tf = fiamma.randn(3)
        assert fwAD.unpack_dual(fwAD.make_dual(pd, tf)).tangent is tf


def test_tangent_none_after_exit():
    p, t = fiamma.randn(3), fiamma.randn(3)
    with fwAD.dual_level():
        d = fwAD.make_dual(p, t)
        out = d * 2
        assert fwAD.unpack_dual(out).tangent is not None
    assert fwAD.unpack_dual(out).tangent is None
    assert fwAD.unpack_dual(d).tangent is None
    assert fwAD.unpack_dual(out).primal is out
    # a new level does not see the old tangents
    with fwAD.dual_level():
        assert fwAD.unpack_dual(out).tangent is None
        assert fwAD.unpack_dual(out * 3).tangent is None


def test_levels():
    assert fwAD.enter_dual_level() == 0
    with pytest.raises(RuntimeError, match="Nested forward mode AD"):
        fwAD.enter_dual_level()
    with pytest.raises(RuntimeError, match="not the last one"):
        fwAD.exit_dual_level(level=3)
    fwAD.exit_dual_level()
    with pytest.raises(RuntimeError, match="no forward AD level"):
        fwAD.exit_dual_level()
    with fwAD.dual_level() as lvl:
        assert lvl == 0
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            with fwAD.dual_level():
                pass
    # the level was exited despite the error inside
    with fwAD.dual_level():
        pass

    @fwAD.dual_level()
    def f(x):
        return fwAD.unpack_dual(fwAD.make_dual(x, fiamma.ones(2)) * 5).tangent

    assert f(fiamma.zeros(2)).tolist() == [5.0, 5.0]


def test_errors():
    p = fiamma.randn(3, 4)
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(p, fiamma.randn(3, 4))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"different size.*\[3, 4\].*\[4, 3\]"):
            fwAD.make_dual(p, fiamma.randn(4, 3))
        with pytest.raises(ValueError, match="primal to be floating point"):
            fwAD.make_dual(fiamma.ones(3, dtype=fiamma.int64), fiamma.ones(3))
        with pytest.raises(ValueError, match="tangent to be floating point"):
            fwAD.make_dual(fiamma.ones(3), fiamma.ones(3, dtype=fiamma.int64))
        d = fwAD.make_dual(p, fiamma.randn(3, 4))
        with pytest.raises(RuntimeError, match="already has a forward gradient"):
            fwAD.make_dual(d, fiamma.randn(3, 4))
        with pytest.raises(RuntimeError, match="already has a forward gradient"):
            fwAD.make_dual(d * 2, fiamma.randn(3, 4))
        # the primal of a dual has no tangent: it can be made a dual again
        again = fwAD.make_dual(fwAD.unpack_dual(d).primal, fiamma.ones(3, 4))
        assert fwAD.unpack_dual(again * 2).tangent.tolist() == [[2.0] * 4] * 3
        with pytest.raises(RuntimeError, match="invalid level"):
            fwAD.unpack_dual(d, level=1)


def test_reverse_mode_through_duals():
    # a dual of a primal that requires grad: backward reaches the primal, tangents are
    # differentiable (forward-over-reverse)
    x = fiamma.randn(4, dtype=D, requires_grad=True)
    t = fiamma.randn(4, dtype=D)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        y = (d ** 3).sum()
        tan = fwAD.unpack_dual(y).tangent
        np.testing.assert_allclose(tan.item(), (3 * x.detach() ** 2 * t).sum().item())
        (gx,) = fiamma.autograd.grad(y, x, retain_graph=True)
        np.testing.assert_allclose(gx.numpy(), (3 * x.detach() ** 2).numpy())
        # d/dx of the jvp: a Hessian-vector product, 6 x t
        (hvp,) = fiamma.autograd.grad(tan, x)
        np.testing.assert_allclose(hvp.numpy(), (6 * x.detach() * t).numpy())


def test_no_grad_primal_tangent_is_plain():
    with fwAD.dual_level():
        d = fwAD.make_dual(fiamma.randn(3), fiamma.randn(3))
        tan = fwAD.unpack_dual(d.exp()).tangent
        assert not tan.requires_grad and tan.grad_fn is None


class _Exp(Function):
    """exp with jvp only (no backward), saving its result on ctx as PyTorch's tutorial does."""

    @staticmethod
    def forward(ctx, x):
        r = fiamma.exp(x)
        ctx.result = r
        return r

    @staticmethod
    def jvp(ctx, g):
        out = g * ctx.result
        del ctx.result
        return out


class _MulAdd(Function):
    """(x * y * k, x + y) with backward and jvp; jvp reads ctx.saved_tensors (save_for_forward)."""

    seen = []

    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_forward(x, y)
        ctx.save_for_backward(x, y)
        ctx.k = k
        return x * y * k, x + y

    @staticmethod
    def jvp(ctx, gx, gy, gk):
        _MulAdd.seen.append((gx, gy, gk))
        x, y = ctx.saved_tensors
        return (gx * y + x * gy) * ctx.k, gx + gy

    @staticmethod
    def backward(ctx, g1, g2):
        x, y = ctx.saved_tensors
        return g1 * y * ctx.k + g2, g1 * x * ctx.k + g2, None


class _NoJvp(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_custom_function_jvp_without_backward():
    x = fiamma.randn(5, dtype=D, requires_grad=True)
    t = fiamma.randn(5, dtype=D)
    with fwAD.dual_level():
        out = _Exp.apply(fwAD.make_dual(x, t))
        tan = fwAD.unpack_dual(out).tangent
        np.testing.assert_allclose(tan.detach().numpy(), (t * x.detach().exp()).numpy())
        # downstream ops compose with the jvp's tangent (not through the missing backward)
        z = (out * 3).sin()
        expected = (3 * out.detach()).cos() * 3 * t * x.detach().exp()
        np.testing.assert_allclose(fwAD.unpack_dual(z).tangent.detach().numpy(),
                                   expected.numpy(), rtol=1e-12)
        # reverse mode through it still fails as in PyTorch (no backward)
        with pytest.raises(NotImplementedError, match="backward"):
            out.sum().backward()


def test_custom_function_jvp_with_backward_and_saved_for_forward():
    _MulAdd.seen.clear()
    x = fiamma.randn(3, dtype=D, requires_grad=True)
    y = fiamma.randn(3, dtype=D)
    t = fiamma.randn(3, dtype=D)
    with fwAD.dual_level():
        a, b = _MulAdd.apply(fwAD.make_dual(x, t), y, 2.0)
        gx, gy, gk = _MulAdd.seen[-1]
        assert gx is t                       # the input's tangent as given
        assert fiamma.equal(gy, fiamma.zeros(3, dtype=D))   # no tangent: zeros
        assert gk is None                    # a non-tensor input
        np.testing.assert_allclose(fwAD.unpack_dual(a).tangent.detach().numpy(),
                                   (2 * t * y).numpy())
        np.testing.assert_allclose(fwAD.unpack_dual(b).tangent.detach().numpy(), t.numpy())
        (a.sum() + b.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), (2 * y + 1).numpy())
    # plain inputs: jvp is not called, no tangent
    _MulAdd.seen.clear()
    with fwAD.dual_level():
        a, _ = _MulAdd.apply(x, y, 2.0)
        assert fwAD.unpack_dual(a).tangent is None and not _MulAdd.seen


def test_custom_function_materialize_false_and_errors():
    class NoMat(Function):
        got = None

        @staticmethod
        def forward(ctx, x, y):
            ctx.set_materialize_grads(False)
            return x * y

        @staticmethod
        def jvp(ctx, gx, gy):
            NoMat.got = (gx, gy)
            return gx

    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def jvp(ctx, g):
            return g.sum()

    x, y = fiamma.ones(2), fiamma.ones(2)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, fiamma.ones(2))
        NoMat.apply(d, y)
        assert NoMat.got[1] is None
        with pytest.raises(NotImplementedError, match="must implement the jvp"):
            _NoJvp.apply(d)
        with pytest.raises(RuntimeError, match="different size"):
            Bad.apply(d)
    # without tangents a Function without jvp runs as always
    with fwAD.dual_level():
        assert _NoJvp.apply(x).tolist() == [2.0, 2.0]


def test_gradcheck_forward_ad():
    x = fiamma.randn(4, 3, dtype=D, requires_grad=True)
    assert gradcheck(_Exp.apply, (x,), check_forward_ad=True, check_backward_ad=False,
                     check_undefined_grad=False, check_batched_grad=False)
    assert gradcheck(lambda a, b: (a * b).sin(), (x, fiamma.randn(3, dtype=D,
                                                                  requires_grad=True)),
                     check_forward_ad=True)
    y = fiamma.randn(3, dtype=D)
    assert gradcheck(lambda a: _MulAdd.apply(a, y, 1.5), (fiamma.randn(3, dtype=D,
                                                                      requires_grad=True),),
                     check_forward_ad=True)


def test_gradcheck_forward_ad_catches_a_wrong_jvp():
    class WrongJvp(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x * x

        @staticmethod
        def jvp(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 x g

    x = fiamma.randn(3, dtype=D, requires_grad=True)
    with pytest.raises(sys.modules["fiamma.autograd.gradcheck"].GradcheckError,
                       match="forward AD"):
        gradcheck(WrongJvp.apply, (x,), check_forward_ad=True, check_backward_ad=False)
    assert gradcheck(WrongJvp.apply, (x,), check_forward_ad=True, check_backward_ad=False,
                     raise_exception=False) is False
    with pytest.raises(ValueError, match="at least one of"):
        gradcheck(WrongJvp.apply, (x,), check_backward_ad=False)


def test_gradgradcheck_fwd_over_rev():
    x = fiamma.randn(3, dtype=D, requires_grad=True)
    assert fiamma.autograd.gradgradcheck(lambda a: (a ** 3).sin(), (x,), check_fwd_over_rev=True)


@pytest.mark.parity
@pytest.mark.parametrize("name", list(_cases()))
def test_parity_with_torch_forward_ad(name):
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tfw

    f, primals = _cases()[name]
    g = fiamma.Generator().manual_seed(2)
    tangents = [fiamma.randn(*p.shape, generator=g, dtype=D) for p in primals]
    res = _jvp(f, primals, tangents)
    tp = [torch.from_numpy(p.numpy().copy()) for p in primals]
    tt = [torch.from_numpy(t.numpy().copy()) for t in tangents]
    tf = {
        "elementwise": lambda x, y: x.sin() * y.exp() + x / (1 + y * y),
        "broadcast": lambda x, y: x * y - y.sigmoid(),
        "matmul": lambda a, b: a @ b,
        "sum_mean": lambda x: x.sum(0) * x.mean(1).sum() + (x ** 2).amax(),
        "softmax": lambda x: torch.softmax(x, -1).log(),
        "mlp": lambda x, w1, b1, w2, b2: (torch.tanh(x @ w1 + b1) @ w2 + b2).relu(),
        "norm_div": lambda x: x / x.norm(),
    }[name]
    with tfw.dual_level():
        out = tf(*[tfw.make_dual(p, t) for p, t in zip(tp, tt)])
        expected = tfw.unpack_dual(out).tangent
    np.testing.assert_allclose(res.tangent.numpy(), expected.numpy(), rtol=1e-10, atol=1e-12)
    # and torch.func.jvp agrees
    _, expected2 = torch.func.jvp(tf, tuple(tp), tuple(tt))
    np.testing.assert_allclose(res.tangent.numpy(), expected2.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parity
def test_parity_custom_function_jvp():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tfw

    class TExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = torch.exp(x)
            ctx.result = r
            return r

        @staticmethod
        def jvp(ctx, g):
            return g * ctx.result

    x = fiamma.randn(4, 4, dtype=D)
    t = fiamma.randn(4, 4)  # a float32 tangent of a float64 primal, as in PyTorch's tutorial
    with fwAD.dual_level():
        ours = fwAD.unpack_dual(_Exp.apply(fwAD.make_dual(x, t)).cos()).tangent
    with tfw.dual_level():
        xt = torch.from_numpy(x.numpy().copy())
        theirs = tfw.unpack_dual(TExp.apply(tfw.make_dual(xt, torch.from_numpy(
            t.numpy().copy()))).cos()).tangent
    assert ours.dtype == fiamma.float64 and theirs.dtype == torch.float64
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
