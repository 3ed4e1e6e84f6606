"""The cuda backend's cuDNN convolutions (fiamma/_backend/xp/cudnn.py, cudnn_api.py).

Device tests (``device`` fixture): forward, input and weight gradients of 1-3-d convolutions
(groups and depthwise, stride, padding, dilation, bias or none, non-contiguous inputs,
transposed ones, batch 0) in float32 (TF32 off, and on with a loose tolerance), float64,
bfloat16 and float16 against float64 results of the CPU on the same (rounded) inputs, each
served by cuDNN (``fast_path_calls``) without errors. They run where the device's backend has
the cuDNN path and a libcudnn: cuda on a GPU (benchmarks/gpu/run.sh), or the CPU emulation
(tools/cuda_emu: FIAMMA_TEST_DEVICES=xp with ``-p fiamma_cuda_emu``, whose fake libcudnn
computes reference convolutions); skipped elsewhere, with the reason.

The pure-Python parts (library discovery, the honest ``fiamma.backends.cudnn`` queries, the
geometry check and the plan cache) run on any machine; the plan cache and the ctypes calls
also against tools/cuda_emu/fake_cudnn.c built here when a C compiler and the repository's
tools/ are at hand.
"""

import os
import shutil
import subprocess

import numpy as np
import pytest
from _cuda_helpers import backend_with
from conftest import assert_same

import fiamma
from fiamma._backend import codes as K
from fiamma._backend.xp import cudnn as CD, cudnn_api as L

cudnn_flags = fiamma.backends.cudnn
FAKE_SRC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools", "cuda_emu",
                        "fake_cudnn.c")


@pytest.fixture
def be(device):
    b = backend_with(device, "cudnn_ready", "cuDNN path")
    if not b.cudnn_ready():
        pytest.skip(f"cuDNN is not available on {device}: {b.cudnn_reason()}")
    return b


def _calls(b):
    return {m: b.fast_path_calls.get(m, 0) for m in ("cudnn_fwd", "cudnn_bwd_data",
                                                       "cudnn_bwd_weight")}


def _no_errors(b):
    errs = {k: v for k, v in b.fast_path_errors.items() if k.startswith("cudnn")}
    assert not errs, errs


def _assert_served(b, before, declined, modes=("cudnn_fwd", "cudnn_bwd_data",
                                               "cudnn_bwd_weight")):
    """Each mode was served by cuDNN since ``before``, or cuDNN declined a configuration
    (NOT_SUPPORTED: a limitation of cuDNN, recorded in ``cudnn_declined``, printed here)."""
    after = _calls(b)
    missed = [m for m in modes if after[m] <= before[m]]
    if missed:
        new = {k: v for k, v in b.cudnn_declined.items() if k not in declined}
        assert new, (missed, before, after)
        print("cuDNN declined:", new)


# (rtol, atol) of a device result against float64 on the same inputs, values ~ U(-1, 1)
TOL = {"float64": (1e-9, 1e-9), "float32": (2e-4, 2e-4), "tf32": (2e-2, 2e-2),
       "bfloat16": (3e-2, 6e-2), "float16": (4e-3, 1e-2)}
DTYPES = {"float64": fiamma.float64, "float32": fiamma.float32, "tf32": fiamma.float32,
          "bfloat16": fiamma.bfloat16, "float16": fiamma.float16}

# nd, n, cin, cout, groups, kernel, stride, padding, dilation, bias
CASES = [
    (1, 2, 4, 6, 1, 3, 2, 1, 1, True),
    (1, 3, 4, 4, 4, 3, 1, 2, 2, False),            # depthwise
    (2, 2, 3, 5, 1, 3, 1, 1, 1, True),
    (2, 2, 4, 8, 2, (3, 2), (2, 1), (1, 0), (1, 2), False),
    (2, 2, 6, 6, 6, 3, 2, 1, 1, True),             # depthwise, strided
    (2, 2, 8, 4, 1, 1, 1, 0, 1, True),             # 1x1
    (3, 1, 2, 4, 1, 3, (1, 2, 1), 1, 1, True),
    (3, 2, 4, 4, 2, 2, 1, 0, (2, 1, 1), False),
]


