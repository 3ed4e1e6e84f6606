"""The op layer on every device besides the CPU: shape copies, creation, interop, Tensor
methods, joins, einsum and linalg give the CPU's results on the device (``device`` fixture,
``assert_same`` from conftest), results stay on the device, and gradients come back there."""

import re

import numpy as np
import pytest
from conftest import assert_same

import fiamma


def _pair(a, device, dtype=None):
    c = fiamma.tensor(a, dtype=dtype)
    return c, c.to(device)


def _missing_primitive(fn):
    """fn() — or a skip when the device's backend lacks a primitive of a family another branch
    provides (an AttributeError naming it), so this file tests the op layer on its own."""
    try:
        return fn()
    except AttributeError as e:
        m = re.search(r"'XpBackend' object has no attribute '(\w+)'", str(e))
        if m is None:
            raise
        pytest.skip(f"the xp backend has no '{m.group(1)}' primitive yet")


def _on(t, device):
    assert t.device.type == device, t.device
    return t


RNG = np.random.default_rng(0)
A34 = RNG.integers(-9, 9, (3, 4)).astype(np.float64)
A234 = RNG.integers(-9, 9, (2, 3, 4)).astype(np.float64)


# ---- shape copies -------------------------------------------------------------------------------

SHAPE_OPS = {
    "flip": lambda x: x.flip(0, 2),
    "fliplr": lambda x: fiamma.fliplr(x),
    "flipud": lambda x: fiamma.flipud(x),
    "roll": lambda x: x.roll((1, -2), (0, 2)),
    "roll_flat": lambda x: x.roll(5),
    "rot90": lambda x: x.rot90(1, (1, 2)),
    "rot90_3": lambda x: x.rot90(3, (0, 2)),
    "repeat": lambda x: x.repeat(2, 1, 3),
    "repeat_lead": lambda x: x.repeat(2, 1, 1, 2),
    "tile": lambda x: x.tile(2),
    "repeat_interleave": lambda x: x.repeat_interleave(2, dim=1),
    "repeat_interleave_flat": lambda x: x.repeat_interleave(3),
    "tril": lambda x: x.tril(),
    "triu": lambda x: x.triu(1),
    "tril_neg": lambda x: fiamma.tril(x, -1),
    "diag_embed": lambda x: x.diag_embed(1),
    "diagflat": lambda x: x[0].diagflat(-1),
    "diag_2d": lambda x: x[1].diag(1),
    "diag_1d": lambda x: x[0, 0].diag(-2),
    "diagonal": lambda x: x.diagonal(0, 1, 2).contiguous(),
    "trace": lambda x: x[0].trace(),
    "transposed_flip": lambda x: x.transpose(0, 2).flip(1),
    "strided_roll": lambda x: x[:, ::2].roll(1, 1),
    "movedim": lambda x: x.movedim(0, 2).contiguous(),
    "block_diag": lambda x: fiamma.block_diag(x[0], x[1, :2, :3]),
    "vander": lambda x: fiamma.vander(x[0, 0], 3),
    "kron": lambda x: fiamma.kron(x[0, :2, :2], x[1, :2, :3]),
    "cross": lambda x: fiamma.cross(x[0, :, :3], x[1, :, :3], dim=1),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.int64, fiamma.bfloat16, fiamma.bool])
def test_shape_copies(device, name, dt):
    if dt is fiamma.bool and name in ("vander", "kron", "cross", "trace"):
        pytest.skip("arithmetic op: no bool")
    c, d = _pair(A234, device, dt)
    f = SHAPE_OPS[name]
    assert_same(_on(f(d), device), f(c))


def test_shape_copies_inplace_and_out(device):
    c, d = _pair(A34, device)
    assert_same(d.clone().tril_(1), c.clone().tril_(1))
    assert_same(d.clone().triu_(-1), c.clone().triu_(-1))
    out = fiamma.empty(3, 4, dtype=fiamma.float64, device=device)
    fiamma.triu(d, out=out)
    assert_same(out, fiamma.triu(c))


