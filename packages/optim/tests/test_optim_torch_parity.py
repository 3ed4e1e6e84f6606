"""With PyTorch installed: every optimizer and option follows torch.optim's trajectory (float64
to 1e-9; float32 to float32 precision). Skipped without PyTorch, which is never required."""

import numpy as np
import pytest
import reference as R
from test_optimizers import CASES, SHAPES

import fiamma
from fiamma import optim

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


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


@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=0.01, amsgrad=True)),
                                     ("SGD", dict(lr=0.05, momentum=0.9)),
                                     ("NAdam", dict(lr=0.01)), ("RMSprop", dict(lr=0.01,
                                                                                centered=True))])
def test_optimizer_checkpoints_move_between_pytorch_and_fiamma(name, kw, tmp_path):
    """torch.save(optimizer.state_dict()) -> fiamma.load -> load_state_dict, and back."""
    rng = np.random.default_rng(5)
    start = [rng.standard_normal(s) for s in [(4,), (2, 3)]]

    def grads(params, t, to):
        for k, p in enumerate(params):
            p.grad = to(R.problem_grad(np.asarray(p.detach().numpy(), np.float64), k, t))

    tp = [torch.tensor(x) for x in start]
    topt = getattr(torch.optim, name)(tp, **kw)
    for t in range(1, 4):
        grads(tp, t, torch.tensor)
        topt.step()
    torch.save({"opt": topt.state_dict(), "params": [p.detach() for p in tp]},
               tmp_path / "torch.pt")

    ck = fiamma.load(tmp_path / "torch.pt")
    fp = [p.clone() for p in ck["params"]]
    fopt = getattr(optim, name)(fp, **kw)
    fopt.load_state_dict(ck["opt"])
    for t in range(4, 8):
        grads(tp, t, torch.tensor)
        topt.step()
        grads(fp, t, fiamma.tensor)
        fopt.step()
    for a, b in zip(fp, tp):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-12)

    fiamma.save({"opt": fopt.state_dict(), "params": fp}, tmp_path / "fiamma.pt")
    back = torch.load(tmp_path / "fiamma.pt")
    tp2 = [p.clone() for p in back["params"]]
    topt2 = getattr(torch.optim, name)(tp2, **kw)
    topt2.load_state_dict(back["opt"])
    for t in range(8, 11):
        grads(tp2, t, torch.tensor)
        topt2.step()
        grads(fp, t, fiamma.tensor)
        fopt.step()
    for a, b in zip(fp, tp2):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-12)
