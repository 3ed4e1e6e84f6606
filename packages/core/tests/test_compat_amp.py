"""fiamma.amp: autocast on the CPU (the lower-precision list runs in bfloat16/float16, checked
against NumPy on rounded inputs) and GradScaler's bookkeeping (with a minimal optimizer)."""

import threading
import warnings

import numpy as np
import pytest
from conftest import round_bf16

import fiamma
from fiamma import amp

rng = np.random.default_rng(0)


def t(*shape):
    return fiamma.from_numpy(rng.standard_normal(shape).astype(np.float32))


def bf(a):
    return round_bf16(np.asarray(a, dtype=np.float32))


def test_lower_precision_ops_run_in_bfloat16():
    x, w, b = t(4, 8), t(8, 5), t(5)
    xb, wb, bb = bf(x.numpy()), bf(w.numpy()), bf(b.numpy())
    with fiamma.autocast("cpu", dtype=fiamma.bfloat16):
        results = {
            "mm": (fiamma.mm(x, w), xb @ wb),
            "matmul": (fiamma.matmul(x, w), xb @ wb),
            "@": (x @ w, xb @ wb),
            "method": (x.mm(w), xb @ wb),
            "bmm": (fiamma.bmm(x[None], w[None]), (xb @ wb)[None]),
            "addmm": (fiamma.addmm(b, x, w), bb + xb @ wb),
            "baddbmm": (fiamma.baddbmm(b[None, None], x[None], w[None]), (bb + xb @ wb)[None]),
            "addbmm": (fiamma.addbmm(b, x[None], w[None]), bb + xb @ wb),
        }
    for name, (got, want) in results.items():
        assert got.dtype is fiamma.bfloat16, name
        # float32 accumulation of the rounded inputs, rounded once more to bfloat16
        np.testing.assert_allclose(got.float().numpy(), bf(want), rtol=1e-2, atol=1e-2,
                                   err_msg=name)
    assert fiamma.mm(x, w).dtype is fiamma.float32  # outside: full precision again