def test_shape_copies_backward(device):
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    c, d = _pair(A234, device, fiamma.float64)
    w = fiamma.tensor(RNG.normal(size=(2, 4, 3, 2)))
    for f in [lambda x: x.flip(1).roll(1, 2).rot90(1, (1, 2)),
              lambda x: x.repeat(1, 2, 1).tril().triu(-1),
              lambda x: x.diag_embed()[..., :3, :2].sum(-1)]:
        xc = c.clone().requires_grad_()
        xd = d.clone().requires_grad_()
        yc, yd = f(xc), f(xd)
        wc = w[tuple(slice(0, s) for s in yc.shape)]
        (yc * wc.reshape(yc.shape) if wc.shape == yc.shape else yc).sum().backward()
        (yd * wc.reshape(yd.shape).to(device) if wc.shape == yd.shape else yd).sum().backward()
        assert_same(_on(xd.grad, device), xc.grad)


def test_one_hot_and_combinations(device):
    c, d = _pair([0, 2, 1, 2], device, fiamma.int64)
    assert_same(_on(_missing_primitive(lambda: fiamma.one_hot(d, 4)), device),
                fiamma.one_hot(c, 4))
    x, xd = _pair([1.0, 2.0, 3.0], device)
    assert_same(_on(_missing_primitive(lambda: fiamma.combinations(xd, 2)), device),
                fiamma.combinations(x, 2))


# ---- joins, einsum -------------------------------------------------------------------------------

def test_joins_and_einsum(device):
    c, d = _pair(A234, device)
    for f in [lambda x: fiamma.cat([x, x * 2], 1), lambda x: fiamma.stack([x, -x], 3),
              lambda x: fiamma.hstack([x, x]), lambda x: fiamma.vstack([x[0], x[1]]),
              lambda x: fiamma.cat([x[:, :, ::2], x[:, :, 1::2]], 2),
              lambda x: fiamma.einsum("bij,bkj->bik", x, x),
              lambda x: fiamma.einsum("bij->j", x), lambda x: fiamma.einsum("bii->bi", x[:, :, :3]),
              lambda x: fiamma.einsum("ij,ij->i", x[0], x[1]),
              lambda x: fiamma.tensordot(x, x, dims=([1, 2], [1, 2])),
              lambda x: fiamma.cdist(x[0], x[1]), lambda x: fiamma.outer(x[0, 0], x[1, 1])]:
        assert_same(_on(f(d), device), f(c), rtol=1e-5, atol=1e-4)
    with pytest.raises(RuntimeError, match="same device"):
        fiamma.cat([d, c])


# ---- creation ------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [None, fiamma.float64, fiamma.bfloat16, fiamma.int32, fiamma.bool])
def test_creation_on_device(device, dt):
    data = [[1.5, -2.0, 3.25], [0.0, 7.0, -1.0]]
    assert_same(_on(fiamma.tensor(data, dtype=dt, device=device), device),
                fiamma.tensor(data, dtype=dt))
    arr = np.array(data)
    assert_same(_on(fiamma.tensor(arr, dtype=dt, device=device), device),
                fiamma.tensor(arr, dtype=dt))
    assert_same(_on(fiamma.as_tensor(arr, dtype=dt, device=device), device),
                fiamma.as_tensor(arr, dtype=dt))
    for f in [lambda **k: fiamma.zeros(2, 3, dtype=dt, **k),
              lambda **k: fiamma.ones((4,), dtype=dt, **k),
              lambda **k: fiamma.full((2, 2), 3, dtype=dt, **k),
              lambda **k: fiamma.eye(3, 4, dtype=dt, **k),
              lambda **k: fiamma.empty(0, 3, dtype=dt, **k)]:
        assert_same(_on(f(device=device), device), f())


def test_like_and_new(device):
    c, d = _pair(A34, device, fiamma.float32)
    for f in [fiamma.zeros_like, fiamma.ones_like, lambda x: fiamma.full_like(x, 2.5),
              lambda x: fiamma.zeros_like(x, dtype=fiamma.int64),
              lambda x: x.new_zeros(2, 3), lambda x: x.new_ones((3,)),
              lambda x: x.new_full((2,), 7.0), lambda x: x.new_tensor([1, 2]),
              lambda x: x.new_empty(0)]:
        assert_same(_on(f(d), device), f(c))
    assert fiamma.empty_like(d).device.type == device
    assert fiamma.ones_like(d, device="cpu").device.type == "cpu"
    assert fiamma.tensor(d).device.type == device  # a tensor's copy stays on its device
    assert fiamma.tensor(d, device="cpu").device.type == "cpu"


