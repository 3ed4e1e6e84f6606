"""Gradients through complex tensors (PyTorch's convention: z.grad = dL/dRe z + i dL/dIm z,
the conjugate Wirtinger derivative doubled): finite differences on the real and imaginary
parts of every complex input (gradcheck, complex128), second derivatives, closed forms, and
parity with PyTorch."""

import numpy as np
import pytest

import fiamma
from fiamma.autograd import gradcheck, gradgradcheck

C = fiamma.complex128
R = fiamma.float64


def cz(*shape, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape) + shift
    return fiamma.tensor(a, dtype=C).requires_grad_(True)


def rx(*shape, seed=1, shift=0.0):
    rng = np.random.default_rng(seed)
    return fiamma.tensor(rng.standard_normal(shape) + shift, dtype=R).requires_grad_(True)


# ---- closed forms -------------------------------------------------------------------------------

def test_abs_squared_gradient_is_2z():
    z = cz(5)
    (z.abs() ** 2).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), 2 * z.detach().numpy(), rtol=1e-12)
    assert z.grad.dtype is C


def test_real_input_keeps_real_part():
    x = rx(4)
    z = cz(4)
    (x * z).real.sum().backward()
    assert x.grad.dtype is R
    np.testing.assert_allclose(x.grad.numpy(), z.detach().numpy().real)
    # d Re(x z) / d conj(z) doubled: x (a real coefficient)
    np.testing.assert_allclose(z.grad.numpy(), x.detach().numpy() + 0j)


def test_holomorphic_gradient_is_conjugated_derivative():
    z = cz(3)
    w = fiamma.tensor([1 + 2j, -0.5j, 3.0], dtype=C)
    # L = Re(sum(w * exp(z))): grad = conj(w * exp(z))... doubled Wirtinger: conj(w exp(z))
    (w * z.exp()).real.sum().backward()
    want = np.conj(w.numpy() * np.exp(z.detach().numpy()))
    np.testing.assert_allclose(z.grad.numpy(), want, rtol=1e-12)


def test_mul_div_gradients_are_conjugated():
    # d/da Re(sum(a*b*w)) = conj(b*w); d/da Im(sum(a/b)) = conj(-1j/b), and for b likewise: the
    # saved factors are read conjugated (gpytorch's Toeplitz kernels backpropagate through
    # complex FFT products)
    av = np.array([1 + 2j, -0.5 + 1j])
    bv = np.array([0.3 - 1j, 2 + 0.5j])
    wv = np.array([1.5 - 0.5j, -1 + 2j])
    a = fiamma.tensor(av, requires_grad=True)
    b = fiamma.tensor(bv, requires_grad=True)
    ((a * b * fiamma.tensor(wv)).real.sum() + (a / b).imag.sum()).backward()
    ga = np.conj(bv * wv) + np.conj(-1j / bv)
    gb = np.conj(av * wv) + np.conj(-1j * (-av / bv ** 2))
    np.testing.assert_allclose(a.grad.numpy(), ga, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-12)
    x = fiamma.tensor([0.5, -1.0], dtype=fiamma.float64, requires_grad=True)
    (x * fiamma.tensor(bv)).imag.sum().backward()  # real input: d/dx Im(x b) = Im(b)
    np.testing.assert_allclose(x.grad.numpy(), bv.imag, rtol=1e-12)


def test_implicit_grad_needs_a_real_scalar():
    z = cz(1)
    with pytest.raises(RuntimeError, match="real scalar"):
        z.sum().backward()


def test_requires_grad_on_complex_and_refusal_on_ints():
    z = fiamma.zeros(2, dtype=fiamma.complex64).requires_grad_()
    assert z.requires_grad
    with pytest.raises(RuntimeError, match="floating point and complex"):
        fiamma.zeros(2, dtype=fiamma.int64).requires_grad_()


def test_complex64_grad_dtype():
    z = fiamma.tensor([1 + 1j, 2 - 1j], dtype=fiamma.complex64, requires_grad=True)
    (z * z).abs().sum().backward()
    assert z.grad.dtype is fiamma.complex64


