"""fiamma.fused: the fused optimizer kernels against NumPy float64 arithmetic."""

import numpy as np
import pytest

import fiamma
from fiamma import fused


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("amsgrad,maximize,decoupled", [(False, False, False),
                                                        (True, True, False),
                                                        (False, False, True)])
def test_adam_matches_numpy(dt, amsgrad, maximize, decoupled, rng):
    shapes = [(7,), (3, 5), (), (0,), (70_000,)]  # the last one crosses the threading bound
    ps = [rng.standard_normal(s) for s in shapes]
    gs = [rng.standard_normal(s) for s in shapes]
    ms = [rng.standard_normal(s) * 0.1 for s in shapes]
    vs = [rng.random(s) * 0.1 for s in shapes]
    vms = [v + rng.random(v.shape) * 0.05 for v in vs]
    steps = [3, 1, 7, 2, 4]
    ft = [[fiamma.tensor(x, dtype=dt) for x in arrs] for arrs in (ps, gs, ms, vs, vms)]
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.99, 1e-8, 0.05
    fused.adam_(*ft[:4], ft[4] if amsgrad else None, steps=steps, lr=lr, beta1=b1, beta2=b2,
                eps=eps, weight_decay=wd, amsgrad=amsgrad, maximize=maximize,
                decoupled=decoupled)
    tol = 2e-6 if dt is fiamma.float32 else 1e-13
    for i, t in enumerate(steps):
        p, g, m, v, vm = ps[i], gs[i], ms[i], vs[i], vms[i]
        g = -g if maximize else g
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = m + (1 - b1) * (g - m)
        v = v * b2 + (1 - b2) * g * g
        vv = np.maximum(vm, v) if amsgrad else v
        p = p - lr / (1 - b1 ** t) * m / (np.sqrt(vv) / np.sqrt(1 - b2 ** t) + eps)
        np.testing.assert_allclose(ft[0][i].numpy(), p, rtol=tol, atol=tol)
        np.testing.assert_allclose(ft[2][i].numpy(), m, rtol=tol, atol=tol)
        np.testing.assert_allclose(ft[3][i].numpy(), v, rtol=tol, atol=tol)
        if amsgrad:
            np.testing.assert_allclose(ft[4][i].numpy(), vv, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", [fiamma.float32, fiamma.float64])
@pytest.mark.parametrize("momentum,nesterov,first", [(0.0, False, False), (0.9, False, True),
                                                     (0.9, True, False)])
def test_sgd_matches_numpy(dt, momentum, nesterov, first, rng):
    shapes = [(5,), (4, 4), (300_000,)]
    ps, gs, bs = ([rng.standard_normal(s) for s in shapes] for _ in range(3))
    fp, fg, fb = ([fiamma.tensor(x, dtype=dt) for x in arrs] for arrs in (ps, gs, bs))
    v0 = [b._version for b in fb]
    fused.sgd_(fp, fg, fb if momentum else None, lr=0.1, momentum=momentum, dampening=0.1,
               weight_decay=0.01, nesterov=nesterov, first=first)
    tol = 2e-6 if dt is fiamma.float32 else 1e-14
    for p, g, b, tp, tb, v in zip(ps, gs, bs, fp, fb, v0):
        g = g + 0.01 * p
        if momentum:
            b = g if first else b * momentum + 0.9 * g
            g = g + momentum * b if nesterov else b
            np.testing.assert_allclose(tb.numpy(), b, rtol=tol, atol=tol)
            assert tb._version > v
        np.testing.assert_allclose(tp.numpy(), p - 0.1 * g, rtol=tol, atol=tol)


def test_supports():
    assert fused.supports([fiamma.ones(2), fiamma.ones(3)])
    assert not fused.supports([fiamma.ones(2), fiamma.ones(2, dtype=fiamma.float64)])
    assert not fused.supports([fiamma.ones(2, 2).t()])
    assert not fused.supports([fiamma.ones(2, dtype=fiamma.float16)])
    assert not fused.supports([3.0])


def test_errors_name_the_kernel():
    p = fiamma.ones(3)
    with pytest.raises(ValueError, match="fused.sgd_: expected 1 grads"):
        fused.sgd_([p], [], lr=0.1)
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \[2\]"):
        fused.sgd_([p], [fiamma.ones(2)], lr=0.1)
    with pytest.raises(ValueError, match="contiguous"):
        fused.sgd_([fiamma.ones(2, 2)], [fiamma.ones(4, 2)[::2]], lr=0.1)
    with pytest.raises(ValueError, match="step counts"):
        fused.adam_([p], [p], [p], [p], steps=[], lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8)
