"""Sparse COO gradients (what ``Embedding(sparse=True)`` produces): SGD (with and without
momentum), Adagrad and SparseAdam update as PyTorch does (against NumPy references and,
with PyTorch installed, torch.optim's trajectories); the other optimizers refuse them with
PyTorch's messages."""

import math

import numpy as np
import pytest

import fiamma
from fiamma import optim

ROWS, DIM = 7, 3
# per step: the looked-up rows (repeats and uncoalesced duplicates included)
STEPS = [[1, 4, 1], [4, 6], [0, 1, 1, 5], [6], [2, 4, 4, 4]]


def _grad_values(t, n):
    rng = np.random.default_rng(100 + t)
    return rng.standard_normal((n, DIM))


def _sparse(lib, rows, vals):
    if lib == "torch":
        import torch

        return torch.sparse_coo_tensor(torch.tensor([rows]), torch.tensor(vals), (ROWS, DIM))
    return fiamma.sparse_coo_tensor(fiamma.tensor([rows]), fiamma.tensor(vals), (ROWS, DIM))


def _start():
    return np.random.default_rng(0).standard_normal((ROWS, DIM))


def _run(lib, name, kw):
    mod = fiamma if lib == "fiamma" else __import__("torch")
    p = mod.tensor(_start())
    opt_mod = optim if lib == "fiamma" else mod.optim
    opt = getattr(opt_mod, name)([p], **kw)
    for t, rows in enumerate(STEPS):
        p.grad = _sparse(lib, rows, _grad_values(t, len(rows)))
        opt.step()
    return np.asarray(p.detach().numpy())


def _dense_grad(t, rows):
    g = np.zeros((ROWS, DIM))
    np.add.at(g, rows, _grad_values(t, len(rows)))
    return g


def _ref(name, kw):
    """NumPy reference of PyTorch's sparse paths (the gradient coalesced: duplicates summed)."""
    p = _start()
    lr = kw.get("lr", 1e-3 if name == "SparseAdam" else 1e-2)
    sign = -1.0 if kw.get("maximize") else 1.0
    mom, damp, nest = kw.get("momentum", 0), kw.get("dampening", 0), kw.get("nesterov", False)
    buf = None
    s = np.full((ROWS, DIM), kw.get("initial_accumulator_value", 0.0))
    m = np.zeros((ROWS, DIM))
    v = np.zeros((ROWS, DIM))
    b1, b2 = kw.get("betas", (0.9, 0.999))
    for t, rows in enumerate(STEPS, 1):
        g = sign * _dense_grad(t - 1, rows)
        touched = np.unique(rows)
        if name == "SGD":
            if mom:
                buf = g.copy() if buf is None else mom * buf + (1 - damp) * g
                g = g + mom * buf if nest else buf
            p -= lr * g
        elif name == "Adagrad":
            clr = lr / (1 + (t - 1) * kw.get("lr_decay", 0))
            s[touched] += g[touched] ** 2
            p[touched] -= clr * g[touched] / (np.sqrt(s[touched]) + kw.get("eps", 1e-10))
        else:  # SparseAdam
            m[touched] = b1 * m[touched] + (1 - b1) * g[touched]
            v[touched] = b2 * v[touched] + (1 - b2) * g[touched] ** 2
            step = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            p[touched] -= step * m[touched] / (np.sqrt(v[touched]) + kw.get("eps", 1e-8))
    return p


CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "maximize": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.5, "lr_decay": 0.1, "initial_accumulator_value": 0.2}),
    ("Adagrad", {"lr": 0.5, "maximize": True}),
    ("SparseAdam", {}),
    ("SparseAdam", {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6}),
    ("SparseAdam", {"lr": 0.05, "maximize": True}),
]


@pytest.mark.parametrize("name,kw", CASES)
def test_sparse_gradient_updates_against_numpy(name, kw):
    got = _run("fiamma", name, kw)
    np.testing.assert_allclose(got, _ref(name, kw), rtol=1e-12, atol=1e-14)
    if name != "SGD" or not kw.get("momentum"):
        # rows no step looked up keep their values
        never = sorted(set(range(ROWS)) - {r for rows in STEPS for r in rows})
        assert never == [3]
        np.testing.assert_array_equal(got[never], _start()[never])


@pytest.mark.parity
@pytest.mark.parametrize("name,kw", CASES)
def test_sparse_gradient_updates_parity(name, kw):
    pytest.importorskip("torch")
    np.testing.assert_allclose(_run("fiamma", name, kw), _run("torch", name, kw), rtol=1e-12,
                               atol=1e-14)


