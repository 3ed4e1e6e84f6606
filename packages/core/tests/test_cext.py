"""fiamma.utils.cext: building a user C extension with cffi and calling it on tensors."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fiamma
from fiamma.utils import cext

pytestmark = pytest.mark.skipif(cext._compiler() is None,
                                reason="no C compiler (cc) to build extensions with")

CDEF = """
void axpb(const float *x, float *y, int64_t n, float a, float b);
void relu_(double *x, int64_t n);
void row_sums(const double *m, double *out, int64_t rows, int64_t cols);
int checked_fill(int32_t *x, int64_t n, int32_t v);
"""

SOURCE = r"""
#include <stdint.h>

void axpb(const float *x, float *y, int64_t n, float a, float b) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b;
}

void relu_(double *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) if (x[i] < 0) x[i] = 0;
}

void row_sums(const double *m, double *out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += m[r * cols + c];
        out[r] = s;
    }
}

int checked_fill(int32_t *x, int64_t n, int32_t v) {
    if (v < 0) return 7;
    for (int64_t i = 0; i < n; i++) x[i] = v;
    return 0;
}
"""


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cext"))


@pytest.fixture(scope="module")
def lib(build_dir):
    return cext.load("testops", CDEF, SOURCE, build_directory=build_dir)


@pytest.fixture(scope="module")
def ops(lib):
    return {
        "axpb": cext.kernel(lib.axpb, [cext.In("x", fiamma.float32), cext.Out("y", like="x"),
                                       cext.Numel("x"), cext.Scalar("a"), cext.Scalar("b")]),
        "relu_": cext.kernel(lib.relu_, [cext.InOut("x", fiamma.float64), cext.Numel("x")]),
        "row_sums": cext.kernel(
            lib.row_sums,
            [cext.In("m", fiamma.float64, shape=("rows", "cols")),
             cext.Out("out", fiamma.float64, shape=("rows",)), cext.Dim("rows"), cext.Dim("cols")]),
        "fill": cext.kernel(lib.checked_fill, [cext.InOut("x", fiamma.int32), cext.Numel("x"),
                                               cext.Scalar("v")], check_status=True),
    }


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 300), a=st.floats(-4, 4), b=st.floats(-4, 4), seed=st.integers(0, 99))
def test_axpb_matches_numpy(ops, n, a, b, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    y = ops["axpb"](fiamma.from_numpy(x), a, b)
    assert y.dtype == fiamma.float32 and y.shape == (n,)
    np.testing.assert_allclose(y.numpy(), np.float32(a) * x + np.float32(b), rtol=1e-6,
                               atol=1e-6)


def test_axpb_2d_and_0d(ops):
    x = fiamma.arange(12, dtype=fiamma.float32).reshape(3, 4)
    y = ops["axpb"](x, 2.0, -1.0)
    assert y.shape == (3, 4)
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(12).reshape(3, 4) - 1)
    assert ops["axpb"](fiamma.tensor(3.0), 2.0, 0.5).item() == 6.5


def test_inplace_kernel_bumps_version(ops):
    x = fiamma.tensor([-1.0, 2.0, -3.0, 4.0], dtype=fiamma.float64)
    view = x[1:]
    v0 = x._version
    assert ops["relu_"](x) is None
    assert x.tolist() == [0.0, 2.0, 0.0, 4.0] and view.tolist() == [2.0, 0.0, 4.0]
    assert x._version > v0


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(0, 6), cols=st.integers(0, 6))
def test_named_dims(ops, rows, cols):
    m = np.random.default_rng(rows * 7 + cols).standard_normal((rows, cols))
    out = ops["row_sums"](fiamma.from_numpy(m))
    assert out.shape == (rows,)
    np.testing.assert_allclose(out.numpy(), m.sum(1), rtol=1e-12, atol=1e-12)


def test_status_checked(ops):
    x = fiamma.zeros(3, dtype=fiamma.int32)
    ops["fill"](x, 5)
    assert x.tolist() == [5, 5, 5]
    with pytest.raises(RuntimeError, match="checked_fill: the kernel returned error status 7"):
        ops["fill"](x, -1)


def test_errors_name_kernel_and_argument(ops):
    axpb, rows = ops["axpb"], ops["row_sums"]
    with pytest.raises(TypeError, match=r"axpb: argument 'x': expected dtype fiamma.float32, "
                                        r"got fiamma.float64"):
        axpb(fiamma.zeros(3, dtype=fiamma.float64), 1.0, 1.0)
    with pytest.raises(ValueError, match=r"axpb: argument 'x': expected a contiguous tensor"):
        axpb(fiamma.zeros(4, 4).t(), 1.0, 1.0)
    with pytest.raises(TypeError, match=r"axpb: argument 'x': expected a fiamma.Tensor, got list"):
        axpb([1.0], 1.0, 1.0)
    with pytest.raises(TypeError, match=r"axpb\(x, a, b\): expected 3 arguments, got 2"):
        axpb(fiamma.zeros(3), 1.0)
    with pytest.raises(ValueError, match=r"row_sums: argument 'm' must have 2 dimensions"):
        rows(fiamma.zeros(3, dtype=fiamma.float64))
    with pytest.raises(TypeError, match="axpb: the C function rejected the arguments"):
        axpb(fiamma.zeros(3), "a", 1.0)


def test_named_dims_must_agree(lib):
    k = cext.kernel(lib.row_sums, [cext.In("m", fiamma.float64, shape=("n", "n")),
                                   cext.Out("out", fiamma.float64, shape=("n",)), cext.Dim("n"),
                                   cext.Dim("n")], name="square_sums")
    np.testing.assert_array_equal(k(fiamma.ones(2, 2, dtype=fiamma.float64)).numpy(), [2, 2])
    with pytest.raises(ValueError, match=r"square_sums: argument 'm' has size 3 in dimension 1 "
                                         r"\('n'\), but 'n' is 2"):
        k(fiamma.ones(2, 3, dtype=fiamma.float64))


def test_bad_specs(lib):
    with pytest.raises(ValueError, match="give like="):
        cext.Out("y")
    with pytest.raises(ValueError, match="refers to no tensor"):
        cext.kernel(lib.axpb, [cext.In("x"), cext.Out("y", like="z")])
    with pytest.raises(ValueError, match="name must be a Python identifier"):
        cext.load("not valid", "", "")


def test_pointer(lib):
    t = fiamma.tensor([1.5, 2.5, 3.5])
    p = cext.pointer(t, fiamma.float32, name="t")
    assert p[1] == 2.5
    p[2] = 9.0  # writes land in the tensor
    assert t[2].item() == 9.0
    assert cext.address(t) == t.data_ptr()
    assert cext.c_type(fiamma.bfloat16) == "uint16_t"
    with pytest.raises(TypeError, match=r"cext.pointer\(t\): expected dtype fiamma.int32 or "
                                        r"fiamma.int64, got fiamma.float32"):
        cext.pointer(t, (fiamma.int32, fiamma.int64), name="t")
    q = cext.pointer(t[::2], contiguous=False)
    assert q[2] == 9.0  # C walks the strides itself: element 1 of the view is q[2]
    # raw call with pointers: the low-level way
    y = fiamma.empty(3)
    lib.axpb(cext.pointer(t), cext.pointer(y, writable=True), 3, 1.0, 1.0)
    assert y.tolist() == [2.5, 3.5, 10.0]


def test_cache_reuses_and_rebuilds(lib, build_dir):
    assert cext.load("testops", CDEF, SOURCE, build_directory=build_dir) is lib
    files = sorted(f for f in os.listdir(build_dir) if f.endswith(".so"))
    assert len(files) == 1
    mtime = os.path.getmtime(os.path.join(build_dir, files[0]))
    # a new process finds the cached build (no recompilation), then a changed source rebuilds
    code = textwrap.dedent(f"""
        from fiamma.utils import cext
        lib = cext.load("testops", {CDEF!r}, {SOURCE!r}, build_directory={build_dir!r})
        assert lib.checked_fill is not None
        lib2 = cext.load("testops", {CDEF!r}, {SOURCE + " "!r}, build_directory={build_dir!r})
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    assert os.path.getmtime(os.path.join(build_dir, files[0])) == mtime
    assert len([f for f in os.listdir(build_dir) if f.endswith(".so")]) == 2


