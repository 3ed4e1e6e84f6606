"""With PyTorch installed: every optimizer and option follows torch.optim's trajectory (float64
to 1e-9; float32 to float32 precision). Skipped without PyTorch, which is never required."""

import numpy as np
import pytest
import reference as R
from test_optimizers import CASES, SHAPES

import fiamma
from fiamma import optim

torch = pytest.importorskip("torch")


def _trajectory(lib, name, kw, dtype, steps=60):
    rng = np.random.default_rng(1)
    starts = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    if lib == "fiamma":
        params = [fiamma.tensor(x) for x in starts]
        opt = getattr(optim, name)(params, **kw)
        grad = fiamma.tensor
    else:
        params = [torch.tensor(x) for x in starts]
        opt = getattr(torch.optim, name)(params, **kw)
        grad = torch.tensor
    for t in range(1, steps + 1):
        for k, p in enumerate(params):
            p.grad = grad(R.problem_grad(np.asarray(p.detach().numpy(), np.float64), k, t)
                          .astype(dtype))
        opt.step()
    return [np.asarray(p.detach().numpy()) for p in params]


@pytest.mark.parametrize("name,kw", [(c[0], c[2]) for c in CASES],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_trajectory_equals_pytorch(name, kw, dtype):
    ours = _trajectory("fiamma", name, kw, dtype)
    theirs = _trajectory("torch", name, kw, dtype)
    tol = 1e-9 if dtype == np.float64 else 1e-4
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
