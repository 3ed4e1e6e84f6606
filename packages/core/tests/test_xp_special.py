"""Special functions on every device besides the CPU against the CPU's kernels (csrc/special.c):
same values (float64 within a few ulps, or an absolute 1e-15 where the two libraries round a
tiny result differently), same edge rules (infinities, NaN, signed zeros), every float dtype,
broadcasting and strided operands."""

import numpy as np
import pytest
from conftest import assert_same

import fiamma
from fiamma._backend import codes as C
from fiamma.special import sp_unary

pytest.importorskip("scipy")

_EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, 0.25, 0.75, 1e-300,
          -1e-300, 1e-8, 1.5, -3.0, -2.5, 12.0, 30.5, 700.0, -26.0, 5e7, 4503599627370496.0,
          1e20, -1e20]


def _values(lo=-10.0, hi=10.0, n=300):
    rng = np.random.default_rng(0)
    return np.concatenate([_EDGES, rng.uniform(lo, hi, n), rng.uniform(0, 1, 60),
                           rng.uniform(-40, 40, 40)])


def _check(fn, x_cpu, device, rtol=1e-12, atol=1e-15):
    assert_same(fn(x_cpu.to(device)), fn(x_cpu), rtol=rtol, atol=atol)


UNARY = [
    ("lgamma", fiamma.lgamma), ("digamma", fiamma.digamma), ("erfinv", fiamma.erfinv),
    ("sinc", fiamma.sinc), ("i0", fiamma.i0), ("erfcx", fiamma.special.erfcx),
    ("i0e", fiamma.special.i0e), ("i1", fiamma.special.i1), ("i1e", fiamma.special.i1e),
    ("ndtr", fiamma.special.ndtr), ("ndtri", fiamma.special.ndtri),
    ("entr", fiamma.special.entr), ("erfcinv", lambda x: sp_unary(C.SP_ERFCINV, "erfcinv", x)),
    ("logit", fiamma.logit), ("logit_eps", lambda x: fiamma.logit(x, 1e-3)),
    ("polygamma1", lambda x: fiamma.polygamma(1, x)),
    ("polygamma2", lambda x: fiamma.polygamma(2, x)),
    ("polygamma3", lambda x: fiamma.polygamma(3, x)),
]


@pytest.mark.parametrize("name,fn", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float64(device, name, fn):
    x = fiamma.tensor(_values(), dtype=fiamma.float64)
    # polygamma near the poles is huge: compare relatively only
    _check(fn, x, device, rtol=1e-10 if name.startswith("polygamma") else 1e-12)


def test_log_ndtr(device):
    # SciPy's log_ndtr rounds results below 1e-310 to -0.0 where the C keeps the subnormal
    x = fiamma.tensor(_values(-40.0, 30.0), dtype=fiamma.float64)
    _check(fiamma.special.log_ndtr, x, device, atol=1e-300)


def test_mvlgamma(device):
    x = fiamma.tensor(np.random.default_rng(1).uniform(2.1, 30.0, 50))
    for p in (1, 2, 5):
        _check(lambda t: fiamma.mvlgamma(t, p), x, device)
    with pytest.raises(RuntimeError, match="greater than"):
        fiamma.mvlgamma(fiamma.tensor([0.1], device=device), 3)


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float16, fiamma.bfloat16])
def test_unary_low_precision_round_once(device, dt):
    x = fiamma.tensor(np.random.default_rng(2).uniform(0.05, 0.95, 200), dtype=dt)
    for fn in [fiamma.lgamma, fiamma.digamma, fiamma.erfinv, fiamma.special.ndtri,
               fiamma.special.i1e, fiamma.logit]:
        # computed in float64 and rounded once: the same element of dt (except the CPU's
        # float32 erfinv, a float kernel of its own within 2.3 ulp)
        tol = 3 * 2.0 ** -24 if fn is fiamma.erfinv and dt is fiamma.float32 else 0
        assert_same(fn(x.to(device)), fn(x), rtol=tol, atol=0)