# ---- Tensor methods and interop ------------------------------------------------------------------

def test_to_type_copy(device):
    c, d = _pair(A34, device, fiamma.float32)
    assert_same(_on(c.to(device, fiamma.float64), device), c.double())
    assert_same(_on(d.to(dtype=fiamma.int32), device), c.int())
    assert_same(_on(d.type(fiamma.float16), device), c.half())
    assert_same(_on(d.type("torch.LongTensor"), device), c.long())
    assert d.type() == "fiamma.FloatTensor"
    assert d.to(device) is d and d.cpu().device.type == "cpu"
    assert_same(_on(c.to(device, non_blocking=True), device), c)
    host = fiamma.zeros(3, 4, dtype=fiamma.float64)
    host.copy_(d)
    assert_same(host, c.double())
    dev = fiamma.zeros(3, 4, dtype=fiamma.int64, device=device)
    dev.copy_(c)
    assert_same(dev, c.long())
    dev[1].copy_(c[0] * 0 + 5)
    assert dev[1].tolist() == [5, 5, 5, 5]


def test_interop(device):
    c, d = _pair(A34, device, fiamma.float32)
    with pytest.raises(TypeError, match=f"can't convert {device}.* device type tensor to numpy. "
                                        "Use Tensor.cpu()"):
        d.numpy()
    with pytest.raises(TypeError, match="Tensor.cpu()"):
        np.asarray(d)
    assert d.tolist() == c.tolist()
    assert d[1, 2].item() == c[1, 2].item()
    assert d.long().sum().item() == c.long().sum().item()
    assert (d > 0).any().item() is True
    assert float(d[0, 0]) == float(c[0, 0]) and int(d[0, 1]) == int(c[0, 1])
    assert d.bfloat16().tolist() == c.bfloat16().tolist()


def test_repr(device):
    c, d = _pair(A34, device, fiamma.float32)
    r = repr(d)
    assert f"device='{d.device}'" in r
    assert r.replace(f", device='{d.device}'", "") == repr(c)
    assert f"device='{d.device}'" in repr(d.sum()) and f"{d.sum():.1f}" == f"{c.sum():.1f}"
    assert "dtype=fiamma.int64" not in repr(d.long()) and f"device='{d.device}'" in repr(d.long())


def test_cpu_scalar_tensor_goes_with_device(device):
    c, d = _pair(A34, device, fiamma.float32)
    s = fiamma.tensor(2.5)
    assert_same(_on(d * s, device), c * s)
    assert_same(_on(s - d, device), s - c)
    assert_same(_on(fiamma.where(d > 0, s, d), device), fiamma.where(c > 0, s, c))
    assert_same(_on(d.clamp(fiamma.tensor(-1.0), fiamma.tensor(2.0)), device),
                c.clamp(fiamma.tensor(-1.0), fiamma.tensor(2.0)))
    with pytest.raises(RuntimeError, match="same device"):
        d + c
    with pytest.raises(RuntimeError, match="same device"):
        c + d.sum()  # a device scalar does not go with a CPU tensor (PyTorch's rule)


# ---- linalg ------------------------------------------------------------------------------------

SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
GEN = np.array([[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.0, 1.5, 4.0]])
RECT = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]])

LINALG = {
    "inv": lambda L, a, s, r: L.inv(a),
    "det": lambda L, a, s, r: L.det(a),
    "slogdet": lambda L, a, s, r: L.slogdet(a)[1],
    "solve": lambda L, a, s, r: L.solve(a, r),
    "solve_right": lambda L, a, s, r: L.solve(a, r.T.contiguous()[:, :3], left=False),
    "solve_triangular": lambda L, a, s, r: L.solve_triangular(a.triu(), r, upper=True),
    "cholesky": lambda L, a, s, r: L.cholesky(s),
    "cholesky_upper": lambda L, a, s, r: L.cholesky(s, upper=True),
    "qr_r": lambda L, a, s, r: L.qr(r)[1].abs(),
    "svdvals": lambda L, a, s, r: L.svdvals(r),
    "eigvalsh": lambda L, a, s, r: L.eigvalsh(s),
    "pinv": lambda L, a, s, r: L.pinv(r),
    "lstsq": lambda L, a, s, r: L.lstsq(r, a[:, :1]).solution,
    "matrix_norm_fro": lambda L, a, s, r: L.matrix_norm(a),
    "matrix_norm_nuc": lambda L, a, s, r: L.matrix_norm(a, "nuc"),
    "matrix_norm_2": lambda L, a, s, r: L.matrix_norm(a, 2),
    "norm_inf": lambda L, a, s, r: L.norm(a, float("inf")),
    "vector_norm": lambda L, a, s, r: L.vector_norm(r, 3, dim=0),
    "cond": lambda L, a, s, r: L.cond(a),
    "matrix_rank": lambda L, a, s, r: L.matrix_rank(r),
    "matrix_power": lambda L, a, s, r: L.matrix_power(a, 3),
    "matrix_power_neg": lambda L, a, s, r: L.matrix_power(a, -2),
    "multi_dot": lambda L, a, s, r: L.multi_dot([a, s, r]),
    "cross": lambda L, a, s, r: L.cross(a, s),
    "vecdot": lambda L, a, s, r: L.vecdot(a, s),
    "batched_inv": lambda L, a, s, r: L.inv(fiamma.stack([a, s])),
}


