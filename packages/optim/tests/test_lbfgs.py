"""L-BFGS on smooth problems with analytic gradients: convergence, state across calls, the
strong-Wolfe line search, and (with PyTorch) the same iterates as torch.optim.LBFGS."""

import numpy as np
import pytest

import fiamma
from fiamma import optim

try:
    import torch
except ImportError:
    torch = None


def rosenbrock(x):
    """Value and gradient of the n-dimensional Rosenbrock function (NumPy float64)."""
    f = np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
    g = np.zeros_like(x)
    g[:-1] = -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    g[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
    return f, g


def _closure(params, make_tensor, counter):
    def closure():
        counter.append(1)
        x = np.concatenate([np.asarray(p.detach().numpy(), np.float64).ravel() for p in params])
        f, g = rosenbrock(x)
        off = 0
        for p in params:
            n = p.numel()
            p.grad = make_tensor(g[off:off + n].reshape(tuple(p.shape)))
            off += n
        return make_tensor(np.array(f))
    return closure


def _run_fiamma(x0, **kw):
    params = [fiamma.tensor(x0[:3]), fiamma.tensor(x0[3:].reshape(2, 2))]
    opt = optim.LBFGS(params, **kw)
    calls = []
    closure = _closure(params, fiamma.tensor, calls)
    losses = [opt.step(closure).item() for _ in range(kw.pop("outer", 5))]
    return np.concatenate([p.numpy().ravel() for p in params]), losses, len(calls), opt


X0 = np.array([-1.2, 1.0, -0.5, 0.8, 1.5, -1.0, 0.3])


@pytest.mark.parametrize("ls", [None, "strong_wolfe"])
def test_converges_on_rosenbrock(ls):
    kw = dict(line_search_fn=ls, max_iter=50, history_size=10)
    if ls is None:
        kw["lr"] = 0.05
    x, losses, calls, opt = _run_fiamma(X0, **kw)
    assert losses[-1] < losses[0]
    if ls == "strong_wolfe":
        np.testing.assert_allclose(x, 1.0, atol=1e-4)
    st = opt.state[opt._params[0]]
    assert st["func_evals"] == calls and st["n_iter"] > 5
    assert len(st["old_dirs"]) <= 10


def test_stops_at_once_at_a_minimum():
    x = fiamma.ones(4, dtype=fiamma.float64)
    opt = optim.LBFGS([x])
    calls = []

    def closure():
        calls.append(1)
        x.grad = fiamma.zeros(4, dtype=fiamma.float64)
        return fiamma.tensor(0.0)

    opt.step(closure)
    assert calls == [1] and x.tolist() == [1.0] * 4


def test_errors():
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [fiamma.ones(1)]}, {"params": [fiamma.ones(1)]}])
    with pytest.raises(ValueError, match="strong_wolfe"):
        optim.LBFGS([fiamma.ones(1)], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="closure"):
        optim.LBFGS([fiamma.ones(1)]).step(None)


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("kw", [dict(line_search_fn="strong_wolfe", max_iter=20),
                                dict(lr=0.02, max_iter=20, history_size=4),
                                dict(line_search_fn="strong_wolfe", max_iter=7, history_size=3,
                                     max_eval=15)])
