"""Sizes read from shapes: what stays symbolic (arithmetic, sym_min/sym_max, top-k counts,
masks and nonzero with data-dependent lengths) and the TracerWarning where model code turns a
size into a plain number (int(), float(), len()), checked in the traced module and in ONNX
Runtime at another size than the traced one."""

import io
import warnings

import numpy as np
import pytest
from models import randn

import fiamma
import fiamma.jit
from fiamma.jit import TracerWarning


def grouped(x):
    """Sizes in arithmetic flowing into reshape/expand/arange/zeros only."""
    n, c = x.shape[0], x.size(1)
    half = c // 2
    y = x.reshape(n * 2, half)                       # (2N, C/2)
    pos = fiamma.arange(n * 2 - 1 + 1).float()[:, None]
    k = fiamma.sym_min(3, n)                         # follows N below 3
    top = x.sum(1).topk(k)[0]
    return y + pos, top, fiamma.zeros(fiamma.sym_max(n, 2), half).expand(-1, half)


def masked(x):
    """A count the values decide: the positive entries, their positions."""
    keep = x > 0
    return x[keep], fiamma.where(keep)[0], fiamma.nonzero(x > 0.5)


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_sym_min_max_plain_values():
    assert fiamma.sym_min(3, 5) == 3 and fiamma.sym_max(3, 5) == 5
    assert fiamma.sym_min(2.5, 1) == 1


def test_sizes_stay_symbolic_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        tm = fiamma.jit.trace(grouped, randn(4, 6))
    for shape in [(2, 6), (7, 10), (1, 4)]:
        x = randn(*shape, seed=1)
        for g, w in zip(tm(x), grouped(x)):
            _close(g, w)


def test_data_dependent_counts_in_traced_module():
    tm = fiamma.jit.trace(masked, randn(5, 3))
    for seed in (1, 2, 3):
        x = randn(6, 4, seed=seed)
        for g, w in zip(tm(x), masked(x)):
            _close(g, w)


@pytest.mark.parametrize("conv,what", [(int, "int()"), (float, "float()")])
def test_conversion_of_a_size_warns(conv, what):
    def f(x):
        return x.reshape(int(conv(x.shape[0]) * 2), -1)

    with pytest.warns(TracerWarning, match=rf"{what.replace('(', '[(]').replace(')', '[)]')}"
                                           r".*test_symbolic_sizes.py:\d+"):
        fiamma.jit.trace(f, randn(4, 6))


def test_len_warns():
    def f(x):
        return x.reshape(len(x), 3, -1)

    with pytest.warns(TracerWarning, match="len"):
        fiamma.jit.trace(f, randn(4, 6))


def test_size_as_a_scalar_operand_warns_and_keeps_the_dtype():
    def f(x):
        return fiamma.arange(3) + x.shape[0]

    with pytest.warns(TracerWarning, match="scalar operand"):
        tm = fiamma.jit.trace(f, randn(4, 6))
    assert tm(randn(4, 6)).dtype == fiamma.int64


def test_library_conversions_do_not_warn():
    """fiamma's own code turning sizes into ints (checks, NumPy) is not the model's doing."""
    import fiamma.nn as nn

    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(4, 2)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        fiamma.jit.trace(m, randn(2, 3, 8, 8))


onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.onnx  # noqa: E402


def _session(fn, x, **kw):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        fiamma.onnx.export(fn, (x,), buf, **kw)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    return ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def test_onnx_sizes_at_another_size():
    sess = _session(grouped, randn(2, 6),
                    dynamic_axes={"input_0": {0: "N"}, "output_0": [0],
                                  "output_1": [0], "output_2": [0]})
    for shape in [(2, 6), (7, 6), (1, 6)]:
        x = randn(*shape, seed=1)
        for g, w in zip(sess.run(None, {"input_0": x.numpy()}), grouped(x)):
            _close(g, w.numpy())


def test_onnx_data_dependent_counts():
    sess = _session(masked, randn(5, 3), dynamic_axes={"input_0": [0, 1]})
    assert [o.shape[0] for o in sess.get_outputs()] == [f"output_{i}_num" for i in range(3)]
    for seed, shape in [(1, (6, 4)), (2, (5, 3)), (3, (2, 9))]:
        x = randn(*shape, seed=seed)
        for g, w in zip(sess.run(None, {"input_0": x.numpy()}), masked(x)):
            _close(g, w.numpy())


def ranked(x):
    """argsort's indices as a permutation of another tensor."""
    return x[:, 0][x[:, 1].argsort(descending=True)], fiamma.argsort(x[:, 2])


def test_argsort_follows_the_values():
    tm = fiamma.jit.trace(ranked, randn(5, 3))
    sess = _session(ranked, randn(5, 3), dynamic_axes={"input_0": [0], "output_0": [0],
                                                        "output_1": [0]})
    for seed, n in [(1, 5), (2, 8)]:
        x = randn(n, 3, seed=seed)
        for g, o, w in zip(tm(x), sess.run(None, {"input_0": x.numpy()}), ranked(x)):
            _close(g, w)
            _close(o, w.numpy())