def _rand(shape, seed, dtype):
    a = np.random.default_rng(seed).uniform(-1, 1, shape)
    return fiamma.from_numpy(a).to(dtype)


def _size(v, nd):
    return (v,) * nd if isinstance(v, int) else tuple(v)


def _conv_fn(nd):
    return {1: fiamma.conv1d, 2: fiamma.conv2d, 3: fiamma.conv3d}[nd]


def _check(got, want64, kind):
    rtol, atol = TOL[kind]
    assert got.dtype == DTYPES[kind], (got.dtype, kind)
    np.testing.assert_allclose(got.detach().cpu().double().numpy(), want64.detach().numpy(),
                               rtol=rtol, atol=atol)


@pytest.mark.parametrize("kind", list(TOL))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}d-g{c[4]}-b{int(c[9])}")
def test_conv_forward_and_gradients(device, be, kind, case):
    nd, n, cin, cout, groups, k, s, p, d, has_bias = case
    dt = DTYPES[kind]
    k = _size(k, nd)
    big = (7, 6, 5)[:nd] if nd < 3 else (5, 6, 4)
    x = _rand((n, cin) + big, 1, dt)
    w = _rand((cout, cin // groups) + k, 2, dt)
    b = _rand((cout,), 3, dt) if has_bias else None
    conv = _conv_fn(nd)
    kw = dict(stride=s, padding=p, dilation=d, groups=groups)
    # float64 on the CPU from the same rounded inputs
    x64 = x.double().clone().requires_grad_()
    w64 = w.double().clone().requires_grad_()
    ref = conv(x64, w64, None if b is None else b.double(), **kw)
    g = _rand(tuple(ref.shape), 4, dt)
    ref.backward(g.double())
    xd, wd = x.to(device).requires_grad_(), w.to(device).requires_grad_()
    before, declined = _calls(be), dict(be.cudnn_declined)
    with cudnn_flags.flags(enabled=True, allow_tf32=kind == "tf32"):
        got = conv(xd, wd, None if b is None else b.to(device), **kw)
        got.backward(g.to(device))
    _no_errors(be)
    _assert_served(be, before, declined)
    _check(got, ref, kind)
    _check(xd.grad, x64.grad, kind)
    _check(wd.grad, w64.grad, kind)


@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
def test_non_contiguous_inputs(device, be, kind):
    dt = DTYPES[kind]
    xs, ws, bs = _rand((2, 6, 9, 12), 5, dt), _rand((4, 3, 2, 3), 6, dt), _rand((8,), 7, dt)
    x, w, b = xs[:, ::2, :, ::2], ws.transpose(2, 3), bs[::2]
    ref = fiamma.conv2d(x.double(), w.double(), b.double(), padding=1)
    # strided channels and width, a transposed kernel, a strided bias: views on the device
    xd, wd, bd = xs.to(device)[:, ::2, :, ::2], ws.to(device).transpose(2, 3), bs.to(device)[::2]
    assert not xd.is_contiguous() and not wd.is_contiguous() and not bd.is_contiguous()
    before, declined = _calls(be), dict(be.cudnn_declined)
    with cudnn_flags.flags(enabled=True, allow_tf32=False):
        got = fiamma.conv2d(xd, wd, bd, padding=1)
    _assert_served(be, before, declined, ["cudnn_fwd"])
    _no_errors(be)
    _check(got, ref, kind)


@pytest.mark.parametrize("kind", ["float32", "bfloat16", "float16"])
def test_conv_transpose(device, be, kind):
    dt = DTYPES[kind]
    x = _rand((2, 4, 5, 4), 8, dt)
    w = _rand((4, 3, 3, 3), 9, dt)
    b = _rand((3,), 10, dt)
    with cudnn_flags.flags(enabled=True, allow_tf32=False):
        # output_padding < stride: cuDNN's data gradient
        ref = fiamma.conv_transpose2d(x.double(), w.double(), b.double(), stride=2, padding=1,
                                      output_padding=1)
        before, declined = _calls(be), dict(be.cudnn_declined)
        got = fiamma.conv_transpose2d(x.to(device), w.to(device), b.to(device), stride=2,
                                      padding=1, output_padding=1)
        _assert_served(be, before, declined, ["cudnn_bwd_data"])
        _check(got, ref, kind)
        # output_padding >= stride (allowed as < dilation): no forward convolution has this
        # input size, so cuDNN can't describe it and the generic code serves
        ref = fiamma.conv_transpose2d(x.double(), w.double(), b.double(), dilation=2,
                                      output_padding=1)
        got = fiamma.conv_transpose2d(x.to(device), w.to(device), b.to(device), dilation=2,
                                      output_padding=1)
        _check(got, ref, kind)
    _no_errors(be)


@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
def test_batch_zero(device, be, kind):
    dt = DTYPES[kind]
    x = fiamma.zeros(0, 3, 5, 5, dtype=dt).to(device).requires_grad_()
    w = _rand((4, 3, 3, 3), 11, dt).to(device).requires_grad_()
    y = fiamma.conv2d(x, w, padding=1)
    assert tuple(y.shape) == (0, 4, 5, 5) and y.dtype == dt
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 5, 5)
    assert_same(w.grad, fiamma.zeros(4, 3, 3, 3, dtype=dt))


def test_flags_disable_and_choose(device, be):
    x = _rand((2, 3, 6, 6), 12, fiamma.float32)
    w = _rand((5, 3, 3, 3), 13, fiamma.float32)
    ref = fiamma.conv2d(x.double(), w.double())
    before = _calls(be)
    with cudnn_flags.flags(enabled=False):
        got = fiamma.conv2d(x.to(device), w.to(device))
        assert not be.conv_native(fiamma.bfloat16)
    assert _calls(be) == before
    _check(got, ref, "float32")
    for opts in ({"deterministic": True}, {"benchmark": True}):
        with cudnn_flags.flags(enabled=True, allow_tf32=False, **opts):
            got = fiamma.conv2d(x.to(device), w.to(device))
        _check(got, ref, "float32")
    assert _calls(be)["cudnn_fwd"] == before["cudnn_fwd"] + 2
    _no_errors(be)
    plans = [p for p in be.cudnn_plans() if p.get("plan", 1) is not None]
    assert plans and all(isinstance(p["algo"], (str, int)) for p in plans)


def test_autocast_bf16_conv_stays_bf16(device, be):
    if fiamma.device(device).type != "cuda":
        pytest.skip(f"autocast has no {device} device type")
    x = _rand((2, 3, 6, 6), 14, fiamma.float32).to(device)
    w = _rand((4, 3, 3, 3), 15, fiamma.float32).to(device)
    before, declined = _calls(be), dict(be.cudnn_declined)
    with fiamma.autocast(device_type="cuda", dtype=fiamma.bfloat16):
        y = fiamma.conv2d(x, w, padding=1)
    assert y.dtype == fiamma.bfloat16
    _assert_served(be, before, declined, ["cudnn_fwd"])
    ref = fiamma.conv2d(x.cpu().bfloat16().double(), w.cpu().bfloat16().double(), padding=1)
    _check(y, ref, "bfloat16")


# ---- pure Python: discovery, the flags module, the geometry check -------------------------

def test_discovery_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        lib = root / "nvidia" / "cudnn" / "lib"
        lib.mkdir(parents=True)
        (lib / "libcudnn.so.9").write_bytes(b"")
    got = L.candidates({}, [str(a), str(tmp_path / "missing"), str(b), str(a)])
    assert got[:3] == [("site-packages", str(a / "nvidia/cudnn/lib/libcudnn.so.9")),
                       ("site-packages", str(b / "nvidia/cudnn/lib/libcudnn.so.9")),
                       ("loader", "libcudnn.so.9")]
    assert all(w == "find_library" for w, _ in got[3:])
    # the environment variable wins alone; "none" turns cuDNN off
    assert L.candidates({"FIAMMA_CUDNN_LIB": "/opt/x/libcudnn.so.9"}, [str(a)]) == [
        ("FIAMMA_CUDNN_LIB", "/opt/x/libcudnn.so.9")]
    assert L.candidates({"FIAMMA_CUDNN_LIB": "none"}, [str(a)]) == []


def test_load_reports_every_candidate(tmp_path):
    bad = tmp_path / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a library")
    lib, why = L.load({"FIAMMA_CUDNN_LIB": str(tmp_path / "nope.so")})
    assert lib is None and "nope.so" in why and "FIAMMA_CUDNN_LIB" in why
    lib, why = L.load({"FIAMMA_CUDNN_LIB": "off"})
    assert lib is None and "turned off" in why


def test_backends_cudnn_is_honest(monkeypatch, tmp_path):
    monkeypatch.setenv("FIAMMA_CUDNN_LIB", str(tmp_path / "no-libcudnn.so.9"))
    L._reset()
    try:
        assert cudnn_flags.is_available() is False
        assert cudnn_flags.version() is None
        assert "no-libcudnn" in L.reason()
        assert cudnn_flags.is_acceptable(fiamma.ones(2)) is False
    finally:
        L._reset()


def test_geometry_ok():
    # nd, n, cb, cs, groups, big, small, k, stride, pad, dil
    assert CD.geometry_ok(2, 2, 4, 6, 2, (7, 6), (4, 6), (3, 3), (2, 1), (1, 1), (1, 1))
    # a transposed convolution's output_padding 1 at stride 1: big is one larger than any
    # forward input of small
    assert not CD.geometry_ok(2, 1, 3, 4, 1, (10, 10), (5, 5), (3, 3), (1, 1), (0, 0), (2, 2))
    assert not CD.geometry_ok(1, 1 << 20, 4096, 4, 1, (1024,), (1024,), (1,), (1,), (0,), (1,))


# ---- the binding against the fake libcudnn, on this machine ------------------------------

@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None or not os.path.isfile(FAKE_SRC):
        pytest.skip("needs a C compiler and the repository's tools/cuda_emu/fake_cudnn.c")
    so = str(tmp_path_factory.mktemp("cudnn") / "libfake_cudnn.so")
    r = subprocess.run([cc, "-O1", "-std=c11", "-shared", "-fPIC", "-o", so, FAKE_SRC],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"fake_cudnn.c did not build: {r.stderr[-400:]}")
    return L.Library(so)


@pytest.fixture
def fake_be(fake_lib):
    from fiamma._backend.xp import XpBackend

    class FakeCudnnBackend(CD.CudnnConvMixin, XpBackend):
        def _cudnn_load(self):
            return fake_lib, None

    b = FakeCudnnBackend(np, "xp")
    b.fast_path_calls, b.fast_path_errors = {}, {}
    b._cudnn_init()
    assert b.cudnn_ready(), b.cudnn_reason()
    return b


def _direct(b, dt, stride=(1, 1)):
    """A forward convolution through ``b.conv`` on xp tensors (what _ops.conv passes)."""
    x = _rand((2, 4, 6, 5), 20, dt).to("xp")
    w = _rand((6, 2, 3, 3), 21, dt).to("xp")
    bias = _rand((6,), 22, dt).to("xp")
    small = tuple((v + 2 - 3) // s + 1 for v, s in zip((6, 5), stride))
    out = fiamma.empty((2, 6) + small, dtype=dt, device="xp")
    assert b.conv(K.CONV_FWD, 2, 2, 4, 6, 2, (6, 5), small, (3, 3), stride, (1, 1), (1, 1),
                  x, w, bias, out) == 0
    ref = fiamma.conv2d(x.cpu().double(), w.cpu().double(), bias.cpu().double(), stride=stride,
                        padding=1, groups=2)
    return out, ref


def test_fake_library_version_and_plan_cache(fake_be):
    assert fake_be._cudnn.version == 90100
    out, ref = _direct(fake_be, fiamma.float32)
    _check(out, ref, "float32")
    assert fake_be.fast_path_calls == {"cudnn_fwd": 1}
    assert len(fake_be._cudnn_plans) == 1
    _direct(fake_be, fiamma.float32)                 # the same geometry: the same plan
    assert len(fake_be._cudnn_plans) == 1
    _direct(fake_be, fiamma.float32, stride=(2, 1))  # another stride: another plan
    with cudnn_flags.flags(enabled=True, allow_tf32=False):
        _direct(fake_be, fiamma.float32)             # another math mode: another plan
    out, ref = _direct(fake_be, fiamma.bfloat16)     # another dtype: another plan
    _check(out, ref, "bfloat16")
    keys = list(fake_be._cudnn_plans)
    assert len(keys) == 4 and len(set(keys)) == 4
    assert fake_be.fast_path_calls == {"cudnn_fwd": 5}
    assert not fake_be.fast_path_errors
    plans = fake_be.cudnn_plans()
    assert {p["dtype"] for p in plans} == {"float32", "bfloat16"}
    assert all(p["algo"] == "IMPLICIT_PRECOMP_GEMM" and p["workspace"] > 0 for p in plans)


def test_fake_library_workspace_kept_per_stream(fake_be):
    """The convolutions' workspace is one buffer per (device, stream), reused by later calls
    (no allocation per call) and replaced only by a larger one when a plan needs more."""
    out, ref = _direct(fake_be, fiamma.float32)
    _check(out, ref, "float32")
    (key, ws), = fake_be._cudnn_ws.items()
    need = max(p["workspace"] for p in fake_be.cudnn_plans())
    assert ws[1] == need > 0
    for _ in range(3):
        out, ref = _direct(fake_be, fiamma.float32)
        _check(out, ref, "float32")
    assert fake_be._cudnn_ws[key] is ws  # the same buffer, not a new one per call
    small = ws[1]
    fake_be._cudnn_ws[key] = (ws[0][: small // 2], small // 2, ws[2])  # pretend a smaller one
    out, ref = _direct(fake_be, fiamma.float32)
    _check(out, ref, "float32")
    assert fake_be._cudnn_ws[key][1] == small  # grown to the plan's size
    assert fake_be._cudnn_ws[key][0] is not ws[0]
    assert not fake_be.fast_path_errors


@pytest.mark.parametrize("status", [2000, 3000])
def test_fake_library_failure_falls_back(fake_be, status):
    # a call the library refuses is recorded (an error, or a configuration cuDNN does not
    # support), that geometry stays on the generic path, and the result is still right
    fake_be._cudnn_flags = type("F", (), {"enabled": True, "allow_tf32": True,
                                          "deterministic": True, "benchmark": False})
    real_fn = fake_be._cudnn.ConvolutionForward
    try:
        fake_be._cudnn.ConvolutionForward = lambda *a: status
        out, ref = _direct(fake_be, fiamma.float32)
    finally:
        fake_be._cudnn.ConvolutionForward = real_fn
    _check(out, ref, "float32")
    assert fake_be.fast_path_calls.get("cudnn_fwd", 0) == 0
    assert list(fake_be._cudnn_plans.values()) == [None]
    if status == 2000:
        assert "CUDNN_STATUS_BAD_PARAM" in fake_be.fast_path_errors["cudnn_fwd"]
        assert not fake_be.cudnn_declined
    else:
        assert not fake_be.fast_path_errors
        assert "CUDNN_STATUS_NOT_SUPPORTED" in list(fake_be.cudnn_declined.values())[0]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fake_library_bias_without_add_tensor(fake_be, dtype):
    # a cuDNN that refuses cudnnAddTensor for a dtype: the bias is added by the array module,
    # the convolution stays on cuDNN
    real_fn = fake_be._cudnn.AddTensor
    try:
        fake_be._cudnn.AddTensor = lambda *a: 3000  # CUDNN_STATUS_NOT_SUPPORTED
        for _ in range(2):
            out, ref = _direct(fake_be, DTYPES[dtype])
            _check(out, ref, dtype)
    finally:
        fake_be._cudnn.AddTensor = real_fn
    assert fake_be.fast_path_calls == {"cudnn_fwd": 2} and not fake_be.fast_path_errors
    assert list(fake_be.cudnn_declined) == [("cudnnAddTensor", dtype)]
