"""The cuda backend's bfloat16/float16 kernels (fiamma/_backend/xp/cuda_lowp.py) and the max-pool
backward's scatter: each op is served by its kernel (``fast_path_calls``), none failed to build
(``fast_path_errors``), and the bits equal NumPy's float32 computation rounded once to nearest
even (every bfloat16/float16 bit pattern, ties included); batch norm on 16-bit activations
equals the widened float32 kernel bit for bit and a float64 reference within the dtype's
rounding; the max-pool backward takes no range check for the pool's own indices and keeps it
for a user's (max_unpool).

Runs on devices whose backend has the fast paths (cuda on a GPU; the CPU emulation of
tools/cuda_emu); skipped elsewhere."""

import numpy as np
import pytest
from _cuda_helpers import backend_with, calls as _calls, served as _served
from conftest import assert_same

import fiamma


@pytest.fixture
def be(device):
    return backend_with(device, "bn_native", "16-bit kernels of its own")


LOWP = [fiamma.bfloat16, fiamma.float16]


def _widen(bits, dtype):
    """float32 values of 16-bit patterns (uint16) of dtype."""
    if dtype == fiamma.bfloat16:
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def _round(f, dtype):
    """float32 -> the 16-bit patterns, to nearest even (NaN: any NaN pattern)."""
    f = np.ascontiguousarray(f, np.float32)
    if dtype == fiamma.float16:
        with np.errstate(over="ignore"):
            return f.astype(np.float16).view(np.uint16)
    u = f.view(np.uint32)
    return ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)


def _dev(bits, dtype, device):
    return fiamma.from_numpy(bits.view(np.int16).copy()).view(dtype).to(device)


def _bits(t):
    return t.cpu().view(fiamma.int16).numpy().view(np.uint16)


def _same_bits(got, want_bits, dtype):
    g = _bits(got)
    nan = np.isnan(_widen(want_bits, dtype))
    assert np.isnan(_widen(g, dtype)[nan]).all()
    bad = np.nonzero(g[~nan] != want_bits[~nan])[0]
    assert bad.size == 0, (bad[:5], g[~nan][bad[:5]], want_bits[~nan][bad[:5]])


