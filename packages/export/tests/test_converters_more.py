"""Fold/Unfold, grid_sample, roll, EmbeddingBag, linalg and fft: ONNX Runtime (and the
fiamma.jit runner) against eager, each file through check_model(full_check=True)."""

import io
import warnings

import numpy as np
import pytest
from models import randn

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.jit  # noqa: E402
import fiamma.onnx  # noqa: E402

FF = fiamma.fft


def _complex(z):
    """A transform's result as a complex tensor: fiamma.fft of a real input gives (real, imag)
    pairs or, once complex results land, a complex tensor; the tests hold for both."""
    return z if z.dtype.is_complex else fiamma.view_as_complex(z)


def _real(z):
    return z.real if z.dtype.is_complex else z[..., 0]


def _np(t):
    """What the file holds for a tensor: a complex one as (real, imag) pairs."""
    a = t.detach().numpy()
    return np.stack([a.real, a.imag], -1) if np.iscomplexobj(a) else a


def _outs(fn, args):
    with fiamma.no_grad():
        r = fn(*args)
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _close(got, want, rtol=1e-4):
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = np.abs(want).max() + 1e-12 if want.size else 1.0
    assert np.abs(got - want).max() <= rtol * scale, (np.abs(got - want).max(), scale)


def check(fn, args, opset=None, runs=(), **kw):
    """Export at ``opset``; ORT and the traced module equal eager on ``args`` and ``runs``."""
    if isinstance(fn, nn.Module):
        fn.eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", fiamma.jit.TracerWarning)
        fiamma.onnx.export(fn, args, buf, opset_version=opset, **kw)
    model = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    tm = fiamma.jit.trace(fn, args)
    for a in (args,) + tuple(runs):
        want = _outs(fn, a)
        got = sess.run(None, {i.name: _np(x) for i, x in zip(sess.get_inputs(), a)})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, _np(w))
        for g, w in zip(_outs(tm, a), want):
            _close(_np(g), _np(w), 1e-5)
    return model


OPSETS = [17, None]  # the oldest supported and the newest the installed onnx knows


# ---- Fold / Unfold / grid_sample / roll -----------------------------------------------------

@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", ["plain", "stride_pad", "dilation", "unbatched"])
def test_fold(case, opset):
    """nn.Fold: Col2Im from opset 18, a one-hot ConvTranspose at 17."""
    cfg = {"plain": ((2, 12, 9), dict(output_size=(4, 4), kernel_size=2)),
           "stride_pad": ((2, 12, 9), dict(output_size=(5, 5), kernel_size=2, stride=2,
                                           padding=1)),
           "dilation": ((1, 12, 20), dict(output_size=(6, 7), kernel_size=2, dilation=2)),
           "unbatched": ((12, 9), dict(output_size=(4, 4), kernel_size=2))}[case]
    check(nn.Fold(**cfg[1]), (randn(*cfg[0]),), opset)


@pytest.mark.parametrize("opset", OPSETS)
def test_unfold_then_fold_round_trip(opset):
    def f(x):
        cols = F.unfold(x, 3, padding=1, stride=2)
        return F.fold(cols * 2, (7, 7), 3, padding=1, stride=2)

    check(f, (randn(2, 3, 7, 7),), opset)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding_mode, align_corners):
    grid = fiamma.rand(2, 5, 4, 2, generator=fiamma.Generator().manual_seed(3)) * 2.4 - 1.2

    def f(x, g):
        return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode,
                             align_corners=align_corners)

    # opset 17 spells the modes bilinear/bicubic, opset 20+ linear/cubic
    check(f, (randn(2, 3, 6, 7), grid), 17 if padding_mode == "border" else None)


def test_grid_sample_affine_grid_dynamic_batch():
    class STN(nn.Module):
        def __init__(self):
            super().__init__()
            self.theta = nn.Linear(12, 6)

        def forward(self, x):
            t = self.theta(x.mean(dim=(2, 3)).repeat(1, 4)).view(-1, 2, 3)
            g = F.affine_grid(t, list(x.shape), align_corners=False)
            return F.grid_sample(x, g, align_corners=False)

    check(STN(), (randn(2, 3, 5, 5),), runs=[(randn(4, 3, 5, 5, seed=1),)],
          dynamic_axes={"input_0": {0: "b"}, "output_0": {0: "b"}})


@pytest.mark.parametrize("opset", OPSETS)
def test_roll(opset):
    check(lambda x: fiamma.roll(x, (1, -2), (1, 3)) + fiamma.roll(x, 7), (randn(2, 3, 4, 5),),
          opset)


def test_roll_follows_a_dynamic_axis():
    check(lambda x: fiamma.roll(x, 2, 0), (randn(5, 3),), runs=[(randn(8, 3, seed=1),)],
          dynamic_axes={"input_0": [0], "output_0": [0]})


# ---- EmbeddingBag ---------------------------------------------------------------------------

