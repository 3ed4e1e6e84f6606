"""PyTorch's positional parameters of the functional API that programs pass."""
import numpy as np

import fiamma
import fiamma.nn.functional as F


def test_softmax_family_takes_stacklevel_before_dtype():
    x = fiamma.randn(2, 3)
    ref = np.exp(x.numpy()) / np.exp(x.numpy()).sum(1, keepdims=True)
    np.testing.assert_allclose(F.softmax(x, 1, 5).numpy(), ref, rtol=1e-6)
    np.testing.assert_allclose(F.log_softmax(x, 1, 5).numpy(), np.log(ref), rtol=1e-5, atol=1e-6)
    r = F.softmin(x, 1, 3, fiamma.float64)
    assert r.dtype == fiamma.float64
    e = np.exp(-x.numpy().astype(np.float64))
    np.testing.assert_allclose(r.numpy(), e / e.sum(1, keepdims=True), rtol=1e-6)
    assert F.softmax(x, dim=0, _stacklevel=5, dtype=fiamma.float64).dtype == fiamma.float64
