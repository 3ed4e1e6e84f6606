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


def test_loss_result_dtypes_with_a_float64_target_follow_pytorch():
    # PyTorch 2.13: huber_loss and soft_margin_loss compute in the input's dtype, mse_loss,
    # l1_loss and smooth_l1_loss promote to the wider one
    a = fiamma.randn(2, 3, requires_grad=True)
    b = fiamma.randn(2, 3, dtype=fiamma.float64)
    for f, dt in ((F.huber_loss, fiamma.float32), (F.soft_margin_loss, fiamma.float32),
                  (F.mse_loss, fiamma.float64), (F.l1_loss, fiamma.float64),
                  (F.smooth_l1_loss, fiamma.float64)):
        loss = f(a, b)
        assert loss.dtype == dt, f.__name__
        (g,) = fiamma.autograd.grad(loss, a)
        assert g.dtype == fiamma.float32
    d = (a.detach().double() - b).numpy()
    ref = np.where(np.abs(d) <= 1.0, 0.5 * d * d, np.abs(d) - 0.5).mean()
    assert abs(F.huber_loss(a, b).item() - ref) < 1e-6