def test_convolutions_run_in_the_autocast_dtype():
    img, k, bias = t(2, 3, 6, 6), t(4, 3, 3, 3), t(4)
    ref = fiamma.conv2d(fiamma.from_numpy(bf(img.numpy())), fiamma.from_numpy(bf(k.numpy())),
                        fiamma.from_numpy(bf(bias.numpy())))
    with fiamma.autocast("cpu"):
        y = fiamma.conv2d(img, k, bias)
        yt = fiamma.conv_transpose2d(img, k.transpose(0, 1).contiguous())
        y1 = fiamma.conv1d(img[:, :, 0], k[:, :, 0])
        yc = fiamma.convolution(img, k, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    assert y.dtype is yt.dtype is y1.dtype is yc.dtype is fiamma.bfloat16
    np.testing.assert_allclose(y.float().numpy(), bf(ref.numpy()), rtol=1e-2, atol=2e-2)


def test_float16_and_float64_and_other_ops():
    x, w = t(3, 4), t(4, 2)
    with fiamma.autocast("cpu", dtype=fiamma.float16):
        assert fiamma.mm(x, w).dtype is fiamma.float16
        # float64 is not eligible (PyTorch's rule); ops off the list keep their dtypes
        assert fiamma.mm(x.double(), w.double()).dtype is fiamma.float64
        assert (x + 1).dtype is fiamma.float32 and fiamma.mv(x, w[:, 0]).dtype is fiamma.float32
        # integer products are left alone
        assert fiamma.mm(x.long(), w.long()).dtype is fiamma.int64
        # explicit out= is not autocast
        out = fiamma.empty(3, 2)
        fiamma.mm(x, w, out=out)
        assert out.dtype is fiamma.float32


def test_nesting_disabling_state_functions_and_decorator():
    x, w = t(2, 3), t(3, 2)
    assert not fiamma.is_autocast_enabled("cpu") and not fiamma.is_autocast_enabled()
    with fiamma.autocast("cpu"):
        assert fiamma.is_autocast_enabled("cpu")
        assert fiamma.get_autocast_dtype("cpu") is fiamma.bfloat16
        with fiamma.autocast("cpu", enabled=False):
            assert fiamma.mm(x, w).dtype is fiamma.float32
            assert not fiamma.is_autocast_enabled("cpu")
        with fiamma.autocast("cpu", dtype=fiamma.float16):
            assert fiamma.mm(x, w).dtype is fiamma.float16
        assert fiamma.mm(x, w).dtype is fiamma.bfloat16
    assert not fiamma.is_autocast_enabled("cpu")

    @fiamma.autocast("cpu")
    def f():
        return fiamma.mm(x, w)

    assert f().dtype is fiamma.bfloat16 and fiamma.mm(x, w).dtype is fiamma.float32
    fiamma.set_autocast_enabled("cpu", True)
    try:
        assert fiamma.mm(x, w).dtype is fiamma.bfloat16
    finally:
        fiamma.set_autocast_enabled("cpu", False)
    assert fiamma.mm(x, w).dtype is fiamma.float32
    with pytest.warns(FutureWarning, match=r"torch.cpu.amp.autocast\(args...\)` is deprecated"):
        ac = fiamma.cpu.amp.autocast()
    with ac:
        assert fiamma.mm(x, w).dtype is fiamma.bfloat16


def test_state_is_per_thread():
    x, w = t(2, 3), t(3, 2)
    seen = []
    with fiamma.autocast("cpu"):
        th = threading.Thread(target=lambda: seen.append(fiamma.mm(x, w).dtype))
        th.start()
        th.join()
        assert fiamma.mm(x, w).dtype is fiamma.bfloat16
    assert seen == [fiamma.float32]


def test_bad_arguments_and_cuda_without_cuda():
    with pytest.raises(RuntimeError, match="unsupported device_type 'xpu'"):
        fiamma.autocast("xpu")
    with pytest.raises(ValueError, match="cpu autocast supports"):
        fiamma.autocast("cpu", dtype=fiamma.float64)
    with pytest.raises(TypeError, match="device_type of type str"):
        fiamma.autocast(fiamma.device("cpu"))
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ac = fiamma.autocast("cuda")
    with ac:
        assert fiamma.mm(t(2, 2), t(2, 2)).dtype is fiamma.float32
    with pytest.warns(UserWarning, match="CUDA is not available"), \
            pytest.warns(FutureWarning, match=r"torch.cuda.amp.autocast\(args...\)` is deprecated"):
        ac = fiamma.cuda.amp.autocast()
    assert amp.is_autocast_available("cpu") and not amp.is_autocast_available("cuda")


def test_float32_op_and_custom_fwd():
    @amp.float32_op
    def f(a, b, scale=None):
        return a.dtype, b.dtype, scale.dtype, fiamma.is_autocast_enabled("cpu")

    a = t(2).bfloat16()
    with fiamma.autocast("cpu"):
        assert f(a, a.double(), scale=a) == (fiamma.float32, fiamma.float64, fiamma.float32,
                                             False)
        assert fiamma.is_autocast_enabled("cpu")
    assert f(a, a, scale=a)[0] is fiamma.bfloat16  # no autocast: untouched

    class Ctx:
        pass

    @amp.custom_fwd(device_type="cpu", cast_inputs=fiamma.float32)
    def fwd(ctx, x):
        return x.dtype, fiamma.is_autocast_enabled("cpu")

    @amp.custom_bwd(device_type="cpu")
    def bwd(ctx, g):
        return fiamma.is_autocast_enabled("cpu")

    ctx = Ctx()
    with fiamma.autocast("cpu"):
        assert fwd(ctx, a) == (fiamma.float32, False)
    assert bwd(ctx, None) is True  # backward runs in the state forward saw


def test_gradients_reach_float32_parameters():
    pytest.importorskip("fiamma.autograd")
    x = t(4, 3)
    w = t(3, 2).requires_grad_()
    with fiamma.autocast("cpu"):
        y = x @ w
        z = x @ w  # the cached cast of w is reused within the region
        loss = (y.float() ** 2).sum() + z.float().sum()
    loss.backward()
    assert w.grad.dtype is fiamma.float32
    yb = bf(bf(x.numpy()) @ bf(w.detach().numpy()))
    want = bf(x.numpy()).T @ (2 * yb + 1)
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=3e-2, atol=3e-2)


# ---- GradScaler -------------------------------------------------------------------------------