def test_size_in_float_or_tensor_arithmetic_warns_baked():
    # segment-anything's select_masks: (point_coords.shape[1] - 2.5) * score_reweight
    class M(fiamma.nn.Module):
        def forward(self, x, y):
            return x + (y.shape[1] - 2.5) * fiamma.tensor([1000.0, 0.0])

    class N(fiamma.nn.Module):
        def forward(self, x, y):
            return x + y.shape[1] * fiamma.tensor([1.0, 0.0])

    for m in (M(), N()):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fiamma.jit.trace(m, (fiamma.randn(2), fiamma.randn(1, 5, 2)))
        assert any(issubclass(x.category, TracerWarning) and "as a constant" in str(x.message)
                   for x in w), \
            [str(x.message) for x in w]


# ---- instance norm, pads from sizes, functions imported by name ------------------------------

from fiamma import arange as _imported_arange  # noqa: E402  (as `from torch import arange`)


def _positions(x):
    """A module that imported the factory by name at import time (x-transformers does)."""
    return x + _imported_arange(x.shape[1], dtype=x.dtype)


def _pad_to_multiple(x):
    return fiamma.nn.functional.pad(x, (0, (4 - x.shape[-1] % 4) % 4, 1, x.shape[-2] % 3))


def _norms(x):
    import fiamma.nn.functional as F

    w = fiamma.linspace(0.5, 1.5, x.shape[1])
    return F.instance_norm(x, weight=w, bias=-w), fiamma.addcmul(x, x, x, value=0.5), \
        fiamma.addcdiv(x, x, x.abs() + 1.0, value=-2.0)


@pytest.mark.parametrize("fn,shapes,axes", [
    (_positions, [(2, 5), (3, 9), (1, 1)], {0: "N", 1: "T"}),
    (_pad_to_multiple, [(1, 3, 5, 6), (2, 3, 7, 9), (1, 3, 3, 4)], {0: "N", 2: "H", 3: "W"}),
    (_norms, [(1, 4, 6, 5), (3, 4, 7, 9), (2, 4, 2, 3)], {0: "N", 2: "H", 3: "W"}),
])
def test_onnx_follows_sizes_through_pads_norms_and_imported_factories(fn, shapes, axes):
    ref = fn(randn(*shapes[0]))
    nout = len(ref) if isinstance(ref, tuple) else 1
    dyn = {"input_0": axes}
    dyn.update({f"output_{i}": axes for i in range(nout)})
    sess = _session(fn, randn(*shapes[0]), dynamic_axes=dyn)
    tm = fiamma.jit.trace(fn, randn(*shapes[0]))
    for i, shape in enumerate(shapes):
        x = randn(*shape, seed=i + 1)
        want = fn(x)
        want = want if isinstance(want, tuple) else (want,)
        traced = tm(x)
        traced = traced if isinstance(traced, tuple) else (traced,)
        for g, t, w in zip(sess.run(None, {"input_0": x.numpy()}), traced, want):
            _close(g, w.numpy())
            _close(t.numpy(), w.numpy())


def test_instance_norm_with_running_stats_in_eval_exports():
    import fiamma.nn as nn

    m = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
    m(randn(4, 3, 5, 5, seed=3))  # training: the running statistics move
    m.eval()
    sess = _session(m, randn(1, 3, 4, 4), dynamic_axes={"input_0": {0: "N", 2: "H", 3: "W"}})
    for shape in [(1, 3, 4, 4), (2, 3, 6, 5)]:
        x = randn(*shape, seed=5)
        _close(sess.run(None, {"input_0": x.numpy()})[0], m(x).detach().numpy())


def test_constant_expanded_to_an_input_size_is_not_precomputed():
    """A module's kernel expanded with sizes read from shapes (kornia's filter2d): a view with
    symbolic sizes is computed when the program runs, not ahead from the weights."""
    import fiamma.nn as nn

    class Blur(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k", fiamma.tensor([[0.25, 0.5, 0.25]]))

        def forward(self, x):
            w = self.k[:, None, None, :]
            # sizes read from the kernel's own (traced) shape, as kornia's filter2d does
            w = w.expand(w.shape[0], x.shape[1] * w.shape[0], -1, w.shape[-1])
            w = w.reshape(-1, 1, 1, 3)
            return nn.functional.conv2d(x, w, padding=(0, 1), groups=x.shape[1])

    m = Blur()
    tm = fiamma.jit.trace(m, randn(1, 3, 4, 5))
    for shape in [(1, 3, 4, 5), (2, 3, 6, 7)]:
        x = randn(*shape, seed=2)
        _close(tm(x).numpy(), m(x).numpy())
