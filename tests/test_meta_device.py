"""The meta device: tensors with shapes, strides and dtypes but no data. Results' shapes and
dtypes equal those of the same ops on the CPU; anything that needs values raises naming why;
the default device (``set_default_device``, ``with fiamma.device(...)``) is per thread."""

import threading

import numpy as np
import pytest

import fiamma
import fiamma.nn.functional as F

META = fiamma.device("meta")


def meta_like(t):
    return fiamma.empty(tuple(t.shape), dtype=t.dtype, device="meta")


SHAPE_CASES = {
    "add_broadcast": lambda a, b: a + b[0],
    "mul_scalar": lambda a, b: a * 2.5,
    "matmul": lambda a, b: a @ b.transpose(-1, -2),
    "sum_dim": lambda a, b: a.sum(1, keepdim=True),
    "mean": lambda a, b: a.mean(),
    "amax": lambda a, b: a.amax(-1),
    "softmax": lambda a, b: a.softmax(-1),
    "cat": lambda a, b: fiamma.cat([a, b], 1),
    "stack": lambda a, b: fiamma.stack([a, b]),
    "transpose_contig": lambda a, b: a.transpose(0, 2).contiguous(),
    "where": lambda a, b: fiamma.where(a > b, a, b),
    "cmp_dtype": lambda a, b: a > 0,
    "to_int": lambda a, b: a.to(fiamma.int32),
    "sort": lambda a, b: a.sort(-1)[1],
    "topk": lambda a, b: a.topk(2, -1)[0],
    "cumsum": lambda a, b: a.cumsum(1),
    "index_select": lambda a, b: a.index_select(1, fiamma.tensor([0, 2], device=a.device)),
    "gather": lambda a, b: a.gather(2, fiamma.zeros(2, 3, 1, dtype=fiamma.int64,
                                                    device=a.device)),
    "getitem": lambda a, b: a[:, 1:, ::2],
    "layer_norm": lambda a, b: F.layer_norm(a, (4,)),
    "gelu": lambda a, b: F.gelu(a),
    "conv1d": lambda a, b: F.conv1d(a, fiamma.ones(5, 3, 2, device=a.device)),
    "max_pool": lambda a, b: F.max_pool1d(a, 2),
    "sdpa": lambda a, b: F.scaled_dot_product_attention(a, b, b),
}


@pytest.mark.parametrize("name", sorted(SHAPE_CASES))
def test_shapes_and_dtypes_match_the_cpu(name):
    rng = np.random.default_rng(0)
    a = fiamma.tensor(rng.standard_normal((2, 3, 4)), dtype=fiamma.float32)
    b = fiamma.tensor(rng.standard_normal((2, 3, 4)), dtype=fiamma.float32)
    ref = SHAPE_CASES[name](a, b)
    got = SHAPE_CASES[name](a.to("meta"), b.to("meta"))
    assert got.device == META
    assert tuple(got.shape) == tuple(ref.shape) and got.dtype == ref.dtype


def _spd(a):
    return a @ a.mT + 4 * fiamma.eye(a.shape[-1], device=a.device)