def _all_patterns(dtype):
    """Every 16-bit pattern (NaNs, infinities, subnormals, both zeros)."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def _random(dtype, n, seed):
    rng = np.random.default_rng(seed)
    f = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 30.0], n)).astype(np.float32)
    f[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30]
    return _round(f, dtype)


@pytest.mark.parametrize("dtype", LOWP)
def test_rounding_ties_every_pattern(device, be, dtype):
    """x * (1 + one ulp of the next narrower mantissa) is exact in float32 and lands on
    rounding ties: the kernel's one rounding of every pattern equals NumPy's."""
    x = _all_patterns(dtype)
    s = 1.00390625 if dtype == fiamma.bfloat16 else 1.00048828125
    xd = _dev(x, dtype, device)
    x_cpu = xd.cpu()
    c0 = _calls(be, "lp_bin")
    with np.errstate(invalid="ignore"):
        cases = ((xd * s, _widen(x, dtype) * np.float32(s)),
                  (s * xd, np.float32(s) * _widen(x, dtype)),
                  (xd / 3.0, _widen(x, dtype) / np.float32(3.0)),
                  # + and - round the number to the dtype first (PyTorch's rule)
                  (xd - 0.1, _widen(x, dtype) - _widen(_round(np.float32(0.1), dtype), dtype)),
                  (0.3 + xd, _widen(_round(np.float32(0.3), dtype), dtype) + _widen(x, dtype)),
                  (0.3 - xd, _widen(_round(np.float32(0.3), dtype), dtype) - _widen(x, dtype)))
    for got, ref in cases:
        assert got.dtype == dtype
        _same_bits(got, _round(ref, dtype), dtype)
    _served(be, "lp_bin", c0)
    assert _calls(be, "lp_bin") - c0 == 6
    # the CPU backend follows the same rule: the same bits
    for got, ref in ((xd * s, x_cpu * s), (xd - 0.1, x_cpu - 0.1), (0.3 - xd, 0.3 - x_cpu),
                     (xd / 3.0, x_cpu / 3.0)):
        _same_bits(got, _bits(ref), dtype)


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "alpha"])
def test_binary_tensor_tensor(device, be, dtype, op):
    n = 70_001  # not a multiple of the block
    a, b = _random(dtype, n, 1), _random(dtype, n, 2)
    fa, fb = _widen(a, dtype), _widen(b, dtype)
    ad, bd = _dev(a, dtype, device), _dev(b, dtype, device)
    c0 = _calls(be, "lp_bin")
    with np.errstate(all="ignore"):
        if op == "alpha":
            # one fused multiply-add (exact product and sum in float64 but for a rare double
            # rounding), as PyTorch's kernels
            got = fiamma.add(ad, bd, alpha=-0.3)
            ref = (fa.astype(np.float64) +
                   np.float64(np.float32(-0.3)) * fb.astype(np.float64)).astype(np.float32)
        else:
            got = {"add": ad + bd, "sub": ad - bd, "mul": ad * bd, "div": ad / bd}[op]
            ref = {"add": fa + fb, "sub": fa - fb, "mul": fa * fb, "div": fa / fb}[op]
    _served(be, "lp_bin", c0)
    _same_bits(got, _round(ref, dtype), dtype)
    # in place (the result over an operand) and a float64 reference within one rounding
    if op == "add":
        ad += bd
        _same_bits(ad, _round(ref, dtype), dtype)
        fin = np.isfinite(ref) & np.isfinite(_widen(_bits(ad), dtype))
        w = fa.astype(np.float64) + fb.astype(np.float64)
        g = _widen(_bits(ad), dtype).astype(np.float64)
        eps = 2.0 ** -8 if dtype == fiamma.bfloat16 else 2.0 ** -11
        assert np.all(np.abs(g - w)[fin] <= eps * np.abs(w)[fin] + 1e-30)


@pytest.mark.parametrize("dtype", LOWP)
def test_relu_and_its_backward(device, be, dtype):
    x = _all_patterns(dtype)
    xd = _dev(x, dtype, device)
    fx = _widen(x, dtype)
    r0, c0, w0 = _calls(be, "lp_relu"), _calls(be, "lp_cmp"), _calls(be, "lp_where")
    y = fiamma.relu(xd)
    _served(be, "lp_relu", r0)
    want = np.where(fx < 0, np.uint16(0), x)
    _same_bits(y, want, dtype)
    g = _random(dtype, x.size, 3)
    mask = y > 0
    _served(be, "lp_cmp", c0)
    assert np.array_equal(mask.cpu().numpy(), _widen(want, dtype) > 0)
    gx = fiamma.where(mask, _dev(g, dtype, device), 0.0)
    _served(be, "lp_where", w0)
    assert np.array_equal(_bits(gx), np.where(_widen(want, dtype) > 0, g, np.uint16(0)))
    # through autograd (one launch, cuda_step.py): where(y <= 0, 0, g), so a NaN output passes
    # its gradient (PyTorch's threshold_backward)
    xr = xd.clone().requires_grad_()
    fiamma.relu(xr).backward(_dev(g, dtype, device))
    assert np.array_equal(_bits(xr.grad),
                          np.where(_widen(want, dtype) <= 0, np.uint16(0), g))
    # every comparison with a number, both sides
    for got, ref in ((xd >= 0.5, fx >= 0.5), (xd < -1, fx < -1), (xd == 1.0, fx == 1.0),
                     (xd != 2, fx != 2), (xd <= 0, fx <= 0), (0.25 < xd, 0.25 < fx)):
        assert np.array_equal(got.cpu().numpy(), ref)


@pytest.mark.parametrize("dtype", LOWP)
def test_where_tensors_and_numbers(device, be, dtype):
    n = 5000
    a, b = _random(dtype, n, 4), _random(dtype, n, 5)
    cond = np.random.default_rng(6).random(n) < 0.5
    cd = fiamma.from_numpy(cond).to(device)
    ad, bd = _dev(a, dtype, device), _dev(b, dtype, device)
    w0 = _calls(be, "lp_where")
    assert np.array_equal(_bits(fiamma.where(cd, ad, bd)), np.where(cond, a, b))
    assert np.array_equal(_bits(fiamma.where(cd, 1.0 / 3.0, bd)),
                          np.where(cond, _round(np.float32(1.0 / 3.0), dtype), b))
    _served(be, "lp_where", w0)
    assert _calls(be, "lp_where") - w0 == 2


def _bn_ref64(x, w, b, eps):
    """float64 batch norm in training (biased batch variance) over dims (0, 2)."""
    mu = x.mean(axis=(0, 2), keepdims=True)
    var = x.var(axis=(0, 2), keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w[None, :, None] + b[None, :, None]


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("shape,training,strided", [
    ((4, 3, 5, 6), True, False), ((4, 3, 5, 6), True, True), ((2, 5, 7), False, False),
    ((3, 4), True, False)])
def test_batch_norm_16bit(device, be, dtype, shape, training, strided, monkeypatch):
    rng = np.random.default_rng(shape[1] + len(shape))
    C = shape[1]
    xf = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)
    w = rng.uniform(0.5, 2, C).astype(np.float32)
    bb = rng.standard_normal(C).astype(np.float32)
    rm0, rv0 = rng.standard_normal(C).astype(np.float32), rng.uniform(0.5, 2, C)
    rv0 = rv0.astype(np.float32)
    x16 = fiamma.from_numpy(xf).to(device).to(dtype)
    if strided:  # channels-last memory
        x16 = x16.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    g16 = fiamma.from_numpy(np.cos(xf) * 2).to(device).to(dtype)
    outs = []
    for native in (True, False):
        if not native:  # the widened float32 kernel: the reference the bits must equal
            monkeypatch.setattr(be, "bn_native", lambda dt: False)
        f0, b0 = _calls(be, "batch_norm_lp"), _calls(be, "batch_norm_fwd")
        wd = fiamma.from_numpy(w).to(device).requires_grad_()
        bd = fiamma.from_numpy(bb).to(device).requires_grad_()
        rm, rv = fiamma.from_numpy(rm0.copy()).to(device), fiamma.from_numpy(rv0.copy()).to(
            device)
        xx = x16.detach().requires_grad_()
        y = fiamma.batch_norm(xx, rm, rv, wd, bd, training, 0.1, 1e-5)
        assert y.dtype == dtype
        y.backward(g16)
        _served(be, "batch_norm_lp" if native else "batch_norm_fwd", f0 if native else b0)
        outs.append((y.detach(), rm, rv, xx.grad, wd.grad, bd.grad))
    for got, ref in zip(*outs):
        assert got.dtype == ref.dtype
        assert np.array_equal(got.cpu().view(fiamma.int16 if got.dtype in LOWP else
                                             fiamma.int32).numpy(),
                              ref.cpu().view(fiamma.int16 if ref.dtype in LOWP else
                                             fiamma.int32).numpy())
    if training:  # against float64 from the 16-bit input: within the output's rounding
        x64 = _widen(_bits(x16.contiguous()), dtype).astype(np.float64)
        n = shape[0]
        x3 = x64.reshape(n, C, -1)
        want = _bn_ref64(x3, w.astype(np.float64), bb.astype(np.float64), 1e-5)
        got = outs[0][0].float().cpu().numpy().reshape(n, C, -1)
        eps = 2.0 ** -8 if dtype == fiamma.bfloat16 else 2.0 ** -11
        assert np.all(np.abs(got - want) <= eps * np.abs(want) + 1e-5)
        rm_want = 0.9 * rm0 + 0.1 * x3.mean(axis=(0, 2))
        np.testing.assert_allclose(outs[0][1].cpu().numpy(), rm_want, rtol=1e-5, atol=1e-6)


def test_batch_norm_16bit_kernel_failure_falls_back(device, be, monkeypatch):
    monkeypatch.setattr(be, "fast_path_errors", {})
    real = be._lp_kernel

    def broken(h, name):
        if name.startswith("fm_bn"):
            raise RuntimeError("does not build (test)")
        return real(h, name)

    monkeypatch.setattr(be, "_lp_kernel", broken)
    x = fiamma.randn(4, 3, 5, device=device).to(fiamma.bfloat16)
    y = fiamma.batch_norm(x, None, None, None, None, True)
    assert "batch_norm_lp" in be.fast_path_errors and not be.bn_native(fiamma.bfloat16)
    ref = fiamma.batch_norm(x.cpu(), None, None, None, None, True)
    assert_same(y, ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.bfloat16, fiamma.float16])
def test_max_pool_backward_without_range_check(device, be, dtype, monkeypatch):
    """ResNet's 3x3 stride-2 pool: overlapping windows add into shared inputs; the pool's own
    indices are known in range, so the scatter reads nothing back to the host (16-bit data:
    pooled and scattered as it is, no float32 copies)."""
    rng = np.random.default_rng(9)
    x = fiamma.from_numpy(rng.standard_normal((2, 3, 12, 11)).astype(np.float32))
    x[0, 0, :4, :4] = 7.0  # ties: the first maximum wins, shared by several windows
    xc = x.to(dtype)
    g = fiamma.from_numpy(rng.standard_normal((2, 3, 6, 6)).astype(np.float32)).to(dtype)
    grads, outs = [], []
    for dev in ("cpu", device):
        xx = xc.to(dev).detach().requires_grad_()
        p0 = _calls(be, "pool_lp")
        y, idx = fiamma.max_pool2d(xx, 3, 2, 1, return_indices=True)
        if dev == device and dtype in LOWP:
            _served(be, "pool_lp", p0)
        outs.append((y.detach(), idx))
        # the pool's own indices: the gather (cuda_step's maxpool_bwd) or the scatter
        name = ("maxpool_bwd", "pool_lp" if dtype in LOWP else "pool_scatter")
        s0 = _calls(be, name[0]) + _calls(be, name[1])
        if dev == device:
            import fiamma._backend.xp.pool as P

            def no_sync(*a, **k):
                raise AssertionError("the generic scatter (with its host-read check) ran")

            monkeypatch.setattr(P.PoolMixin, "pool_scatter", no_sync)
        y.backward(g.to(dev))
        if dev == device:
            _served(be, name, s0)
            monkeypatch.undo()
        grads.append(xx.grad)
    tol = 1e-6 if dtype == fiamma.float32 else 1e-2
    assert_same(grads[1], grads[0], rtol=tol, atol=tol)
    for a, b in zip(outs[1], outs[0]):  # the maxima's bits and the indices: exactly the CPU's
        assert np.array_equal(a.cpu().view(fiamma.int16 if a.dtype in LOWP else a.dtype)
                              .numpy(), b.view(fiamma.int16 if b.dtype in LOWP else b.dtype)
                              .numpy())


@pytest.mark.parametrize("dtype", LOWP)
def test_max_pool_16bit_edges(device, be, dtype):
    """NaN wins (a quiet NaN out), -inf and ties keep the first position, dilation and
    padding, every pattern pooled exactly; 3-d windows."""
    x = _all_patterns(dtype).reshape(4, 16, 32, 32)
    xd = _dev(x.reshape(-1), dtype, device).reshape(4, 16, 32, 32)
    xc = xd.cpu()
    p0 = _calls(be, "pool_lp")
    for args in ((3, 2, 1), (2, 2, 0), (3, 1, 1, 2)):
        got, gi = fiamma.max_pool2d(xd, *args, return_indices=True)
        ref, ri = fiamma.max_pool2d(xc, *args, return_indices=True)
        assert np.array_equal(gi.cpu().numpy(), ri.numpy())
        _same_bits(got, _bits(ref), dtype)
    got = fiamma.max_pool3d(xd, (2, 3, 3), (2, 2, 2), (1, 1, 1))
    _same_bits(got, _bits(fiamma.max_pool3d(xc, (2, 3, 3), (2, 2, 2), (1, 1, 1))), dtype)
    _served(be, "pool_lp", p0)


def test_max_unpool_keeps_its_index_check(device, be):
    x = fiamma.randn(1, 2, 4, 4, device=device)
    s0 = _calls(be, "pool_scatter")
    bad = fiamma.tensor([[[[0, 99], [3, 5]], [[1, 2], [3, 4]]]], device=device)
    with pytest.raises(IndexError, match="out of range"):
        fiamma.max_unpool2d(x[:, :, :2, :2].contiguous(), bad, 2)
    assert _calls(be, "pool_scatter") == s0


@pytest.mark.parity
@pytest.mark.parametrize("dtype", LOWP)
def test_bits_equal_pytorch(device, be, dtype):
    """The kernels' bits against PyTorch's (CPU) on every pattern: tensor-tensor + - *, the
    number rules of + - * /, ReLU. Not compared: PyTorch's CUDA divides by a number as a
    multiplication by its float reciprocal, and its add-with-alpha is one FMA with a float
    alpha where its CPU rounds alpha to the dtype (the kernel follows the CUDA one)."""
    torch = pytest.importorskip("torch")
    tdt = torch.bfloat16 if dtype == fiamma.bfloat16 else torch.float16
    x = _all_patterns(dtype)
    y = np.roll(x, 12345)
    xd, yd = _dev(x, dtype, device), _dev(y, dtype, device)
    xt = torch.from_numpy(x.view(np.int16).copy()).view(tdt)
    yt = torch.from_numpy(y.view(np.int16).copy()).view(tdt)

    def tbits(t):
        return t.view(torch.int16).numpy().view(np.uint16)

    for got, ref in ((xd + yd, xt + yt), (xd - yd, xt - yt), (xd * yd, xt * yt),
                     (xd * 0.37, xt * 0.37), (xd / 0.37, xt / 0.37), (xd + 0.37, xt + 0.37),
                     (xd - 0.37, xt - 0.37), (0.37 - xd, 0.37 - xt),
                     (fiamma.relu(xd), torch.relu(xt))):
        _same_bits(got, tbits(ref), dtype)


def test_elementwise_kernel_failure_falls_back(device, be, monkeypatch):
    """A 16-bit kernel that does not build: recorded in fast_path_errors, the op computed by
    the generic code (same values), the path off from then on."""
    monkeypatch.setattr(be, "fast_path_errors", {})
    real = be._lp_kernel

    def broken(h, name):
        if name in ("fm_lp_bin", "fm_lp_relu", "fm_maxpool_lp"):
            raise RuntimeError("does not build (test)")
        return real(h, name)

    monkeypatch.setattr(be, "_lp_kernel", broken)
    a, b = _random(fiamma.bfloat16, 3000, 7), _random(fiamma.bfloat16, 3000, 8)
    ad, bd = _dev(a, fiamma.bfloat16, device), _dev(b, fiamma.bfloat16, device)
    with np.errstate(all="ignore"):
        ref = _round(_widen(a, fiamma.bfloat16) * _widen(b, fiamma.bfloat16), fiamma.bfloat16)
    _same_bits(ad * bd, ref, fiamma.bfloat16)
    _same_bits(fiamma.relu(ad), _bits(fiamma.relu(ad.cpu())), fiamma.bfloat16)
    x = ad.reshape(3, 10, 100)
    y = fiamma.max_pool2d(x, 2)
    _same_bits(y, _bits(fiamma.max_pool2d(x.cpu(), 2)), fiamma.bfloat16)
    assert {"lp_bin", "lp_relu", "pool_lp"} <= set(be.fast_path_errors)
    assert not be.pool_native(fiamma.bfloat16)
    n = _calls(be, "lp_bin")
    _same_bits(ad * bd, ref, fiamma.bfloat16)
    assert _calls(be, "lp_bin") == n


def _f32_patterns(seed):
    """float32 values around every rounding case of the 16-bit types: every bfloat16 pattern
    widened, with each of the 16 low bits' edge values (ties, just below/above a tie), float16's
    range edges and subnormals, NaNs of several payloads, infinities and signed zeros."""
    rng = np.random.default_rng(seed)
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    u = (hi[:, None] | lows[None, :]).ravel()
    u = np.concatenate([u, rng.integers(0, 1 << 32, 50_000, dtype=np.uint64).astype(np.uint32)])
    return u.view(np.float32)


@pytest.mark.parametrize("dtype", LOWP)
def test_cast_float32_to_16bit_one_pass(device, be, dtype):
    """float32 -> bfloat16/float16 (autocast's weight casts): one fm_lp_cast launch, the bits the
    generic conversion (the CPU backend) makes, NaNs staying NaN."""
    f = _f32_patterns(3)
    fd = fiamma.from_numpy(f.copy()).to(device)
    c0 = _calls(be, "lp_cast")
    got = fd.to(dtype)
    _served(be, "lp_cast", c0)
    assert _calls(be, "lp_cast") - c0 == 1 and got.dtype == dtype
    _same_bits(got, _bits(fiamma.from_numpy(f.copy()).to(dtype)), dtype)
    with np.errstate(over="ignore"):
        want = _round(f, dtype)
    want[np.isnan(f)] = 0x7FC0 if dtype == fiamma.bfloat16 else 0x7E00  # (_round: not NaNs)
    _same_bits(got, want, dtype)


@pytest.mark.parametrize("dtype", LOWP)
@pytest.mark.parametrize("to", ["float32", "float64", "other"])
def test_cast_16bit_widening_one_pass(device, be, dtype, to):
    """bfloat16/float16 -> float32, float64 (exact) or the other 16-bit type (rounded once from
    the exact value): every pattern, one launch, the CPU backend's bits."""
    other = fiamma.float16 if dtype == fiamma.bfloat16 else fiamma.bfloat16
    tdt = {"float32": fiamma.float32, "float64": fiamma.float64, "other": other}[to]
    x = _all_patterns(dtype)
    xd = _dev(x, dtype, device)
    c0 = _calls(be, "lp_cast")
    got = xd.to(tdt)
    _served(be, "lp_cast", c0)
    assert _calls(be, "lp_cast") - c0 == 1 and got.dtype == tdt
    ref = xd.cpu().to(tdt)
    if to == "other":
        _same_bits(got, _bits(ref), tdt)
        w = _widen(x, dtype)
        with np.errstate(over="ignore"):
            want = _round(w, tdt)
        want[np.isnan(w)] = 0x7FC0 if tdt == fiamma.bfloat16 else 0x7E00  # (_round: no NaNs)
        _same_bits(got, want, tdt)
    else:
        g, r = got.cpu().numpy(), ref.numpy()
        with np.errstate(invalid="ignore"):
            w = _widen(x, dtype).astype(r.dtype)
        assert np.array_equal(g, r, equal_nan=True) and np.array_equal(g, w, equal_nan=True)
        nz = ~np.isnan(g)
        assert np.array_equal(np.signbit(g[nz]), np.signbit(w[nz]))


@pytest.mark.parametrize("dtype", LOWP)
def test_cast_float64_and_declined_layouts(device, be, dtype):
    """float64 -> bfloat16 rounds through float32 (the generic rule) in one launch; float64 ->
    float16 (rounded once by the generic code), a strided source or target, and a shared
    storage stay generic: same values, no launch."""
    rng = np.random.default_rng(5)
    f = (rng.standard_normal(3001) * 100).astype(np.float64)
    f[:4] = [np.nan, np.inf, -0.0, 1 + 2.0 ** -9 + 2.0 ** -40]  # a double-rounding case
    fd = fiamma.from_numpy(f.copy()).to(device)
    ref = fiamma.from_numpy(f.copy()).to(dtype)
    c0 = _calls(be, "lp_cast")
    got = fd.to(dtype)
    if dtype == fiamma.bfloat16:
        _served(be, "lp_cast", c0)
        _same_bits(got, _round(f.astype(np.float32), dtype), dtype)
    else:
        assert _calls(be, "lp_cast") == c0
    _same_bits(got, _bits(ref), dtype)
    m = fiamma.from_numpy(rng.standard_normal((40, 30)).astype(np.float32)).to(device)
    c0 = _calls(be, "lp_cast")
    t = m.t().to(dtype)  # strided source
    o = fiamma.empty((80, 30), dtype=dtype, device=device)[::2]  # strided target
    o.copy_(m)
    assert _calls(be, "lp_cast") == c0
    _same_bits(t, _bits(m.cpu().t().to(dtype)), dtype)
    _same_bits(o, _bits(m.cpu().to(dtype)), dtype)


def test_cast_in_mixed_dtype_ops_and_autocast_grads(device, be):
    """A bfloat16 + float32 operand is widened by one launch; the float32 gradient of a float32
    weight used in bfloat16 (autocast's cast recorded) comes back through one launch too."""
    pytest.importorskip("fiamma.autograd")
    rng = np.random.default_rng(9)
    a = rng.standard_normal(5000).astype(np.float32)
    w = fiamma.from_numpy(a.copy()).to(device).requires_grad_(True)
    b = _dev(_round(rng.standard_normal(5000), fiamma.bfloat16), fiamma.bfloat16, device)
    c0 = _calls(be, "lp_cast")
    y = w.to(fiamma.bfloat16) * b + w  # bfloat16 * bfloat16, then + float32: widened
    y.sum().backward()
    assert _calls(be, "lp_cast") - c0 >= 3  # the cast, the widening of the product, the grad
    assert not be.fast_path_errors
    wc = fiamma.from_numpy(a.copy()).requires_grad_(True)
    yc = wc.to(fiamma.bfloat16) * b.cpu() + wc
    yc.sum().backward()
    assert_same(y.detach(), yc.detach(), rtol=0, atol=0)
    assert_same(w.grad, wc.grad, rtol=0, atol=0)


def test_cast_kernel_failure_falls_back(device, be, monkeypatch):
    monkeypatch.setattr(be, "fast_path_errors", {})
    real = be._lp_kernel

    def broken(h, name):
        if name == "fm_lp_cast":
            raise RuntimeError("does not build (test)")
        return real(h, name)

    monkeypatch.setattr(be, "_lp_kernel", broken)
    f = _f32_patterns(4)[:20000]
    got = fiamma.from_numpy(f.copy()).to(device).to(fiamma.bfloat16)
    assert "lp_cast" in be.fast_path_errors
    _same_bits(got, _round(f, fiamma.bfloat16), fiamma.bfloat16)
    back = got.float()
    assert np.array_equal(back.cpu().numpy(), got.cpu().float().numpy(), equal_nan=True)
