"""searchsorted/bucketize and unique/unique_consecutive in traces (recorded as themselves, not
baked in as constants) and in ONNX Runtime: traced at one input, run at others (other values,
other sizes, NaNs, an empty input), equal to eager exactly."""

import io
import warnings

import numpy as np
import pytest

import fiamma

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
import fiamma.jit  # noqa: E402
import fiamma.onnx  # noqa: E402

NAN = float("nan")


def _check(fn, example, others, dynamic=True):
    """``fn`` traced and exported at ``example`` (a tuple of tensors) and run at each of
    ``others``: the traced module and ONNX Runtime equal eager."""
    names = [f"x{i}" for i in range(len(example))]
    with warnings.catch_warnings():
        warnings.simplefilter("error", fiamma.jit.TracerWarning)
        tm = fiamma.jit.trace(fn, example)
        buf = io.BytesIO()
        axes = {n: list(range(a.dim())) for n, a in zip(names, example)} if dynamic else None
        fiamma.onnx.export(fn, example, buf, input_names=names, dynamic_axes=axes)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    for args in [example] + list(others):
        want = _flat(fn(*args))
        got = sess.run(None, {n: a.numpy() for n, a in zip(names, args)})
        traced = _flat(tm(*args))
        assert len(got) == len(traced) == len(want)
        for g, t, w in zip(got, traced, want):
            assert g.dtype == w.dtype and t.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(t, w)
    return tm


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    return [out.numpy()]


def _t(values, dtype=None):
    return fiamma.tensor(values, dtype=dtype)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d(right):
    seq = _t([-1.5, 0.0, 0.0, 2.0, 7.0])

    def fn(x, s):
        return fiamma.searchsorted(s, x, right=right), fiamma.bucketize(x, s, right=right)

    tm = _check(fn, (_t([0.0, 3.0, 8.0, -2.0]), seq),
                [(_t([0.0, -1.5, 2.0, 7.0, NAN, 100.0, -0.0]), seq),          # other size, NaN
                 (_t([1.0, 2.0]), _t([5.0, 1.0, 3.0, NAN, 2.0, 0.0, 9.0])),  # unsorted, NaN
                 (_t([1.0]), _t([3.0])),
                 (_t([]), seq), (_t([1.0, 2.0]), _t([]))])
    assert [n.op for n in tm.graph.nodes] == ["searchsorted", "searchsorted"]


def test_searchsorted_options():
    """side=, out_int32, sorter, an N-d sequence, a Python number as the value, and the
    sequence a constant of the model (the values traced)."""
    bounds = _t([1, 3, 5, 7, 9])

    def fn(seq, x, sorter):
        return (fiamma.searchsorted(seq, x, side="right", out_int32=True),
                fiamma.searchsorted(seq, x, sorter=sorter),
                fiamma.searchsorted(seq[1], 2.5),
                fiamma.bucketize(x, bounds) + 1)

    seq = _t([[0.5, 1.0, 4.0], [-3.0, 2.0, 2.0]])
    x = _t([[1.0, 4.5], [2.0, -9.0]])
    sorter = _t([[0, 1, 2], [0, 1, 2]])
    rev = _t([[4.0, 0.5, 1.0], [2.0, -3.0, 2.0]])
    _check(fn, (seq, x, sorter),
           [(rev, _t([[0.5, 1.0, 4.0, 3.0], [2.0, 2.0, NAN, 1e9]]), _t([[1, 2, 0], [1, 0, 2]]))])


def test_searchsorted_integer_mixed():
    # int64 values in a float32 sequence: both compared in the promoted dtype
    def fn(s, x):
        return fiamma.searchsorted(s, x)

    _check(fn, (_t([1.5, 2.5, 16777217.0]), _t([2, 3, 16777216])),
           [(_t([0.0, 1e10]), _t([16777217, -5, 10 ** 10 + 1]))])


@pytest.mark.parametrize("inverse,counts", [(False, False), (True, False), (False, True),
                                            (True, True)])
def test_unique(inverse, counts):
    def fn(x):
        return fiamma.unique(x, return_inverse=inverse, return_counts=counts)

    tm = _check(fn, (_t([[3.0, 1.0, 3.0], [2.0, 1.0, 5.0]]),),
                [(_t([[3.0, NAN, 1.0, NAN], [-0.0, 0.0, 3.0, float("inf")]]),),
                 (_t([[7.0]]),), (fiamma.zeros(0, 4),)])
    assert tm.graph.nodes[0].op == "unique"