L = fiamma.linalg
# linear algebra, fft and complex arithmetic compute on the host or through an array module:
# on meta they give results of the CPU's shapes and dtypes without running anything
NUMERIC_CASES = {
    "inv": lambda a: L.inv(_spd(a)),
    "det": lambda a: L.det(a),
    "slogdet": lambda a: L.slogdet(a),
    "svd": lambda a: L.svd(a[:, :3]),
    "svd_reduced": lambda a: L.svd(a[:, :3], full_matrices=False),
    "eigh": lambda a: L.eigh(_spd(a)),
    "eig": lambda a: L.eig(a),
    "qr_complete": lambda a: L.qr(a[:, :3], mode="complete"),
    "cholesky": lambda a: L.cholesky(_spd(a)),
    "cholesky_ex": lambda a: L.cholesky_ex(_spd(a)),
    "solve": lambda a: L.solve(_spd(a), a[..., :2]),
    "lstsq": lambda a: L.lstsq(a, a[..., :1]),
    "pinv": lambda a: L.pinv(a[:, :3]),
    "matrix_rank": lambda a: L.matrix_rank(a),
    "lu": lambda a: L.lu(a[:, :3]),
    "lu_solve": lambda a: L.lu_solve(*L.lu_factor(_spd(a)), a),
    "lu_unpack": lambda a: fiamma.lu_unpack(*L.lu_factor(_spd(a))),
    "ldl_solve": lambda a: L.ldl_solve(*L.ldl_factor(_spd(a)), a),
    "matrix_exp": lambda a: L.matrix_exp(a),
    "matrix_norm_2": lambda a: L.matrix_norm(a, 2),
    "solve_triangular": lambda a: L.solve_triangular(_spd(a), a, upper=True),
    "geqrf": lambda a: fiamma.geqrf(a[:, :3]),
    "ormqr": lambda a: fiamma.ormqr(*fiamma.geqrf(a[:, :, :2]), a),
    "rfft": lambda a: fiamma.fft.rfft(a),
    "irfft_n": lambda a: fiamma.fft.irfft(a, n=7),
    "fft2_s": lambda a: fiamma.fft.fft2(a, s=(3, 9)),
    "rfftn_dims": lambda a: fiamma.fft.rfftn(a, dim=(0, 2)),
    "irfftn": lambda a: fiamma.fft.irfftn(a.to(fiamma.complex64)),
    "hfft": lambda a: fiamma.fft.hfft(a),
    "ihfft": lambda a: fiamma.fft.ihfft(a, dim=1),
    "ifft_complex": lambda a: fiamma.fft.ifft(a.to(fiamma.complex128), n=3),
    "complex_abs": lambda a: fiamma.fft.fft(a).abs(),
    "complex_mul_sum": lambda a: (fiamma.fft.fft(a) * 1j).sum(1),
    "complex_matmul": lambda a: fiamma.fft.fft(a) @ fiamma.fft.fft(a).mT,
    "complex_cumprod": lambda a: fiamma.fft.fft(a).cumprod(0),
    "complex_where": lambda a: fiamma.where(a > 0, fiamma.fft.fft(a), 0),
}


@pytest.mark.parametrize("name", sorted(NUMERIC_CASES))
def test_numeric_ops_on_meta_give_the_cpu_shapes(name):
    a = fiamma.tensor(np.random.default_rng(1).standard_normal((2, 4, 4)), dtype=fiamma.float32)
    ref, got = NUMERIC_CASES[name](a), NUMERIC_CASES[name](a.to("meta"))
    refs, gots = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
    assert len(refs) == len(gots)
    for r, g in zip(refs, gots):
        assert g.device == META, name
        assert (tuple(g.shape), g.dtype) == (tuple(r.shape), r.dtype), name


def test_orthogonal_init_on_meta():
    import fiamma.nn as nn

    with fiamma.device("meta"):
        lin = nn.Linear(8, 4)
        nn.init.orthogonal_(lin.weight)
        lstm = nn.LSTM(4, 6)
        for w in (lstm.weight_hh_l0, lstm.weight_ih_l0):
            nn.init.orthogonal_(w)
    assert lin.weight.device == META and tuple(lstm.weight_hh_l0.shape) == (24, 6)


def test_creation_and_repr():
    x = fiamma.empty(2, 3, device="meta")
    assert x.is_meta and x.data_ptr() == 0 and x.stride() == (3, 1)
    assert repr(x) == "tensor(..., device='meta', size=(2, 3))"
    i = fiamma.zeros(2, dtype=fiamma.int64, device="meta")
    assert repr(i) == "tensor(..., device='meta', size=(2,), dtype=fiamma.int64)"
    r = fiamma.randn((), device="meta", requires_grad=True)
    assert repr(r) == "tensor(..., device='meta', size=(), requires_grad=True)"
    for t in (fiamma.ones(4, device="meta"), fiamma.arange(5, device="meta"),
              fiamma.tensor([1.0, 2.0], device="meta"), fiamma.full((2,), 3, device="meta"),
              fiamma.empty_like(x), fiamma.zeros_like(fiamma.ones(3), device="meta"),
              x.new_zeros(5), fiamma.eye(3, device="meta"), fiamma.rand(3, device="meta"),
              fiamma.randint(0, 5, (3,), device="meta")):
        assert t.device == META
    # distinct tensors never look like aliases of each other
    y = fiamma.empty(2, 3, device="meta")
    assert x._ptr != y._ptr


def test_values_are_refused_naming_why():
    x = fiamma.ones(3, device="meta")
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        x.cpu()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        x.tolist()
    with pytest.raises(RuntimeError, match="cannot be called on meta tensors"):
        x.sum().item()
    with pytest.raises(RuntimeError, match="cannot be called on meta tensors"):
        bool(x.sum() > 0)
    with pytest.raises(TypeError, match="meta"):
        x.numpy()
    with pytest.raises(NotImplementedError, match="nonzero"):
        fiamma.nonzero(x)
    with pytest.raises(NotImplementedError, match="nonzero|masked"):
        x[x > 0]
    with pytest.raises(NotImplementedError, match="unique"):
        x.unique()
    with pytest.raises(NotImplementedError, match="no data"):
        (fiamma.empty(3, dtype=fiamma.complex64, device="meta") * 2).tolist()