class Opt:
    """The part of an optimizer GradScaler uses."""

    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.steps = 0

    def step(self, closure=None):
        self.steps += 1
        return "stepped"


def param(grad):
    p = fiamma.zeros(len(grad))
    p.grad = fiamma.tensor(grad, dtype=fiamma.float32)
    return p


def test_scale_unscale_step_update():
    s = amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    assert s.get_scale() == 8.0 and s.is_enabled()
    out = s.scale(fiamma.tensor([1.0, 2.0]))
    assert out.tolist() == [8.0, 16.0]
    assert [v.tolist() for v in s.scale([fiamma.ones(1), (fiamma.ones(1),)])[1]] == [[8.0]]
    assert s.scale(fiamma.ones(2, dtype=fiamma.bfloat16)).dtype is fiamma.bfloat16
    p = param([8.0, -16.0])
    opt = Opt([p])
    assert s.step(opt) == "stepped" and opt.steps == 1
    assert p.grad.tolist() == [1.0, -2.0]  # unscaled by step
    s.update()
    assert s.get_scale() == 8.0  # one clean step of growth_interval 2
    p.grad = fiamma.tensor([8.0, 8.0])
    s.unscale_(opt)
    assert p.grad.tolist() == [1.0, 1.0]
    s.step(opt)  # does not unscale twice
    assert p.grad.tolist() == [1.0, 1.0] and opt.steps == 2
    s.update()
    assert s.get_scale() == 16.0  # grew after two clean steps
    p.grad = fiamma.tensor([float("inf"), 1.0])
    assert s.step(opt) is None and opt.steps == 2  # skipped
    s.update()
    assert s.get_scale() == 8.0  # backed off
    p.grad = fiamma.tensor([float("nan"), 1.0])
    s.step(opt)
    s.update(new_scale=3.0)
    assert s.get_scale() == 3.0 and opt.steps == 2


def test_scaler_misuse_errors():
    s = amp.GradScaler("cpu")
    opt = Opt([param([1.0])])
    s.scale(fiamma.ones(1))
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        s.step(opt)
    with pytest.raises(RuntimeError, match="Closure"):
        amp.GradScaler("cpu").step(opt, closure=lambda: 0)
    with pytest.raises(AssertionError, match="No inf checks"):
        amp.GradScaler("cpu").update()
    with pytest.raises(ValueError, match="FP16"):
        s2 = amp.GradScaler("cpu")
        s2.scale(fiamma.ones(1))
        p = fiamma.zeros(1, dtype=fiamma.float16)
        p.grad = fiamma.ones(1, dtype=fiamma.float16)
        s2.unscale_(Opt([p]))
    with pytest.raises(ValueError, match="growth factor"):
        amp.GradScaler("cpu", growth_factor=0.5)
    with pytest.raises(ValueError, match="scale"):
        amp.GradScaler("cpu").scale(3.0)


def test_state_dict_round_trip_and_disabled():
    s = amp.GradScaler("cpu", init_scale=4.0, growth_interval=3)
    opt = Opt([param([4.0])])
    s.scale(fiamma.ones(1))
    s.step(opt)
    s.update()
    sd = s.state_dict()
    assert sd == {"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 3, "_growth_tracker": 1}
    s2 = amp.GradScaler("cpu")
    s2.load_state_dict(sd)
    assert s2.state_dict() == sd
    off = amp.GradScaler("cpu", enabled=False)
    x = fiamma.ones(2)
    assert off.scale(x) is x and off.get_scale() == 1.0 and off.state_dict() == {}
    opt2 = Opt([param([1.0])])
    assert off.step(opt2) == "stepped"
    off.update()
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        s2.load_state_dict({})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cuda_scaler = fiamma.cuda.amp.GradScaler()
    msgs = [(x.category, str(x.message)) for x in w]
    assert not cuda_scaler.is_enabled()
    assert any("CUDA is not available" in m for _, m in msgs)
    # PyTorch's deprecation warning for the torch.cuda.amp spelling
    assert (FutureWarning, "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
            "`torch.amp.GradScaler('cuda', args...)` instead.") in msgs
    with pytest.warns(FutureWarning, match=r"torch.cpu.amp.GradScaler\(args...\)` is deprecated"):
        assert fiamma.cpu.amp.GradScaler().is_enabled()
