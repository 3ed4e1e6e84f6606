"""torch.special's orthogonal polynomials and Bessel-type functions: known values, recurrences
checked against closed forms, SciPy's float64 values (when installed), dtypes, errors, and
parity with PyTorch."""

import numpy as np
import pytest

import fiamma
import fiamma.special as S

POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p"]


def _f64(a):
    return fiamma.tensor(np.asarray(a, dtype=np.float64))


def test_known_values():
    x = _f64([0.5])
    assert S.chebyshev_polynomial_t(x, 3).tolist() == [-1.0]          # 4x^3 - 3x
    assert S.chebyshev_polynomial_u(x, 2).tolist() == [0.0]           # 4x^2 - 1
    assert S.chebyshev_polynomial_v(x, 1).tolist() == [0.0]           # 2x - 1
    assert S.chebyshev_polynomial_w(x, 1).tolist() == [2.0]           # 2x + 1
    assert S.hermite_polynomial_h(x, 2).tolist() == [-1.0]            # 4x^2 - 2
    assert S.hermite_polynomial_he(x, 2).tolist() == [-0.75]          # x^2 - 1
    assert S.laguerre_polynomial_l(x, 2).tolist() == [0.125]          # (x^2 - 4x + 2) / 2
    assert S.legendre_polynomial_p(x, 2).tolist() == [-0.125]         # (3x^2 - 1) / 2
    assert S.shifted_chebyshev_polynomial_t(_f64([0.75]), 3).tolist() == [-1.0]


@pytest.mark.parametrize("name", POLYS)
def test_negative_degree_truncation_and_broadcast(name):
    fn = getattr(S, name)
    x = _f64([-0.3, 0.2, 0.9])
    assert fn(x, -1).tolist() == [0.0, 0.0, 0.0]
    assert fn(x, 0).tolist() == [1.0, 1.0, 1.0]
    assert fn(x, 2.7).tolist() == fn(x, 2).tolist()
    r = fn(x, fiamma.tensor([[1], [3]]))
    assert r.shape == (2, 3)
    assert r[1].tolist() == fn(x, 3).tolist()
    assert fn(0.5, fiamma.tensor([2])).tolist() == fn(_f64([0.5]), 2).tolist()
    assert fn(fiamma.tensor([1, 2]), 2).dtype == fiamma.float32
    assert fn(fiamma.tensor([0.5]), fiamma.tensor([2], dtype=fiamma.float64)).dtype == \
        fiamma.float64
    with pytest.raises(NotImplementedError, match="Half"):
        fn(fiamma.tensor([0.5], dtype=fiamma.float16), 2)
    with pytest.raises(TypeError):
        fn(0.5, 2)


def test_trig_forms_match_recurrence():
    # degrees past the switch to cos(n acos x): T_n(cos t) = cos(n t), U_n = sin((n+1)t)/sin t
    t = np.linspace(0.1, 3.0, 25)
    for n in (7, 12, 40):
        assert np.allclose(S.chebyshev_polynomial_t(_f64(np.cos(t)), n).numpy(), np.cos(n * t),
                           atol=1e-13)
        assert np.allclose(S.chebyshev_polynomial_u(_f64(np.cos(t)), n).numpy(),
                           np.sin((n + 1) * t) / np.sin(t), atol=1e-12)
    # at x = +-1
    for n in range(6):
        assert S.chebyshev_polynomial_v(_f64([-1.0]), n).item() == (-1) ** n * (2 * n + 1)
        assert S.chebyshev_polynomial_w(_f64([1.0]), n).item() == 2 * n + 1
        assert S.legendre_polynomial_p(_f64([-1.0]), n).item() == (-1) ** n


def test_against_scipy():
    sp = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, 200)
    for n in (0, 1, 2, 5, 9, 17, 30):
        pairs = [("chebyshev_polynomial_t", sp.eval_chebyt(n, x)),
                 ("chebyshev_polynomial_u", sp.eval_chebyu(n, x)),
                 ("shifted_chebyshev_polynomial_t", sp.eval_sh_chebyt(n, x)),
                 ("shifted_chebyshev_polynomial_u", sp.eval_sh_chebyu(n, x)),
                 ("hermite_polynomial_h", sp.eval_hermite(n, x)),
                 ("hermite_polynomial_he", sp.eval_hermitenorm(n, x)),
                 ("laguerre_polynomial_l", sp.eval_laguerre(n, x)),
                 ("legendre_polynomial_p", sp.eval_legendre(n, x))]
        for name, ref in pairs:
            got = getattr(S, name)(_f64(x), n).numpy()
            assert np.allclose(got, ref, rtol=1e-11, atol=1e-11 * np.abs(ref).max()), (name, n)


@pytest.mark.parity
@pytest.mark.parametrize("name", POLYS)
def test_parity_with_torch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-1.2, 1.2, 100), [-1.0, 1.0, 0.0, 2.0, -2.0]])
    n = np.arange(-2, 25)
    X, N = np.meshgrid(x, n)
    a = getattr(S, name)(_f64(X), fiamma.tensor(N)).numpy()
    b = getattr(torch.special, name)(torch.tensor(X), torch.tensor(N)).numpy()
    assert np.allclose(a, b, rtol=1e-11, atol=1e-12)
    assert getattr(S, name)(fiamma.tensor([0.5]), 3).dtype == fiamma.float32
    r = getattr(S, name)(fiamma.tensor([0.25, 0.5]), 4).numpy()
    assert np.allclose(r, getattr(torch.special, name)(torch.tensor([0.25, 0.5]), 4).numpy())


