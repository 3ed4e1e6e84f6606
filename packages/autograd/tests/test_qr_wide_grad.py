"""linalg.qr's derivative for wide matrices (m < n, reduced = complete) and the modes it
refuses: finite differences (first and second order) and PyTorch's gradients."""
import numpy as np
import pytest
from _formula_check import check

import fiamma
from fiamma import linalg as L


def _leaf(a):
    return fiamma.tensor(a, dtype=fiamma.float64, requires_grad=True)


@pytest.mark.parametrize("shape", [(2, 5), (3, 4), (2, 2, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_wide_qr_derivatives(shape, mode):
    a = _leaf(np.random.default_rng(1).standard_normal(shape))
    check(lambda x: L.qr(x, mode=mode), a)
    check(lambda x: L.qr(x, mode=mode)[1], a)  # R only: gQ is None
    check(lambda x: L.qr(x, mode=mode)[0], a)  # Q only: gR is None


def test_wide_qr_complex_against_a_real_embedding():
    # |Q|^2 and R's real part as real functions of (Re A, Im A): finite differences
    rng = np.random.default_rng(2)
    re, im = _leaf(rng.standard_normal((2, 4))), _leaf(rng.standard_normal((2, 4)))

    def f(x, y):
        q, r = L.qr(fiamma.complex(x, y))
        return (q.abs() ** 2).sum() + r.real.sum() + (r.imag ** 2).sum()
    check(f, re, im, gg=False)


def test_qr_modes_without_a_derivative_raise():
    a = _leaf(np.random.default_rng(3).standard_normal((4, 2)))
    q, r = L.qr(a, mode="complete")
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        (q.sum() + r.sum()).backward()
    (r,) = [L.qr(a, mode="r")[1]]
    with pytest.raises(RuntimeError, match="mode='r'"):
        r.sum().backward()


@pytest.mark.parity
def test_wide_qr_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    for shape, cplx in (((3, 5), False), ((2, 3, 6), True)):
        a = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
        t = torch.tensor(a, requires_grad=True)
        q, r = torch.linalg.qr(t)
        wq, wr = rng.standard_normal(tuple(q.shape)), rng.standard_normal(tuple(r.shape))
        ((q * torch.tensor(wq)).sum().real + (r * torch.tensor(wr)).sum().real).backward()
        f = fiamma.tensor(a, requires_grad=True)
        q2, r2 = L.qr(f)
        ((q2 * fiamma.tensor(wq)).sum().real + (r2 * fiamma.tensor(wr)).sum().real).backward()
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), atol=1e-12)