@pytest.mark.parametrize("name", sorted(LINALG))
@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64])
def test_linalg(device, name, dt):
    cpu = [fiamma.tensor(m, dtype=dt) for m in (GEN, SPD, RECT)]
    dev = [t.to(device) for t in cpu]
    f = LINALG[name]
    tol = dict(rtol=1e-4, atol=1e-5) if dt is fiamma.float32 else dict(rtol=1e-10, atol=1e-12)
    assert_same(_on(f(fiamma.linalg, *dev), device), f(fiamma.linalg, *cpu), **tol)


def test_linalg_decompositions(device):
    a = fiamma.tensor(GEN).to(device)
    s = fiamma.tensor(SPD).to(device)
    q, r = fiamma.linalg.qr(a)
    assert_same(_on(q @ r, device), fiamma.tensor(GEN), atol=1e-12)
    u, sv, vh = fiamma.linalg.svd(a)
    assert_same(_on((u * sv) @ vh, device), fiamma.tensor(GEN), atol=1e-12)
    w, v = fiamma.linalg.eigh(s)
    assert_same(_on(v @ w.diag() @ v.T, device), fiamma.tensor(SPD), atol=1e-12)
    inv, info = fiamma.linalg.inv_ex(a)
    assert _on(info, device).tolist() == 0 and _on(inv, device).dtype is fiamma.float64


def test_linalg_errors_and_grad(device):
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    sing = fiamma.tensor([[1.0, 2.0], [2.0, 4.0]], device=device)
    with pytest.raises(fiamma.linalg.LinAlgError, match="singular"):
        fiamma.linalg.inv(sing)
    with pytest.raises(fiamma.linalg.LinAlgError):
        fiamma.linalg.cholesky(-fiamma.eye(2, device=device))
    with pytest.raises(RuntimeError, match="same device"):
        fiamma.linalg.solve(fiamma.eye(2, device=device), fiamma.ones(2, 1))
    with pytest.raises(RuntimeError, match="Low precision"):
        fiamma.linalg.inv(fiamma.eye(2, device=device, dtype=fiamma.float16))
    xc = fiamma.tensor(GEN, requires_grad=True)
    xd = fiamma.tensor(GEN).to(device).requires_grad_()
    for x in (xc, xd):
        (fiamma.linalg.inv(x).sum() + fiamma.linalg.det(x)).backward()
    assert_same(_on(xd.grad, device), xc.grad, rtol=1e-10, atol=1e-12)
    assert fiamma.autograd.gradcheck(lambda m: fiamma.linalg.inv(m), (xd.detach().clone()
                                                                      .requires_grad_(),))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_its_gradient(device, approximate):
    pytest.importorskip("fiamma.autograd")  # core's wheel tests run without it
    c, d = _pair(RNG.normal(size=(5, 7)) * 3, device, fiamma.float64)
    assert_same(_on(fiamma.gelu(d, approximate), device), fiamma.gelu(c, approximate),
                rtol=1e-12, atol=1e-12)
    xc, xd = c.clone().requires_grad_(), d.clone().requires_grad_()
    for x in (xc, xd):
        (fiamma.gelu(x, approximate) * x).sum().backward()
    assert_same(_on(xd.grad, device), xc.grad, rtol=1e-12, atol=1e-12)