def test_concurrent_builds(tmp_path):
    code = textwrap.dedent(f"""
        from fiamma.utils import cext
        lib = cext.load("twice", "int twice(int);", "int twice(int x) {{ return 2 * x; }}",
                        build_directory={str(tmp_path)!r})
        print(lib.twice(21))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "42"
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".so")]) == 1
    assert not [f for f in os.listdir(tmp_path) if f.startswith("_fiamma_cext_twice_")
                and os.path.isdir(tmp_path / f)]  # temporary build folders removed


def test_compile_error_reported(tmp_path):
    with pytest.raises(RuntimeError, match=r"(?s)cext.load\('broken'\): compilation failed.*"
                                           r"undeclared_thing"):
        cext.load("broken", "int f(int);", "int f(int x) { return undeclared_thing; }",
                  build_directory=str(tmp_path))
    with pytest.raises(RuntimeError, match=r"cext.load\('badcdef'\): cffi can't parse cdef"):
        cext.load("badcdef", "int f(int x", "", build_directory=str(tmp_path))


def _autograd_function():
    try:
        return fiamma.autograd.Function
    except AttributeError:
        return None


def test_gradients_need_a_backward(ops, lib):
    if _autograd_function() is None:
        pytest.skip("fiamma-autograd is not installed")
    x = fiamma.tensor([1.0, -2.0, 3.0]).requires_grad_(True)
    with pytest.raises(RuntimeError, match=r"cext kernel axpb: an input requires grad but no "
                                           r"backward is registered"):
        ops["axpb"](x, 2.0, 1.0)
    with fiamma.no_grad():
        assert ops["axpb"](x, 2.0, 1.0).tolist() == [3.0, -3.0, 7.0]
    k = cext.kernel(lib.axpb, [cext.In("x", fiamma.float32), cext.Out("y", like="x"),
                               cext.Numel("x"), cext.Scalar("a"), cext.Scalar("b")])

    @k.backward
    def _(ctx, gy):
        _, a, _ = ctx.kernel_inputs
        return gy * a, None, None

    y = k(x, 2.0, 1.0)
    assert y.requires_grad
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