IDS = fiamma.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
OFFSETS = fiamma.tensor([0, 4, 4, 7])  # bag 1 is empty


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_offsets(mode, opset):
    """Other index counts and offsets at run time: the bags are computed in the file."""
    eb = nn.EmbeddingBag(10, 4, mode=mode)
    check(eb, (IDS, OFFSETS), opset,
          runs=[(fiamma.tensor([3, 3, 1, 0, 8, 7, 6, 5, 4, 2, 1, 9]),
                 fiamma.tensor([0, 1, 5, 5, 11]))],
          dynamic_axes={"input_0": [0], "input_1": [0], "output_0": [0]})


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_padding_idx_and_last_offset(mode):
    eb = nn.EmbeddingBag(10, 4, mode=mode, padding_idx=2)
    check(eb, (IDS, OFFSETS))
    eb = nn.EmbeddingBag(10, 4, mode=mode, include_last_offset=True)
    check(eb, (IDS, fiamma.tensor([0, 3, 3, 8])))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d(mode):
    eb = nn.EmbeddingBag(10, 4, mode=mode)
    check(eb, (fiamma.randint(0, 10, (3, 5)),), runs=[(fiamma.randint(0, 10, (6, 2)),)],
          dynamic_axes={"input_0": [0, 1], "output_0": [0]})


def test_embedding_bag_per_sample_weights():
    eb = nn.EmbeddingBag(10, 4, mode="sum")
    check(lambda i, o, w: eb(i, o, per_sample_weights=w), (IDS, OFFSETS, fiamma.rand(9)))
    check(lambda i, w: eb(i, per_sample_weights=w),
          (fiamma.randint(0, 10, (3, 5)), fiamma.rand(3, 5)))


def test_embedding_bag_trace_follows_offsets():
    """The eager op computes each index's bag outside the recorded ops: the trace records it
    as one op, so a traced module saved and loaded runs other offsets."""
    eb = nn.EmbeddingBag(10, 4, mode="mean").eval()
    tm = fiamma.jit.trace(eb, (IDS, OFFSETS))
    buf = io.BytesIO()
    tm.save(buf)
    buf.seek(0)
    loaded = fiamma.jit.load(buf)
    ids, off = fiamma.tensor([5, 6, 7, 1]), fiamma.tensor([0, 3])
    np.testing.assert_allclose(loaded(ids, off).numpy(), eb(ids, off).detach().numpy(),
                               rtol=1e-6)


def test_embedding_bag_max_norm_is_refused():
    eb = nn.EmbeddingBag(10, 4, max_norm=1.0)
    with pytest.raises(fiamma.onnx.UnsupportedOpError, match="embedding_bag with max_norm"):
        fiamma.onnx.export(eb, (IDS, OFFSETS), io.BytesIO())


# ---- linalg ---------------------------------------------------------------------------------

