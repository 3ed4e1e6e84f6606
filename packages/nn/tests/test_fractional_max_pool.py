"""Fractional max pooling: the regions from the documented start rule, values, indices and
gradients, the modules, errors, and PyTorch parity for given random samples."""

import math

import numpy as np
import pytest

import fiamma
from fiamma import nn
from fiamma.nn import functional as F


def _starts(u, n, m, k):
    if m == 1:
        return [n - k]
    alpha = (n - k) / (m - 1)
    return [math.floor((i + u) * alpha) - math.floor(u * alpha) for i in range(m - 1)] + [n - k]


def test_regions_values_indices_and_gradient_2d():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 11))
    s = rng.random((2, 3, 2))
    xt = fiamma.tensor(x, requires_grad=True)
    y, idx = F.fractional_max_pool2d(xt, (2, 3), output_size=(4, 5), return_indices=True,
                                     _random_samples=fiamma.tensor(s))
    assert tuple(y.shape) == (2, 3, 4, 5) and idx.dtype is fiamma.int64
    for b in range(2):
        for c in range(3):
            rows = _starts(s[b, c, 1], 9, 4, 2)  # sample 1 places the rows (height)
            cols = _starts(s[b, c, 0], 11, 5, 3)  # sample 0 the columns (width)
            for i, r in enumerate(rows):
                for j, q in enumerate(cols):
                    win = x[b, c, r:r + 2, q:q + 3]
                    assert y[b, c, i, j].item() == win.max()
                    a = int(idx[b, c, i, j])
                    assert x[b, c].reshape(-1)[a] == win.max()
    g = rng.standard_normal((2, 3, 4, 5))
    y.backward(fiamma.tensor(g))
    want = np.zeros_like(x).reshape(2, 3, -1)
    for b in range(2):
        for c in range(3):
            np.add.at(want[b, c], idx[b, c].numpy().reshape(-1), g[b, c].reshape(-1))
    np.testing.assert_allclose(xt.grad.numpy(), want.reshape(x.shape), rtol=1e-12)


def test_3d_ratio_unbatched_and_nan():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 7, 8)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    m = nn.FractionalMaxPool3d(2, output_ratio=0.5, return_indices=True,
                               _random_samples=fiamma.full((1, 2, 3), 0.0))
    y, idx = m(fiamma.tensor(x))
    assert tuple(y.shape) == (2, 3, 3, 4)
    assert math.isnan(y[0, 0, 0, 0].item()) and int(idx[0, 0, 0, 0]) == 0  # a NaN wins
    y2 = F.fractional_max_pool3d(fiamma.tensor(x), 2, output_size=(3, 3, 4))  # fresh samples
    assert tuple(y2.shape) == (2, 3, 3, 4)


def test_module_and_errors():
    m = nn.FractionalMaxPool2d(3, output_ratio=0.5)
    assert repr(m) == "FractionalMaxPool2d()" and m._random_samples is None
    assert list(m.state_dict()) == []
    assert tuple(m(fiamma.randn(1, 2, 10, 12)).shape) == (1, 2, 5, 6)
    with pytest.raises(ValueError, match="requires specifying either an output size"):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5)
    with pytest.raises(RuntimeError, match="too large for the input size 4"):
        F.fractional_max_pool2d(fiamma.ones(1, 1, 4, 4), 3, output_size=3)
    with pytest.raises(RuntimeError, match="expected _random_samples of shape"):
        F.fractional_max_pool2d(fiamma.ones(1, 1, 4, 4), 2, output_size=2,
                                _random_samples=fiamma.zeros(1, 1, 3))
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        F.fractional_max_pool2d(fiamma.ones(4, 4), 2, output_size=2)


@pytest.mark.parity
def test_parity_with_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    for nd in (2, 3):
        for dt in (np.float32, np.float64):
            sizes = (9, 8, 10)[:nd] if nd == 3 else (9, 11)
            x = rng.standard_normal((2, 3) + sizes).astype(dt)
            s = rng.random((2, 3, nd)).astype(dt)
            k, out = (2,) * nd, tuple(v // 2 for v in sizes)
            ft = getattr(torch.nn.functional, f"fractional_max_pool{nd}d")
            ff = getattr(F, f"fractional_max_pool{nd}d")
            xt, xf = torch.tensor(x, requires_grad=True), fiamma.tensor(x, requires_grad=True)
            yt, it = ft(xt, k, output_size=out, return_indices=True,
                        _random_samples=torch.tensor(s))
            yf, i_f = ff(xf, k, output_size=out, return_indices=True,
                         _random_samples=fiamma.tensor(s))
            assert np.array_equal(yf.detach().numpy(), yt.detach().numpy())
            assert np.array_equal(i_f.numpy(), it.numpy())
            yt.sum().backward()
            yf.sum().backward()
            np.testing.assert_array_equal(xf.grad.numpy(), xt.grad.numpy())
