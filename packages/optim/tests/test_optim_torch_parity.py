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


_KEY_ORDER_NAMES = ["SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "Rprop",
                    "ASGD", "NAdam", "RAdam"]


@pytest.mark.parametrize("name", _KEY_ORDER_NAMES)
def test_state_dict_key_order_equals_pytorch(name):
    """param_groups' and per-parameter state's keys come in PyTorch's order (checkpoints and
    code that lists them see the same sequence); found by differential fuzzing (RAdam's
    groups, Adagrad's and ASGD's state had another order)."""
    start = np.arange(3.0)
    tp, fp = torch.tensor(start, requires_grad=True), fiamma.tensor(start, requires_grad=True)
    topt, fopt = getattr(torch.optim, name)([tp]), getattr(optim, name)([fp])
    for t in range(2):
        g = np.array([1.0, -2.0, 0.5])
        tp.grad, fp.grad = torch.tensor(g), fiamma.tensor(g)
        topt.step()
        fopt.step()
    ts, fs = topt.state_dict(), fopt.state_dict()
    assert list(fs["param_groups"][0]) == list(ts["param_groups"][0])
    assert list(fs["state"]) == list(ts["state"])
    for k in ts["state"]:
        assert list(fs["state"][k]) == list(ts["state"][k])


def test_adagrad_accumulator_starts_from_the_constructor_value():
    """PyTorch fills every accumulator (construction-time groups and add_param_group's) with
    the constructor's initial_accumulator_value, not the group's own."""
    def run(lib, opt_mod):
        a = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([3.0], dtype=lib.float64, requires_grad=True)
        c = lib.tensor([-1.0], dtype=lib.float64, requires_grad=True)
        opt = opt_mod.Adagrad([{"params": [a]}, {"params": [b], "initial_accumulator_value": 0.5}],
                              lr=0.1, initial_accumulator_value=0.1)
        opt.add_param_group({"params": [c], "initial_accumulator_value": 2.0})
        for _ in range(3):
            for p in (a, b, c):
                p.grad = p.detach() * 2
            opt.step()
        return [p.detach().numpy() for p in (a, b, c)] + [
            opt.state[p]["sum"].numpy() for p in (a, b, c)]

    for x, y in zip(run(fiamma, optim), run(torch, torch.optim)):
        np.testing.assert_allclose(x, y, rtol=1e-12)


_COMPLEX_CASES = [("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
                  ("AdamW", dict(lr=0.05)), ("Adamax", dict(lr=0.05, weight_decay=0.1)),
                  ("NAdam", dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.1)),
                  ("RAdam", dict(lr=0.05)), ("Adagrad", dict(lr=0.1, weight_decay=0.1)),
                  ("Adadelta", dict(weight_decay=0.1)),
                  ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
                  ("Rprop", dict(lr=0.05)), ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
                  ("ASGD", dict(lr=0.05))]


@pytest.mark.parametrize("name,kw", _COMPLEX_CASES, ids=[c[0] for c in _COMPLEX_CASES])
def test_complex_parameters_follow_pytorch(name, kw):
    """A complex parameter is updated as pairs of reals (PyTorch's view_as_real), its state
    kept complex; these optimizers raised on complex parameters before."""
    rng = np.random.default_rng(7)
    start = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    grads = rng.standard_normal((6, 3, 2)) + 1j * rng.standard_normal((6, 3, 2))
    out = []
    for lib, om in ((fiamma, optim), (torch, torch.optim)):
        p = lib.tensor(start.copy(), requires_grad=True)
        opt = getattr(om, name)([p], **kw)
        for g in grads:
            p.grad = lib.tensor(g.copy())
            opt.step()
        st = opt.state_dict()["state"][0]
        out.append((p.detach().numpy(), {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v)
                                         for k, v in st.items()}))
    (fp, fs), (tp, ts) = out
    np.testing.assert_allclose(fp, tp, rtol=1e-9, atol=1e-12)
    assert list(fs) == list(ts)
    for k in ts:
        assert fs[k].dtype == ts[k].dtype, k
        np.testing.assert_allclose(fs[k], ts[k], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_complex_parameter_follows_pytorch(line_search):
    start = np.array([1 + 2j, -0.5 + 0.3j, 0.2 - 1j])
    target = np.array([0.3 + 0.1j, 1.0, -1j])
    out = []
    for lib, om in ((fiamma, optim), (torch, torch.optim)):
        p = lib.tensor(start.copy(), requires_grad=True)
        opt = om.LBFGS([p], lr=0.5, max_iter=4, line_search_fn=line_search)

        def closure(p=p, opt=opt, lib=lib):
            opt.zero_grad()
            loss = ((p - lib.tensor(target)).abs() ** 2).sum() + (p.abs() ** 4).sum() * 0.1
            loss.backward()
            return loss

        for _ in range(3):
            opt.step(closure)
        out.append(p.detach().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-9, atol=1e-12)