def test_iterates_equal_pytorch(kw):
    x, losses, calls, _ = _run_fiamma(X0, **dict(kw))
    tparams = [torch.tensor(X0[:3]), torch.tensor(X0[3:].reshape(2, 2))]
    topt = torch.optim.LBFGS(tparams, **kw)
    tcalls = []
    closure = _closure(tparams, torch.tensor, tcalls)
    tlosses = [float(topt.step(closure)) for _ in range(5)]
    tx = np.concatenate([p.detach().numpy().ravel() for p in tparams])
    # same decisions (number of closure calls); values to 1e-6: dot products sum in a different
    # order than PyTorch's BLAS, and this run amplifies the last bits (PyTorch itself moves its
    # result by 1.5e-7 when the start is perturbed by 1e-15)
    assert calls == len(tcalls)
    np.testing.assert_allclose(losses, tlosses, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(x, tx, rtol=1e-6, atol=1e-6)


# Trajectories of torch.optim.LBFGS (torch 2.13, float64) on the 3-d Rosenbrock function from
# (-0.5, -1.5, 0.7): the parameters and the running count of closure calls after each of six
# step() calls. With max_iter=1 (so max_eval=1) the line search may not spend a second
# evaluation; it keeps the better of t=0 and t=1, and the run stalls once t=1 goes uphill.
TRAJECTORIES = {
    "max_iter=1": (dict(line_search_fn="strong_wolfe", max_iter=1), [
        ([-0.31878850102669404, -0.8403490759753593, 0.8591375770020534], 2),
        ([-0.24029467843300223, -0.7536185875859115, 0.8381238421976058], 4),
        ([-0.061438035450488315, -0.5544569065922638, 0.6668357044609505], 6),
        ([0.12623541325741722, -0.1845236361746148, 0.20527606197020498], 8),
        ([0.12623541325741722, -0.1845236361746148, 0.20527606197020498], 10),
        ([0.12623541325741722, -0.1845236361746148, 0.20527606197020498], 12)]),
    "max_iter=3,history=2": (dict(line_search_fn="strong_wolfe", max_iter=3, history_size=2), [
        ([-0.24029467843300223, -0.7536185875859115, 0.8381238421976058], 3),
        ([0.13897192654024407, -0.19697932810410967, 0.19355570824596569], 6),
        ([0.12765886851676866, 0.0865203536715216, 0.009915800687351593], 9),
        ([0.15277578917562085, 0.029565796927059247, -0.0003380014898304966], 12),
        ([0.30002383838738483, 0.09706734346006111, -0.02125728614567959], 15),
        ([0.41559543089481554, 0.15114025653336685, -0.02220745699871016], 18)]),
}


@pytest.mark.parametrize("name", sorted(TRAJECTORIES))
def test_trajectory_over_steps(name):
    """Regression: the line search's budget is what is left of max_eval in this step() call
    (it used to be a fixed 25 evaluations, which moved every step() after the first)."""
    kw, expected = TRAJECTORIES[name]
    x = fiamma.tensor([-0.5, -1.5, 0.7], dtype=fiamma.float64)
    opt = optim.LBFGS([x], **kw)
    calls = []
    closure = _closure([x], fiamma.tensor, calls)
    for params, n_calls in expected:
        opt.step(closure)
        np.testing.assert_allclose(x.tolist(), params, rtol=1e-12, atol=1e-12)
        assert len(calls) == n_calls


def _run_pair(x0, steps, kw):
    """Parameters and closure-call counts after `steps` step() calls, fiamma and PyTorch."""
    out = []
    for lib, opt_mod in ((fiamma, optim), (torch, torch.optim)):
        p = lib.tensor(x0.copy())
        opt = opt_mod.LBFGS([p], **kw)
        calls = []
        closure = _closure([p], lib.tensor, calls)
        for _ in range(steps):
            opt.step(closure)
        out.append((np.array(p.detach().numpy(), dtype=np.float64), len(calls)))
    return out


@pytest.mark.parity
@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_many_steps_equal_pytorch(line_search):
    """Seeded sweep over start points and settings, several step() calls each: max_iter from
    1, max_eval below max_iter, history shorter than the run, tolerances that stop early."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        x0 = rng.uniform(-2, 2, size=int(rng.integers(2, 6)))
        kw = dict(line_search_fn=line_search, max_iter=int(rng.integers(1, 8)),
                  history_size=int(rng.integers(1, 4)),
                  tolerance_change=float(10.0 ** rng.uniform(-9, -3)),
                  tolerance_grad=float(10.0 ** rng.uniform(-7, -1)))
        if line_search is None:
            kw["lr"] = float(rng.uniform(0.001, 0.01))
        if rng.random() < 0.3:
            kw["max_eval"] = int(rng.integers(1, 12))
        steps = int(rng.integers(2, 8))
        (x, calls), (tx, tcalls) = _run_pair(x0, steps, kw)
        assert calls == tcalls, (kw, steps)
        np.testing.assert_allclose(x, tx, rtol=1e-9, atol=1e-9, err_msg=str((kw, steps)))