def test_integer_input_and_strided(device):
    x = fiamma.arange(1, 13).reshape(3, 4)
    _check(fiamma.lgamma, x, device)
    y = fiamma.linspace(0.1, 5, 48).reshape(6, 8)[::2, 1::3].t()
    assert_same(fiamma.digamma(y.to(device)), fiamma.digamma(y), rtol=1e-6)
    z = y.to(device).clone()
    z.lgamma_()
    assert_same(z, y.lgamma(), rtol=1e-6)


BINARY = [
    ("xlogy", fiamma.xlogy), ("xlog1py", fiamma.special.xlog1py),
    ("logaddexp", fiamma.logaddexp), ("logaddexp2", fiamma.logaddexp2),
    ("zeta", fiamma.special.zeta), ("gammainc", fiamma.special.gammainc),
    ("gammaincc", fiamma.special.gammaincc),
]


@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_float64(device, name, fn):
    rng = np.random.default_rng(3)
    edges = [v for v in _EDGES if abs(v) < 1e3]
    a = np.concatenate([edges, rng.uniform(0, 20, 30)])
    b = np.concatenate([edges[3:] + edges[:3], rng.uniform(0, 20, 30)])
    ta = fiamma.tensor(a)[:, None]
    tb = fiamma.tensor(b)[None, :]
    # gammaincc: the C takes Q = 1 - P in the series region, SciPy computes Q directly for
    # small a (more accurate there): they differ by up to ~1e-15 absolute
    atol = 1e-14 if name == "gammaincc" else 1e-15
    assert_same(fn(ta.to(device), tb.to(device)), fn(ta, tb), rtol=1e-10, atol=atol)


def test_binary_scalars_and_dtypes(device):
    x = fiamma.linspace(-3, 3, 25)
    for dt in [fiamma.float32, fiamma.bfloat16]:
        xd = x.to(dt)
        assert_same(fiamma.xlogy(xd.to(device), 2.5), fiamma.xlogy(xd, 2.5), rtol=0, atol=0)
        assert_same(fiamma.logaddexp(xd.to(device), xd.flip(0).to(device)),
                    fiamma.logaddexp(xd, xd.flip(0)), rtol=0, atol=0)


def test_without_scipy_error_names_function(device, monkeypatch):
    be = fiamma.empty(1, device=device)._storage.backend
    monkeypatch.setattr(be, "_sp", None, raising=False)
    with pytest.raises(RuntimeError, match=r"lgamma.*needs (scipy|cupyx\.scipy)\.special\.gamma"):
        fiamma.lgamma(fiamma.ones(3, device=device))
    # the functions written in array arithmetic need no SciPy
    assert_same(fiamma.logit(fiamma.full((3,), 0.3, device=device)),
                fiamma.logit(fiamma.full((3,), 0.3)))


def test_erf_erfc_without_scipy(device, monkeypatch):
    # erf/erfc (and gelu through them) fall back to array arithmetic: vectorised, within a few
    # ulps of the CPU's libm, with its edge values
    be = fiamma.empty(1, device=device)._storage.backend
    monkeypatch.setattr(be, "_sp", None, raising=False)
    rng = np.random.default_rng(5)
    xs = np.concatenate([rng.uniform(-6, 6, 3000), rng.uniform(-1, 1, 3000),
                         rng.uniform(-28, 28, 1000),
                         [0.0, 0.75, -0.75, 1e-300, 26.5, np.inf, -np.inf, np.nan]])
    c = fiamma.tensor(xs, dtype=fiamma.float64)
    d = c.to(device)
    for name in ("erf", "erfc"):
        got, want = getattr(d, name)().cpu().numpy(), getattr(c, name)().numpy()
        ulp = np.spacing(np.abs(want))
        ok = np.isnan(want) | (np.abs(got - want) <= 10 * ulp) | (got == want)
        assert ok.all(), (name, xs[~ok][:5])
    z = fiamma.tensor([-0.0], device=device)
    assert np.signbit(z.erf().cpu().numpy()[0])
    for dt in (fiamma.float32, fiamma.bfloat16):
        assert_same(c.to(dt).to(device).erfc(), c.to(dt).erfc(), rtol=1e-2 if dt is
                    fiamma.bfloat16 else 1e-6, atol=1e-30)