def test_copies_into_meta_are_no_ops_and_mixing_devices_fails():
    x = fiamma.zeros(3, device="meta")
    x.copy_(fiamma.ones(3))
    assert x.device == META and fiamma.ones(3).to("meta").device == META
    with pytest.raises(RuntimeError, match="meta"):
        fiamma.ones(3) + x


def test_random_draws_on_meta_leave_the_generator_alone():
    fiamma.manual_seed(7)
    fiamma.randn(1000, device="meta")
    fiamma.empty(10, device="meta").uniform_()
    fiamma.randint(0, 9, (100,), device="meta")
    a = fiamma.randn(3)
    fiamma.manual_seed(7)
    assert np.array_equal(a.numpy(), fiamma.randn(3).numpy())


def test_autograd_on_meta():
    w = fiamma.empty(4, 3, device="meta", requires_grad=True)
    x = fiamma.empty(5, 3, device="meta")
    (x @ w.t()).relu().sum().backward()
    assert w.grad.device == META and tuple(w.grad.shape) == (4, 3)


def test_default_device_is_per_thread_and_restored():
    assert fiamma.get_default_device().type == "cpu"
    seen = []
    with fiamma.device("meta"):
        th = threading.Thread(target=lambda: seen.append(fiamma.zeros(1).device))
        th.start()
        th.join()
        assert fiamma.zeros(1).device == META and fiamma.get_default_device() == META
        assert fiamma.zeros(1, device="cpu").device.type == "cpu"  # explicit wins
        assert fiamma.hann_window(4).device == META
        assert fiamma.fft.fftfreq(4).device == META
        assert fiamma.tril_indices(3, 3).device == META
    assert seen == [fiamma.device("cpu")]
    assert fiamma.zeros(1).device.type == "cpu"
    fiamma.set_default_device("meta")
    try:
        assert fiamma.randn(2).device == META and fiamma.arange(3).device == META
    finally:
        fiamma.set_default_device(None)
    assert fiamma.arange(3).device.type == "cpu"


def test_module_built_on_meta_then_to_empty_and_assign():
    nn = fiamma.nn
    with fiamma.device("meta"):
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 5))
    assert all(p.device == META for p in m.parameters())
    assert m[1].running_mean.device == META
    y = m(fiamma.empty(2, 3, 8, 8, device="meta"))
    assert tuple(y.shape) == (2, 5) and y.device == META

    src = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                        nn.Linear(4 * 6 * 6, 5))
    m.load_state_dict(src.state_dict(), assign=True)
    assert all(p.device.type == "cpu" for p in m.parameters())
    assert all(isinstance(p, nn.Parameter) for p in m.parameters())
    x = fiamma.randn(2, 3, 8, 8)
    m.eval()
    src.eval()
    assert np.array_equal(m(x).detach().numpy(), src(x).detach().numpy())

    with fiamma.device("meta"):
        e = nn.Linear(3, 2)
    assert e.to_empty(device="cpu") is e
    assert e.weight.device.type == "cpu" and tuple(e.weight.shape) == (2, 3)
    assert isinstance(e.weight, nn.Parameter) and e.weight.requires_grad
    with fiamma.no_grad():
        e.weight.fill_(1.0)
        e.bias.zero_()
    assert e(fiamma.ones(1, 3)).tolist() == [[3.0, 3.0]]


def test_to_empty_recurse_false_touches_only_own_tensors():
    nn = fiamma.nn
    with fiamma.device("meta"):
        outer = nn.Module()
        outer.w = nn.Parameter(fiamma.empty(2))
        outer.inner = nn.Linear(2, 2)
    outer.to_empty(device="cpu", recurse=False)
    assert outer.w.device.type == "cpu" and outer.inner.weight.device == META


def test_torchvision_resnet50_shapes_on_meta():
    models = pytest.importorskip("fiamma.vision.models")
    with fiamma.device("meta"):
        m = models.resnet50()
    out = m(fiamma.empty(2, 3, 224, 224, device="meta"))
    assert tuple(out.shape) == (2, 1000) and out.device == META
    out.sum().backward()
    assert m.conv1.weight.grad.device == META
    fiamma.optim.SGD(m.parameters(), lr=0.1, momentum=0.9).step()