# ---- finite differences: every op that takes complex -----------------------------------------

UNARY = ["exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
         "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
         "sigmoid", "square", "neg", "abs", "angle", "sgn", "conj", "conj_physical", "exp2"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    z = cz(2, 3, shift=0.3)
    fn = getattr(fiamma, name)
    assert gradcheck(fn, (z,))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "abs", "angle", "sgn",
                                  "reciprocal", "acosh"])
def test_unary_second_order(name):
    z = cz(3, shift=0.3)
    assert gradgradcheck(getattr(fiamma, name), (z,))


BINARY = {
    "add": lambda a, b: a + b,
    "add_alpha": lambda a, b: fiamma.add(a, b, alpha=2 - 1j),
    "sub": lambda a, b: a - b * 2,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b,
    "rdiv_scalar": lambda a, b: (1 + 1j) / a + b * 3j,
    "pow_scalar": lambda a, b: a ** (1.5 - 0.5j) + 2 ** b,
    "pow_int": lambda a, b: a ** 3 + b ** -2,
    "where": lambda a, b: fiamma.where(a.real > 0, a, b),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_complex_complex(name):
    assert gradcheck(BINARY[name], (cz(2, 3, shift=0.5), cz(3, seed=2, shift=0.5)))


@pytest.mark.parametrize("name", ["add", "mul", "div", "pow", "where"])
def test_binary_mixed_real_complex(name):
    fn = BINARY[name]
    x = rx(2, 3, shift=2.0)
    assert gradcheck(fn, (cz(3, seed=2, shift=0.5), x))
    assert gradcheck(fn, (x, cz(3, seed=3, shift=0.5)))


def test_binary_second_order():
    assert gradgradcheck(lambda a, b: a * b / (a + 2), (cz(3), cz(3, seed=4)))
    assert gradgradcheck(lambda a, x: (a * x) ** 2, (cz(3), rx(3)))


VIEWS = {
    "real": lambda z: z.real * 1.0,
    "imag": lambda z: z.imag * 1.0,
    "view_as_real": lambda z: fiamma.view_as_real(z) * 1.0,
    "view_as_real_t": lambda z: fiamma.view_as_real(z.t()),
    "real_imag_mix": lambda z: z.real * z.imag + z.imag.exp(),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_to_real(name):
    assert gradcheck(VIEWS[name], (cz(2, 3),))
    assert gradgradcheck(VIEWS[name], (cz(2, 3),))


def test_complex_from_real_parts():
    x, y = rx(3), rx(3, seed=5)
    assert gradcheck(fiamma.complex, (x, y))
    assert gradcheck(lambda r, t: fiamma.polar(r, t), (rx(3, shift=3.0), y))
    assert gradcheck(lambda p: fiamma.view_as_complex(p), (rx(3, 2),))
    assert gradcheck(lambda p: x.detach().to(C) * p.to(C), (rx(3),))
    assert gradgradcheck(lambda r, t: fiamma.polar(r, t).exp(), (rx(3, shift=3.0), y))


def test_cast_complex_to_real_keeps_real_part_gradient():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert gradcheck(lambda z: (z * z).to(R), (cz(3),))


REDUCE = {
    "sum": lambda z: z.sum(),
    "sum_dim": lambda z: z.sum(1, keepdim=True),
    "mean": lambda z: z.mean(0),
    "prod": lambda z: z.prod(1),
    "prod_all": lambda z: z.prod(),
    "cumsum": lambda z: z.cumsum(1),
    "cumprod": lambda z: z.cumprod(0),
    "var": lambda z: z.var(1),
    "std": lambda z: z.std(),
    "norm": lambda z: z.norm(),
    "vector_norm_1": lambda z: fiamma.linalg.vector_norm(z, 1, dim=1),
    "vector_norm_3": lambda z: fiamma.linalg.vector_norm(z, 3),
    "vector_norm_inf": lambda z: fiamma.linalg.vector_norm(z, float("inf")),
    "var_mean": lambda z: fiamma.var_mean(z, 1),
    "std_mean": lambda z: fiamma.std_mean(z),
    "logsumexp": lambda z: fiamma.logsumexp(z, 1),
    "logcumsumexp": lambda z: fiamma.logcumsumexp(z, 0),
    "nansum": lambda z: z.nansum(0),
    "trace": lambda z: fiamma.trace(z[:, :3]),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reductions(name):
    assert gradcheck(REDUCE[name], (cz(3, 4),))


def test_prod_with_a_zero():
    z = fiamma.tensor([[1 + 1j, 0j, 2 - 1j], [0.5j, 1.0, -1 + 0.25j]], dtype=C,
                      requires_grad=True)
    assert gradcheck(lambda t: t.prod(1), (z,))


PRODUCTS = {
    "matmul": lambda a, b: a @ b,
    "mm": lambda a, b: fiamma.mm(a, b),
    "bmm": lambda a, b: fiamma.bmm(a.unsqueeze(0), b.unsqueeze(0)),
    "mv": lambda a, b: fiamma.mv(a, b[:, 0]),
    "dot": lambda a, b: fiamma.dot(a[0], b[:, 1]),
    "vdot": lambda a, b: fiamma.vdot(a[0], b[:, 1]),
    "einsum": lambda a, b: fiamma.einsum("ij,jk->ik", a, b),
    "einsum_trace": lambda a, b: fiamma.einsum("ij,ji->", a, b),
    "addmm": lambda a, b: fiamma.addmm(a @ b, a, b, beta=0.5, alpha=2.0),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products(name):
    assert gradcheck(PRODUCTS[name], (cz(2, 3), cz(3, 2, seed=6)))


def test_products_mixed_and_second_order():
    assert gradcheck(lambda a, b: a @ b.to(C), (cz(2, 3), rx(3, 2)))
    assert gradgradcheck(lambda a, b: a @ b, (cz(2, 3), cz(3, 2, seed=6)))


INDEX = {
    "getitem": lambda z: z[1:, ::2],
    "advanced": lambda z: z[fiamma.tensor([0, 2, 0])],
    "bool_mask": lambda z: z[fiamma.tensor([True, False, True])],
    "gather": lambda z: z.gather(1, fiamma.tensor([[0, 0], [1, 2], [3, 1]])),
    "index_select": lambda z: z.index_select(1, fiamma.tensor([3, 0, 3])),
    "take": lambda z: z.take(fiamma.tensor([0, 5, 5])),
    "cat": lambda z: fiamma.cat([z, z * 2j], 1),
    "stack": lambda z: fiamma.stack([z, z.exp()]),
    "flip": lambda z: z.flip(0),
    "transpose": lambda z: z.t().reshape(-1),
    "expand": lambda z: z[:, :1].expand(3, 5),
    "setitem": lambda z: _setitem(z),
    "index_put": lambda z: z.index_put((fiamma.tensor([0, 0]),), z[1:] * 1j,
                                       accumulate=True),
    "scatter_add": lambda z: z.scatter_add(0, fiamma.tensor([[0, 2, 1, 0]]), z[1:2] * 2),
    "scatter_reduce_sum": lambda z: z.scatter_reduce(0, fiamma.tensor([[0, 2, 1, 0]]), z[1:2],
                                                     "sum", include_self=False),
    "scatter_reduce_prod": lambda z: z.scatter_reduce(0, fiamma.tensor([[0, 2, 1, 0]]),
                                                      z[1:2].exp(), "prod"),
    "scatter_reduce_mean": lambda z: z.scatter_reduce(0, fiamma.tensor([[0, 2, 1, 0]]),
                                                      z[1:2], "mean"),
}


def _setitem(z):
    y = z * 1.0
    y[1] = z[0] * 1j
    return y


@pytest.mark.parametrize("name", sorted(INDEX))
def test_index_and_shape_ops(name):
    assert gradcheck(INDEX[name], (cz(3, 4),))


SPECTRAL = {
    "fft": lambda z: fiamma.fft.fft(z),
    "ifft_n": lambda z: fiamma.fft.ifft(z, n=6, norm="ortho"),
    "fft2": lambda z: fiamma.fft.fft2(z, norm="forward"),
    "fftn": lambda z: fiamma.fft.fftn(z, s=(2, 5)),
    "ifftn": lambda z: fiamma.fft.ifftn(z, dim=(0,)),
    "irfft": lambda z: fiamma.fft.irfft(z, n=5),
    "hfft": lambda z: fiamma.fft.hfft(z),
    "irfftn": lambda z: fiamma.fft.irfftn(z),
}


@pytest.mark.parametrize("name", sorted(SPECTRAL))
def test_fft_complex_input(name):
    assert gradcheck(SPECTRAL[name], (cz(3, 4),))


REAL_SPECTRAL = {
    "fft": lambda x: fiamma.fft.fft(x),
    "ifft": lambda x: fiamma.fft.ifft(x, n=5),
    "rfft": lambda x: fiamma.fft.rfft(x, norm="ortho"),
    "ihfft": lambda x: fiamma.fft.ihfft(x),
    "rfft2": lambda x: fiamma.fft.rfft2(x),
    "rfftn_s": lambda x: fiamma.fft.rfftn(x, s=(2, 6)),
    "ihfftn": lambda x: fiamma.fft.ihfftn(x),
    "fftshift": lambda x: fiamma.fft.fftshift(fiamma.fft.fft2(x)),
    "irfft_real": lambda x: fiamma.fft.irfft(x),
    "roundtrip": lambda x: fiamma.fft.irfft(fiamma.fft.rfft(x) * 1j, n=4),
    "stft": lambda x: fiamma.stft(x.reshape(-1), 4, 2, window=fiamma.hann_window(
        4, dtype=R), return_complex=True),
}


@pytest.mark.parametrize("name", sorted(REAL_SPECTRAL))
def test_fft_real_input_complex_output(name):
    assert gradcheck(REAL_SPECTRAL[name], (rx(3, 4),))


def test_fft_second_order():
    assert gradgradcheck(lambda x: fiamma.fft.rfft(x).abs(), (rx(3, 4, shift=0.5),))
    assert gradgradcheck(lambda z: fiamma.fft.fft(z * z), (cz(4),))


def _herm(a):
    return a @ a.mH + 3 * fiamma.eye(a.shape[-1], dtype=a.dtype)


def _svd_inv(a):
    # phase-invariant functions of the singular vectors (they are unique up to phases)
    u, s, vh = fiamma.linalg.svd(a, full_matrices=False)
    return u @ (s.to(C).unsqueeze(-1) * vh), s, u.abs(), vh.abs()


L = fiamma.linalg
LINALG = {
    "inv": lambda a: L.inv(a),
    "inv_ex": lambda a: L.inv_ex(a)[0],
    "det": lambda a: L.det(a),
    "solve": lambda a: L.solve(a, a[:, :1] * 1j),
    "solve_triangular": lambda a: L.solve_triangular(a.triu(), a[:, :2], upper=True),
    "solve_triangular_right": lambda a: L.solve_triangular(a.tril(), a[:2], upper=False,
                                                           left=False),
    "matrix_power": lambda a: L.matrix_power(a, 3) + L.matrix_power(a, -1),
    "slogdet": lambda a: L.slogdet(a),
    "cholesky": lambda a: L.cholesky(_herm(a)),
    "cholesky_upper": lambda a: L.cholesky(_herm(a), upper=True),
    "eigh": lambda a: (lambda w, v: (w, v.abs(), v @ (w.to(C).unsqueeze(-1) * v.mH)))(
        *L.eigh(a + a.mH)),
    "eigvalsh": lambda a: L.eigvalsh(a + a.mH),
    "svd": _svd_inv,
    "svd_wide": lambda a: _svd_inv(a[:2]),
    "svdvals": lambda a: L.svdvals(a),
    "qr": lambda a: (lambda q, r: (q @ r, q.abs(), r.abs()))(*L.qr(a)),
    "pinv": lambda a: L.pinv(a[:, :2]),
    "pinv_hermitian": lambda a: L.pinv(_herm(a), hermitian=True),
    "lstsq": lambda a: L.lstsq(a[:, :2], a[:, 2:] * 1j).solution,
    "matrix_norm_fro": lambda a: L.matrix_norm(a),
    "matrix_norm_nuc": lambda a: L.matrix_norm(a, "nuc"),
    "matrix_norm_2": lambda a: L.matrix_norm(a, 2),
    "matrix_norm_1": lambda a: L.matrix_norm(a, 1),
    "matrix_norm_inf": lambda a: L.matrix_norm(a, float("inf")),
    "cond": lambda a: L.cond(a),
    "vecdot": lambda a: L.vecdot(a, a.exp()),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg(name):
    a = cz(3, 3) + 3 * fiamma.eye(3, dtype=C)
    assert gradcheck(LINALG[name], (a.detach().requires_grad_(),))


@pytest.mark.parametrize("name", ["inv", "det", "cholesky", "eigh", "svd"])
def test_linalg_second_order(name):
    a = cz(3, 3) + 3 * fiamma.eye(3, dtype=C)
    assert gradgradcheck(LINALG[name], (a.detach().requires_grad_(),))


def _eig_inv(a):
    # phase-invariant functions of the eigenvectors (unit norm, phases arbitrary)
    w, v = L.eig(a)
    return w, v.abs(), (v * w.unsqueeze(-2)) @ L.inv(v)


def test_eig_eigvals_gradients():
    a = cz(4, 4)
    assert gradcheck(_eig_inv, (a,))
    assert gradcheck(L.eigvals, (a,))
    x = rx(4, 4)  # a real matrix: complex results, a real gradient
    assert gradcheck(_eig_inv, (x,))
    assert gradcheck(L.eigvals, (x,))
    assert gradgradcheck(lambda t: L.eigvals(t), (rx(3, 3),))


# ---- parity with PyTorch -------------------------------------------------------------------------

PARITY = {
    "abs2": lambda m, z, x: (z.abs() ** 2).sum(),
    "exp_abs": lambda m, z, x: (m.exp(z) * z).abs().sum(),
    "angle": lambda m, z, x: m.angle(z * z).sum(),
    "sgn": lambda m, z, x: m.sgn(z * z).imag.sum(),
    "pow": lambda m, z, x: (z ** z).abs().sum() + (z ** (2.5 + 1j)).real.sum(),
    "mixed": lambda m, z, x: (x * z + x / z - z * 2j).abs().sum(),
    "complex": lambda m, z, x: (m.complex(x, x * x) * z).angle().sum(),
    "polar": lambda m, z, x: (m.polar(x.abs(), x) * z).imag.sum(),
    "matmul": lambda m, z, x: (z[None] @ (z * z)[:, None]).abs().sum(),
    "reduce": lambda m, z, x: (z.sum() * z.mean() * z.prod()).abs() + z.var(),
    "unary": lambda m, z, x: sum(getattr(z, n)().abs().sum() for n in UNARY[:-6]),
}


PARITY_LINALG = {
    "svd": lambda m, a: (lambda u, s, vh: (u.abs() ** 2 * 1.3).sum() + (s * s).sum()
                         + vh.abs().sum() + (u[..., :1] @ vh[:1]).real.sum())(
        *m.linalg.svd(a, full_matrices=False)),
    "qr": lambda m, a: (lambda q, r: (q.abs() ** 3).sum() + r.abs().sum()
                        + (q @ r).imag.sum())(*m.linalg.qr(a)),
    "eigh": lambda m, a: (lambda w, v: w.sum() * 2 + (v.abs() ** 2 * m.arange(3.0)).sum())(
        *m.linalg.eigh(a + a.mH)),
    "cholesky": lambda m, a: m.linalg.cholesky(a @ a.mH + 3 * m.eye(3, dtype=a.dtype),
                                               upper=True).abs().sum(),
    "slogdet": lambda m, a: (lambda s, l: s.real.sum() + l * 3 + s.imag.sum())(
        *m.linalg.slogdet(a)),
    "pinv": lambda m, a: m.linalg.pinv(a[:, :2]).abs().sum(),
    "lstsq": lambda m, a: m.linalg.lstsq(a[:, :2], a[:, 2:]).solution.abs().sum(),
    "det_inv_solve": lambda m, a: m.linalg.det(a).abs() + m.linalg.inv(a).real.sum()
    + m.linalg.solve(a, a[:, 0]).imag.sum(),
    "norms": lambda m, a: m.linalg.matrix_norm(a, 1) + m.linalg.matrix_norm(a, "nuc")
    + m.linalg.cond(a) + m.linalg.eigvalsh(a + a.mH).sum(),
    "eig": lambda m, a: (lambda w, v: (w * w).real.sum() + w.imag.sum() * 2
                         + (v.abs() ** 2 * m.arange(3.0)).sum())(*m.linalg.eig(a)),
    "eigvals": lambda m, a: (m.linalg.eigvals(a) ** 2).real.sum()
    + m.linalg.eigvals(a.real.to(a.dtype)).imag.abs().sum(),
}


@pytest.mark.parity
@pytest.mark.parametrize("name", sorted(PARITY_LINALG))
def test_linalg_parity_with_torch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    av = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    a = fiamma.tensor(av, dtype=C, requires_grad=True)
    ta = torch.tensor(av, dtype=torch.complex128, requires_grad=True)
    PARITY_LINALG[name](fiamma, a).backward()
    PARITY_LINALG[name](torch, ta).backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parity
@pytest.mark.parametrize("name", sorted(PARITY))
def test_parity_with_torch(name):
    torch = pytest.importorskip("torch")
    zv = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j])
    xv = np.array([0.5, -1.0, 2.0])
    z = fiamma.tensor(zv, dtype=C, requires_grad=True)
    x = fiamma.tensor(xv, dtype=R, requires_grad=True)
    tz = torch.tensor(zv, dtype=torch.complex128, requires_grad=True)
    tx = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    PARITY[name](fiamma, z, x).backward()
    PARITY[name](torch, tz, tx).backward()
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-10, atol=1e-12)
    if tx.grad is None:
        assert x.grad is None
    else:
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


# ---- found by the dtype fuzz (2026-11-29) -------------------------------------------------------

@pytest.mark.parametrize("op", ["pow", "float_power"])
def test_pow_of_a_negative_real_base_to_a_complex_exponent(op):
    # the forward casts the real base to complex (log(-x) = log x + i pi); the gradient did not
    # (NaN)
    r = fiamma.tensor([-1.5, 2.0, -0.5], dtype=R).requires_grad_(True)
    b = cz(3, seed=4)
    f = getattr(fiamma, op)
    assert gradcheck(lambda r, b: f(r, b), (r, b))
    y = f(r, b)
    (y * (1 + 0.5j)).real.sum().backward()
    assert np.isfinite(r.grad.numpy()).all() and np.isfinite(b.grad.numpy()).all()


def test_gradients_through_the_complex_compositions():
    # sinc, logaddexp, lerp, addcmul/addcdiv of complex operands are composed from complex
    # arithmetic: their gradients are the compositions'
    a, b = cz(3, seed=5), cz(3, seed=6)
    x = rx(3, seed=7)
    assert gradcheck(lambda a: fiamma.sinc(a), (a,))
    assert gradcheck(lambda a, b: fiamma.logaddexp(a, b), (a, b))
    assert gradcheck(lambda a, b, x: fiamma.lerp(a, b, x.to(C)), (a, b, x))
    assert gradcheck(lambda a, b, x: fiamma.addcmul(a, b, x, value=2), (a, b, x))
    assert gradcheck(lambda a, x, b: fiamma.addcdiv(a, x, b, value=0.5j), (a, x, b))
