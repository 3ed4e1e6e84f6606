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