def test_sparse_adam_state_is_dense_moments_and_step():
    p = fiamma.zeros(ROWS, DIM, dtype=fiamma.float64)
    opt = optim.SparseAdam([p], lr=0.1)
    p.grad = _sparse("fiamma", [2, 2], np.ones((2, DIM)))
    opt.step()
    st = opt.state[p]
    # PyTorch's SparseAdam: step is a Python int and the first key
    assert list(st) == ["step", "exp_avg", "exp_avg_sq"]
    assert st["step"] == 1 and type(st["step"]) is int
    assert not st["exp_avg"].is_sparse and st["exp_avg"].shape == (ROWS, DIM)
    np.testing.assert_allclose(st["exp_avg"].numpy()[2], 0.1 * 2.0)  # duplicates summed
    assert st["exp_avg"].numpy()[[0, 1, 3, 4, 5, 6]].sum() == 0.0


def test_sparse_grads_refused_with_pytorchs_messages():
    for name, msg in [("Adam", "Adam does not support sparse gradients, please consider "
                               "SparseAdam instead"),
                      ("AdamW", "Adam does not support sparse gradients, please consider "
                                "SparseAdam instead"),
                      ("RMSprop", "RMSprop does not support sparse gradients"),
                      ("Adadelta", "Adadelta does not support sparse gradients"),
                      ("Adamax", "Adamax does not support sparse gradients"),
                      ("NAdam", "NAdam does not support sparse gradients"),
                      ("RAdam", "RAdam does not support sparse gradients"),
                      ("ASGD", "ASGD does not support sparse gradients"),
                      ("Rprop", "Rprop does not support sparse gradients")]:
        p = fiamma.zeros(ROWS, DIM, dtype=fiamma.float64)
        opt = getattr(optim, name)([p])
        p.grad = _sparse("fiamma", [1], np.ones((1, DIM)))
        with pytest.raises(RuntimeError, match=msg):
            opt.step()
        assert p.abs().sum().item() == 0.0


def test_sparse_grad_option_errors():
    p = fiamma.zeros(ROWS, DIM, dtype=fiamma.float64)
    p.grad = _sparse("fiamma", [1], np.ones((1, DIM)))
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        optim.SGD([p], lr=0.1, weight_decay=0.1).step()
    with pytest.raises(RuntimeError, match="weight_decay option is not compatible with sparse"):
        optim.Adagrad([p], weight_decay=0.1).step()
    q = fiamma.zeros(ROWS, DIM)
    q.grad = fiamma.ones(ROWS, DIM)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, "
                                           "please consider Adam instead"):
        optim.SparseAdam([q]).step()
    with pytest.raises(ValueError, match="SparseAdam requires dense parameter tensors"):
        optim.SparseAdam([fiamma.zeros(2, 2), p.grad])
    with pytest.raises(ValueError, match="invalid learning rate"):
        optim.SparseAdam([q], lr=0.0)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.SparseAdam([q], betas=(0.9, 1.0))


def test_lbfgs_uses_a_sparse_gradient_densely():
    p = fiamma.tensor(_start())
    target = fiamma.tensor(_start() * 0.0 + 1.0)

    def closure():
        p.grad = (2 * (p - target)).to_sparse()
        return ((p - target) ** 2).sum()

    opt = optim.LBFGS([p], lr=1.0, max_iter=20)
    opt.step(closure)
    np.testing.assert_allclose(p.numpy(), 1.0, atol=1e-6)


def test_zero_grad_keeping_a_sparse_gradient_empties_it():
    p = fiamma.zeros(ROWS, DIM, dtype=fiamma.float64)
    opt = optim.SGD([p], lr=0.5)
    p.grad = _sparse("fiamma", [1, 1], np.ones((2, DIM)))
    opt.zero_grad(set_to_none=False)
    assert p.grad.is_sparse and p.grad._nnz() == 0 and tuple(p.grad.shape) == (ROWS, DIM)
    opt.step()  # an empty sparse gradient changes nothing
    assert p.abs().sum().item() == 0.0


@pytest.mark.parity
def test_sparse_adam_continues_from_a_pytorch_state_dict():
    """PyTorch's state (an int step) loads and the next steps follow its trajectory."""
    torch = pytest.importorskip("torch")
    start = np.random.default_rng(3).standard_normal((ROWS, DIM))
    tp = torch.tensor(start, requires_grad=True)
    topt = torch.optim.SparseAdam([tp], lr=0.05)
    fp = fiamma.tensor(start.copy())
    fopt = optim.SparseAdam([fp], lr=0.05)
    for t, rows in enumerate(STEPS):
        vals = _grad_values(t, len(rows))
        tp.grad = _sparse("torch", rows, vals)
        topt.step()
        if t == 1:  # fiamma takes over torch's state here
            fp.data.copy_(fiamma.tensor(tp.detach().numpy().copy()))
            sd = topt.state_dict()
            sd["state"] = {k: {n: (fiamma.tensor(v.numpy().copy()) if hasattr(v, "numpy")
                                   else v) for n, v in st.items()}
                           for k, st in sd["state"].items()}
            fopt.load_state_dict(sd)
        elif t > 1:
            fp.grad = _sparse("fiamma", rows, vals)
            fopt.step()
    np.testing.assert_allclose(fp.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert fopt.state[fp]["step"] == topt.state[tp]["step"] == len(STEPS)