BESSEL = {
    # name: (x, value) from mpmath at 40 digits
    "bessel_j0": (3.0, -0.26005195490193345),
    "bessel_j1": (3.0, 0.3390589585259365),
    "bessel_y0": (3.0, 0.3768500100127904),
    "bessel_y1": (3.0, 0.3246744247918),
    "modified_bessel_k0": (3.0, 0.03473950438627925),
    "modified_bessel_k1": (3.0, 0.040156431128194184),
    "airy_ai": (-3.0, -0.37881429367765806),
}


@pytest.mark.parametrize("name", sorted(BESSEL))
def test_bessel_known_values(name):
    x, ref = BESSEL[name]
    got = getattr(S, name)(_f64([x])).item()
    assert abs(got - ref) <= 2e-15 * abs(ref)
    assert getattr(S, name)(fiamma.tensor([1, 2])).dtype == fiamma.float32
    with pytest.raises(NotImplementedError, match="Half"):
        getattr(S, name)(fiamma.tensor([1.0], dtype=fiamma.float16))


def test_bessel_special_points():
    z = _f64([0.0, -1.0, np.inf])
    assert S.bessel_y0(z).tolist()[0] == -np.inf and np.isnan(S.bessel_y0(z).tolist()[1])
    assert S.modified_bessel_k0(z).tolist()[0] == np.inf
    assert S.modified_bessel_k1(z).tolist()[2] == 0.0
    assert S.bessel_j0(_f64([0.0])).item() == 1.0
    assert S.bessel_j1(_f64([-3.0])).item() == -S.bessel_j1(_f64([3.0])).item()
    assert S.spherical_bessel_j0(_f64([0.0, np.pi])).numpy()[0] == 1.0
    assert abs(S.spherical_bessel_j0(_f64([np.pi])).item()) < 1e-16
    assert S.modified_bessel_i0(_f64([np.inf])).item() == np.inf
    assert S.modified_bessel_i1(_f64([-np.inf])).item() == -np.inf
    # the scaled K's are exp(x) K(x), also where K underflows
    x = _f64([0.5, 3.0, 30.0])
    assert np.allclose(S.scaled_modified_bessel_k0(x).numpy(),
                       np.exp(x.numpy()) * S.modified_bessel_k0(x).numpy(), rtol=1e-14)
    assert S.scaled_modified_bessel_k1(_f64([1000.0])).item() > 0


def test_bessel_wronskians():
    # J1 Y0 - J0 Y1 = 2 / (pi x);  I0 K1 + I1 K0 = 1 / x: checks J/Y and I/K together
    x = np.linspace(0.05, 60.0, 500)
    t = _f64(x)
    w = S.bessel_j1(t).numpy() * S.bessel_y0(t).numpy() - \
        S.bessel_j0(t).numpy() * S.bessel_y1(t).numpy()
    assert np.abs(w * np.pi * x / 2 - 1).max() < 1e-13
    xs = np.linspace(0.05, 30.0, 300)
    t = _f64(xs)
    w = S.modified_bessel_i0(t).numpy() * S.modified_bessel_k1(t).numpy() + \
        S.modified_bessel_i1(t).numpy() * S.modified_bessel_k0(t).numpy()
    assert np.abs(w * xs - 1).max() < 1e-13


def test_bessel_against_scipy():
    sp = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.uniform(-40, 40, 1000), np.logspace(-8, 3, 200)])
    xp = np.abs(x)
    cases = [("bessel_j0", x, sp.j0), ("bessel_j1", x, sp.j1), ("bessel_y0", xp, sp.y0),
             ("bessel_y1", xp, sp.y1), ("modified_bessel_i0", x[np.abs(x) < 700], sp.i0),
             ("modified_bessel_i1", x[np.abs(x) < 700], sp.i1), ("modified_bessel_k0", xp, sp.k0),
             ("modified_bessel_k1", xp, sp.k1), ("scaled_modified_bessel_k0", xp, sp.k0e),
             ("scaled_modified_bessel_k1", xp, sp.k1e),
             ("spherical_bessel_j0", x, lambda v: sp.spherical_jn(0, v)),
             ("airy_ai", rng.uniform(-30, 20, 1000), lambda v: sp.airy(v)[0])]
    for name, xs, ref in cases:
        r = ref(xs)
        got = getattr(S, name)(_f64(xs)).numpy()
        # relative, with a floor: near the zeros of the oscillating ones both are absolute
        err = np.abs(got - r) / np.maximum(np.abs(r), 1e-3)
        assert err.max() < 1e-11, (name, float(err.max()))


@pytest.mark.parity
def test_bessel_parity_with_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(0.1, 20.0, 300)
    for name in ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
                 "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
                 "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
                 "spherical_bessel_j0", "airy_ai"]:
        a = getattr(S, name)(_f64(x)).numpy()
        b = getattr(torch.special, name)(torch.tensor(x)).numpy()
        # PyTorch's J/Y/Ai kernels are accurate to about 1e-4 relative at larger x
        assert np.allclose(a, b, rtol=2e-4, atol=1e-6), name
        t = torch.tensor([0.5], requires_grad=True)
        assert not getattr(torch.special, name)(t).requires_grad


def test_no_gradient_as_pytorch():
    pytest.importorskip("fiamma.autograd")
    x = fiamma.tensor([0.5], requires_grad=True)
    assert not S.bessel_j0(x).requires_grad
    assert not S.chebyshev_polynomial_t(x, 3).requires_grad