def test_unique_dtypes_and_method():
    def fn(a, b, c):
        u, inv, cnt = a.unique(sorted=False, return_inverse=True, return_counts=True)
        return u * 2, inv, cnt, fiamma.unique(b), c.unique(return_counts=True)[1]

    ints = _t([5, -2, 5, 0, -2])
    _check(fn, (ints, _t([True, False, True]), _t([1, 1, 2], fiamma.uint8)),
           [(_t([9, 9, 9, -(2 ** 40)]), _t([True]), _t([200, 3, 3, 200, 0], fiamma.uint8))])


@pytest.mark.parametrize("inverse,counts", [(False, False), (True, True)])
def test_unique_consecutive(inverse, counts):
    def fn(x):
        return fiamma.unique_consecutive(x, return_inverse=inverse, return_counts=counts)

    _check(fn, (_t([1.0, 1.0, 2.0, 2.0, 1.0]),),
           [(_t([[NAN, NAN, -0.0], [0.0, 3.0, 3.0]]).reshape(-1),), (_t([4.0]),),
            (fiamma.zeros(0),)])


def test_unique_along_dim():
    def fn(x):
        return (fiamma.unique(x, dim=0, return_inverse=True, return_counts=True),
                fiamma.unique_consecutive(x, dim=1, return_inverse=True, return_counts=True),
                x.float().unique_consecutive(dim=0))

    _check(fn, (_t([[1, 2], [0, 5], [1, 2], [0, 3]]),),
           [(_t([[4, 2], [4, 2], [-1, 7]]),), (_t([[1, 1, 2, 2, 2]]),)])


def test_refused_and_errors():
    x = _t([1.0, 2.0, 1.0])
    with pytest.raises(fiamma.onnx.UnsupportedOpError, match=r"unique\(dim=0\)"):
        fiamma.onnx.export(lambda a: fiamma.unique(a, dim=0), (x,), io.BytesIO())

    def into(a):
        out = fiamma.empty(3, dtype=fiamma.int64)
        return fiamma.searchsorted(_t([0.0, 1.5]), a, out=out)

    with pytest.raises(fiamma.jit.TracingError, match=r"searchsorted\(out=...\)"):
        fiamma.jit.trace(into, (x,))


def test_saved_and_loaded():
    def fn(x, s):
        u, inv = fiamma.unique(x, return_inverse=True)
        return u, inv, fiamma.searchsorted(s, x, right=True)

    tm = fiamma.jit.trace(fn, (_t([3.0, 1.0, 3.0]), _t([0.0, 2.0])))
    buf = io.BytesIO()
    tm.save(buf)
    buf.seek(0)
    loaded = fiamma.jit.load(buf)
    args = (_t([5.0, 5.0, 0.0, 1.0, 7.0]), _t([1.0, 5.0, 6.0]))
    for g, w in zip(loaded(*args), fn(*args)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_counting_ops():
    """bincount (its length follows the values), isin and count_nonzero: recorded, not baked."""
    def fn(x, w, y):
        return (fiamma.bincount(x), x.bincount(weights=w, minlength=7),
                fiamma.isin(y, x), fiamma.isin(y, _t([2.0, NAN]), invert=True),
                fiamma.count_nonzero(y), y.count_nonzero(dim=1))

    x = _t([1, 3, 3, 0])
    w = _t([0.5, 0.25, 1.0, 2.0])
    y = _t([[0.0, 3.0, NAN], [2.0, 0.0, 1.0]])
    _check(fn, (x, w, y),
           [(_t([9, 0, 9, 9, 2, 2]), _t([1.0, 2.0, 0.5, 0.5, 4.0, 8.0]),
             _t([[NAN, 9.0, -0.0, 5.0], [2.0, 2.0, 2.0, 0.0]])),
            (_t([], fiamma.int64), _t([]), fiamma.zeros(0, 3))])


def test_histc_traced_not_exported():
    def fn(x):
        return fiamma.histc(x, bins=4, min=0, max=8)

    tm = fiamma.jit.trace(fn, (_t([1.0, 7.0, 3.0]),))
    other = _t([0.5, 0.5, 6.0, 9.0, 2.0])
    np.testing.assert_array_equal(tm(other).numpy(), fn(other).numpy())
    with pytest.raises(fiamma.onnx.UnsupportedOpError, match="histc"):
        fiamma.onnx.export(fn, (other,), io.BytesIO())
