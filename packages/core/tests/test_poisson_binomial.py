"""fiamma.poisson / fiamma.binomial: same-seed reproducibility, means and variances within a
few standard errors (fixed seeds), a chi-square goodness of fit, edge cases, errors, gradients
as PyTorch's."""

import numpy as np
import pytest

import fiamma

N = 40000


def _gen(seed):
    return fiamma.Generator().manual_seed(seed)


def _check_moments(x, mean, var):
    n = x.size
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / n) + 1e-12
    # sd of the sample variance ~ var * sqrt(2 / n) (plus the excess kurtosis term, small here)
    assert abs(x.var() - var) < 6 * var * np.sqrt(2.0 / n) + 1e-12


@pytest.mark.parametrize("lam", [0.3, 4.0, 9.5, 10.0, 75.0, 1e6])
def test_poisson_moments(lam):
    x = fiamma.poisson(fiamma.full((N,), lam, dtype=fiamma.float64), generator=_gen(7)).numpy()
    assert np.all(x == np.floor(x)) and x.min() >= 0
    _check_moments(x, lam, lam)


@pytest.mark.parametrize("n,p", [(5, 0.3), (12, 0.5), (40, 0.5), (1000, 0.02), (500, 0.95),
                                 (1e6, 0.4)])
def test_binomial_moments(n, p):
    x = fiamma.binomial(fiamma.full((N,), float(n), dtype=fiamma.float64),
                        fiamma.full((N,), p, dtype=fiamma.float64), generator=_gen(8)).numpy()
    assert np.all(x == np.floor(x)) and x.min() >= 0 and x.max() <= n
    _check_moments(x, n * p, n * p * (1 - p))


def test_goodness_of_fit():
    from math import comb, exp, factorial

    x = fiamma.poisson(fiamma.full((N,), 12.0, dtype=fiamma.float64), generator=_gen(3))
    obs = np.bincount(x.numpy().astype(int), minlength=40)[:40]
    pmf = np.array([exp(-12.0) * 12.0 ** k / factorial(k) for k in range(40)]) * N
    m = pmf > 5
    chi = ((obs[m] - pmf[m]) ** 2 / pmf[m]).sum()
    assert chi < m.sum() + 6 * np.sqrt(2 * m.sum())          # well inside the chi2 tail
    x = fiamma.binomial(fiamma.full((N,), 30.0), fiamma.full((N,), 0.4), generator=_gen(4))
    obs = np.bincount(x.numpy().astype(int), minlength=31)
    pmf = np.array([comb(30, k) * 0.4 ** k * 0.6 ** (30 - k) for k in range(31)]) * N
    m = pmf > 5
    chi = ((obs[m] - pmf[m]) ** 2 / pmf[m]).sum()
    assert chi < m.sum() + 6 * np.sqrt(2 * m.sum())


def test_reproducible_and_advances():
    r = fiamma.full((100,), 20.0)
    a = fiamma.poisson(r, generator=_gen(5))
    b = fiamma.poisson(r, generator=_gen(5))
    assert a.tolist() == b.tolist()
    g = _gen(5)
    assert fiamma.poisson(r, generator=g).tolist() == a.tolist()
    assert fiamma.poisson(r, generator=g).tolist() != a.tolist()
    fiamma.manual_seed(11)
    c = fiamma.binomial(fiamma.full((50,), 100.0), fiamma.full((50,), 0.3))
    fiamma.manual_seed(11)
    assert fiamma.binomial(fiamma.full((50,), 100.0), fiamma.full((50,), 0.3)).tolist() == \
        c.tolist()


def test_edge_cases_and_dtypes():
    assert fiamma.poisson(fiamma.zeros(4)).tolist() == [0.0] * 4
    assert fiamma.poisson(fiamma.zeros(2, 3, dtype=fiamma.float64)).dtype == fiamma.float64
    assert fiamma.poisson(fiamma.zeros(0)).shape == (0,)
    n = fiamma.tensor([0.0, 10.0, 10.0, -3.0, 7.9], dtype=fiamma.float64)
    p = fiamma.tensor([1.0, 0.0, 1.0, 0.5, 1.0], dtype=fiamma.float64)
    assert fiamma.binomial(n, p).tolist() == [0.0, 0.0, 10.0, 0.0, 7.9]
    assert np.isnan(fiamma.binomial(fiamma.tensor([5.0]), fiamma.tensor([float("nan")])).item())
    r = fiamma.binomial(fiamma.tensor([5.0, 6.0]), fiamma.tensor([[0.0], [1.0]]))
    assert r.tolist() == [[0.0, 0.0], [5.0, 6.0]]


def test_errors():
    with pytest.raises(RuntimeError, match="non-negative"):
        fiamma.poisson(fiamma.tensor([-1.0]))
    with pytest.raises(RuntimeError, match="non-negative"):
        fiamma.poisson(fiamma.tensor([float("nan")]))
    with pytest.raises(NotImplementedError, match="Long"):
        fiamma.poisson(fiamma.tensor([1]))
    with pytest.raises(ValueError, match="floating-point"):
        fiamma.binomial(fiamma.tensor([5]), fiamma.tensor([0.5]))
    with pytest.raises(RuntimeError, match="dtype"):
        fiamma.binomial(fiamma.tensor([5.0]), fiamma.tensor([0.5], dtype=fiamma.float64))
    with pytest.raises(TypeError, match="generator"):
        fiamma.binomial(fiamma.tensor([-5.0]), fiamma.tensor([0.5]), fiamma.tensor([1.0]))
    with pytest.raises(TypeError, match="generator"):
        fiamma.poisson(fiamma.tensor([0.0]), generator=1)


def test_gradients():
    pytest.importorskip("fiamma.autograd")
    r = fiamma.tensor([2.0, 5.0], requires_grad=True)
    y = fiamma.poisson(r)
    assert y.requires_grad
    y.sum().backward()
    assert r.grad.tolist() == [0.0, 0.0]
    c = fiamma.tensor([5.0], requires_grad=True)
    y = fiamma.binomial(c, fiamma.tensor([0.5]))
    assert y.requires_grad                       # as PyTorch; its backward raises
    with pytest.raises(RuntimeError, match="binomial"):
        y.sum().backward()


@pytest.mark.parity
def test_parity_errors_with_torch():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.poisson(torch.tensor([-1.0]))
    c, p = [7.9, 10.0, -3.0, 4.0], [1.0, 1.5, 0.5, 0.0]
    assert torch.binomial(torch.tensor(c), torch.tensor(p)).tolist() == \
        fiamma.binomial(fiamma.tensor(c), fiamma.tensor(p)).tolist()