LINALG = {
    "det": lambda a: fiamma.linalg.det(a),
    "slogdet": lambda a: tuple(fiamma.linalg.slogdet(a)),
    "matrix_power": lambda a: fiamma.linalg.matrix_power(a, 5),
    "matrix_power_0": lambda a: fiamma.linalg.matrix_power(a, 0) + a,
    "cross": lambda a: fiamma.linalg.cross(a[:, :3], a[:, 1:], dim=1),
    "norm_fro": lambda a: fiamma.linalg.matrix_norm(a),
    "norm_1": lambda a: fiamma.linalg.matrix_norm(a, ord=1, keepdim=True),
    "norm_inf": lambda a: fiamma.linalg.matrix_norm(a, ord=float("inf"), dim=(0, 2)),
    "norm_-1": lambda a: fiamma.linalg.matrix_norm(a, ord=-1),
    "norm_-inf": lambda a: fiamma.linalg.matrix_norm(a, ord=float("-inf")),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg(name):
    check(LINALG[name], (randn(3, 4, 4),))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_linalg_inv_small(n):
    a = randn(2, n, n) + 3 * fiamma.eye(n)  # well conditioned
    check(lambda a: fiamma.linalg.inv(a) @ a[0], (a,))


@pytest.mark.parametrize("name,fn", [
    ("linalg_inv of 4x4", lambda a: fiamma.linalg.inv(a)),
    ("linalg_solve", lambda a: fiamma.linalg.solve(a, a[..., :1])),
    ("linalg_svd", lambda a: fiamma.linalg.svd(a)[1]),
    ("linalg_matrix_norm with ord=2", lambda a: fiamma.linalg.matrix_norm(a, ord=2)),
    ("linalg_matrix_power with a negative power", lambda a: fiamma.linalg.matrix_power(a, -2)),
    ("linalg_lu", lambda a: fiamma.linalg.lu(a)[2]),
    ("linalg_lu_factor", lambda a: fiamma.linalg.lu_factor(a)[0]),
    ("linalg_lu_solve", lambda a: fiamma.linalg.lu_solve(
        *fiamma.linalg.lu_factor(fiamma.eye(4) * 2), a)),
])
def test_linalg_without_onnx_equivalent_names_the_op(name, fn):
    with pytest.raises(fiamma.onnx.UnsupportedOpError, match=name):
        fiamma.onnx.export(fn, randn(3, 4, 4), io.BytesIO())
    a = randn(3, 4, 4)  # the jit runner replays them
    np.testing.assert_allclose(_np(_outs(fiamma.jit.trace(fn, a), (a,))[0]),
                               _np(_outs(fn, (a,))[0]), rtol=1e-5, atol=1e-6)


# ---- fft ------------------------------------------------------------------------------------

FFT = {
    "rfft": lambda a, nm: FF.rfft(a, norm=nm),
    "rfft_n_dim0": lambda a, nm: FF.rfft(a, n=11, dim=0, norm=nm),
    "fft": lambda a, nm: FF.fft(a, n=6, norm=nm),
    "ifft_of_fft": lambda a, nm: FF.ifft(FF.fft(a), n=9, norm=nm),
    "irfft": lambda a, nm: FF.irfft(FF.rfft(a) * 1.5, norm=nm),
    "irfft_n_odd": lambda a, nm: FF.irfft(FF.rfft(a), n=7, norm=nm),
    "hfft": lambda a, nm: FF.hfft(FF.rfft(a), n=9, norm=nm),
    "ihfft": lambda a, nm: FF.ihfft(a, norm=nm),
    "fft2": lambda a, nm: FF.fft2(a, norm=nm),
    "ifftn_s": lambda a, nm: FF.ifftn(a, s=(3, 7), norm=nm),
    "rfft2": lambda a, nm: FF.rfft2(a, norm=nm),
    "rfftn_dims": lambda a, nm: FF.rfftn(a, dim=(0, 2), norm=nm),
    "irfftn": lambda a, nm: FF.irfftn(FF.rfftn(a), norm=nm),
    "irfft2_s": lambda a, nm: FF.irfft2(FF.rfft2(a), s=(5, 7), norm=nm),
    "hfft2": lambda a, nm: FF.hfft2(FF.rfft2(a), norm=nm),
    "ihfftn": lambda a, nm: FF.ihfftn(a, norm=nm),
    "fftshift": lambda a, nm: FF.fftshift(FF.fft2(a, norm=nm)) + 1,
    "ifftshift_real": lambda a, nm: FF.ifftshift(a, dim=(0, 2)),
}


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name", sorted(FFT))
def test_fft(name, norm):
    fn = FFT[name]
    check(lambda a: fn(a, norm), (randn(4, 6, 5),))


@pytest.mark.parametrize("opset", [17, 20, None])  # DFT's axis: an attribute before 20
def test_fft_opsets(opset):
    check(lambda a: FF.irfft(FF.rfft(a, dim=0) * 2, n=5, dim=0) + _real(FF.fft(a)),
          (randn(5, 8),), opset)


def test_fft_complex_inputs_and_pair_layout():
    """A complex64 tensor is (real, imag) pairs in the file, as is fiamma's pair layout."""
    z = fiamma.view_as_complex(randn(3, 8, 2))
    check(lambda z: FF.fft(z), (z,))
    check(lambda z: FF.irfft(z, n=9), (z,))
    check(lambda z: FF.fft(z).abs(), (z,))
    check(lambda a: FF.fft(a.reshape(3, 4, 2), complex_input=True), (randn(3, 8),))


def test_complex_views_real_imag():
    """view_as_complex/view_as_real and .real/.imag of a traced tensor are ops of the trace
    (not constants), in the jit runner and in the file."""
    def f(a):
        z = _complex(FF.rfft(a))
        return z.abs() + z.real * 2 - fiamma.imag(z), fiamma.view_as_real(FF.fft(z))

    check(f, (randn(3, 8),), runs=[(randn(3, 8, seed=1),)])


def test_power_spectrum_dynamic_batch():
    def spec(a):
        f = _complex(FF.rfft(a * fiamma.hann_window(16), norm="ortho"))
        return f.abs()

    check(spec, (randn(2, 16),), runs=[(randn(5, 16, seed=1),)],
          dynamic_axes={"input_0": [0], "output_0": [0]})


def test_complex_arithmetic():
    """add/sub/mul/div/neg of complex tensors (with complex, real and scalar operands)."""
    z = fiamma.view_as_complex(randn(3, 8, 2))
    w = fiamma.view_as_complex(randn(3, 8, 2, seed=1))
    r = randn(3, 8, seed=2)

    def f(z, w, r):
        a = z * w - w / (z + 2.0) + (z * r) / (r.abs() + 1) - (-z) * 0.5
        return FF.ifft(a + (1 + 2j)) * (0.5 - 1j), a.abs()

    check(f, (z, w, r))


def test_other_complex_op_names_it():
    z = fiamma.view_as_complex(randn(3, 8, 2))
    with pytest.raises(fiamma.onnx.UnsupportedOpError, match="'exp' on a complex tensor"):
        fiamma.onnx.export(lambda z: FF.fft(z.exp()), (z,), io.BytesIO())
