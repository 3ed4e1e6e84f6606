"""Adafactor, Muon and swap_in_optimizer_params_and_state: float64 NumPy references, the
hyper-parameter checks, state dicts, and (with PyTorch installed) PyTorch 2.13's trajectories."""

import numpy as np
import pytest

import fiamma
from fiamma import optim
from fiamma.optim.factored import _newton_schulz

SHAPES = [(5, 7), (3, 4, 6), (4,), ()]


def _start(shape, dtype=np.float64):
    n = int(np.prod(shape))
    return np.linspace(-1.0, 1.0, n).reshape(shape).astype(dtype) if n > 1 else \
        np.full(shape, 0.3, dtype)


def _grads(shapes, steps=20, seed=1):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for s in shapes] for _ in range(steps)]


def _run(lib, name, shapes, grads, dtype, **kw):
    ps = [lib.tensor(_start(s), dtype=dtype) for s in shapes]
    opt = getattr(lib.optim, name)(ps, **kw)
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = lib.tensor(g, dtype=dtype)
        opt.step()
    return [np.asarray(p.detach().numpy()) for p in ps], opt


# ---- Adafactor ----------------------------------------------------------------------------

def _adafactor_ref(shapes, grads, lr=1e-2, decay=-0.8, eps=(None, 1e-3), d=1.0, wd=0.0,
                   maximize=False):
    """The algorithm in float64 NumPy, written from PyTorch's documented update."""
    ps = [_start(s) for s in shapes]
    eps1 = np.finfo(np.float64).eps if eps[0] is None else eps[0]
    state = [None] * len(ps)
    for t, gs in enumerate(grads, 1):
        for i, (p, g) in enumerate(zip(ps, gs)):
            g = -g if maximize else g
            beta = t ** decay
            rho = min(lr, 1 / np.sqrt(t))
            alpha = max(eps[1], np.sqrt(np.mean(p * p)) if p.size else 0.0) * rho
            p *= 1 - lr * wd
            if g.ndim > 1:
                if state[i] is None:
                    state[i] = [np.zeros(g.shape[:-1] + (1,)),
                                np.zeros(g.shape[:-2] + (1, g.shape[-1]))]
                r, c = state[i]
                r += beta * ((g * g).mean(-1, keepdims=True) - r)
                c += beta * ((g * g).mean(-2, keepdims=True) - c)
                v = r @ c / np.maximum(r.mean(-2, keepdims=True), eps1)
            else:
                if state[i] is None:
                    state[i] = np.zeros(g.shape)
                state[i] += beta * (g * g - state[i])
                v = state[i].copy()
            u = g / np.sqrt(np.maximum(v, eps1 * eps1))
            denom = max(1.0, np.sqrt(np.mean(u * u)) / d)
            p -= alpha / denom * u
    return ps


@pytest.mark.parametrize("kw,ref", [
    ({}, {}),
    (dict(lr=0.05, weight_decay=0.1, d=2.0, maximize=True, eps=(1e-30, 1e-3)),
     dict(lr=0.05, wd=0.1, d=2.0, maximize=True, eps=(1e-30, 1e-3))),
    (dict(beta2_decay=-0.5, eps=(None, 1e-2)), dict(decay=-0.5, eps=(None, 1e-2))),
])
def test_adafactor_equals_float64_reference(kw, ref):
    grads = _grads(SHAPES)
    ours, _ = _run(fiamma, "Adafactor", SHAPES, grads, fiamma.float64, **kw)
    for a, b in zip(ours, _adafactor_ref(SHAPES, grads, **ref)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_adafactor_state_is_factored_for_matrices():
    ps = [fiamma.zeros(3, 4, 5), fiamma.zeros(6)]
    opt = optim.Adafactor(ps)
    for p in ps:
        p.grad = fiamma.ones_like(p)
    opt.step()
    s0, s1 = opt.state[ps[0]], opt.state[ps[1]]
    assert list(s0) == ["step", "row_var", "col_var"]
    assert tuple(s0["row_var"].shape) == (3, 4, 1) and tuple(s0["col_var"].shape) == (3, 1, 5)
    assert list(s1) == ["step", "variance"] and tuple(s1["variance"].shape) == (6,)
    assert s0["step"].item() == 1.0 and s0["step"].dtype == fiamma.float32


@pytest.mark.parametrize("kw,msg", [
    (dict(lr=-1.0), "Learning rate should be >= 0"),
    (dict(beta2_decay=0.5), "beta2_decay should be <= 0"),
    (dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0"),
    (dict(eps=(None, -1.0)), "epsilon2 should be >= 0"),
    (dict(d=0.5), "Clipping threshold d should be >= 1"),
    (dict(weight_decay=-0.1), "weight_decay should be >= 0"),
])
def test_adafactor_rejects_bad_hyperparameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        optim.Adafactor([fiamma.zeros(2)], **kw)


def test_adafactor_refuses_complex_and_sparse():
    p = fiamma.zeros(2, dtype=fiamma.complex64)
    p.grad = fiamma.ones_like(p)
    with pytest.raises(RuntimeError, match="Adafactor does not support complex parameters"):
        optim.Adafactor([p]).step()
    q = fiamma.zeros(3, 2)
    q.grad = fiamma.sparse_coo_tensor([[0]], [[1.0, 1.0]], (3, 2))
    with pytest.raises(RuntimeError, match="Adafactor does not support sparse gradients"):
        optim.Adafactor([q]).step()


# ---- Muon -------------------------------------------------------------------------------

def test_muon_newton_schulz_orthogonalises():
    rng = np.random.default_rng(3)
    for shape in [(6, 10), (12, 5)]:
        g = rng.standard_normal(shape)
        o = _newton_schulz(fiamma.tensor(g), (3.4445, -4.7750, 2.0315), 5, 1e-7)
        assert o.dtype == fiamma.bfloat16 and tuple(o.shape) == shape
        s = np.linalg.svd(o.float().numpy().astype(np.float64), compute_uv=False)
        # the quintic iteration maps every singular value into roughly (0.5, 1.5)
        assert s.min() > 0.5 and s.max() < 1.5, s
        # and keeps the singular vectors: O is close to U V^T of G
        u, _, vt = np.linalg.svd(g, full_matrices=False)
        cos = np.sum(o.float().numpy() * (u @ vt)) / (np.linalg.norm(o.float().numpy())
                                                      * np.linalg.norm(u @ vt))
        assert cos > 0.98


def _muon_ref(shapes, grads, lr=1e-3, wd=0.1, mom=0.95, nesterov=True, how=None):
    """float64 NumPy Muon with the Newton-Schulz output replaced by fiamma's (bfloat16)."""
    ps = [_start(s) for s in shapes]
    bufs = [np.zeros(s) for s in shapes]
    for gs in grads:
        for p, g, b in zip(ps, gs, bufs):
            b += (1 - mom) * (g - b)
            u = g + mom * (b - g) if nesterov else b
            o = _newton_schulz(fiamma.tensor(u), (3.4445, -4.7750, 2.0315), 5, 1e-7)
            rows, cols = p.shape
            adj = np.sqrt(max(1, rows / cols)) if how is None else 0.2 * np.sqrt(max(rows, cols))
            p *= 1 - lr * wd
            p -= lr * adj * o.double().numpy()
    return ps


@pytest.mark.parametrize("kw,ref", [
    ({}, {}),
    (dict(nesterov=False, adjust_lr_fn="match_rms_adamw", lr=0.02, momentum=0.9),
     dict(nesterov=False, how="match", lr=0.02, mom=0.9)),
])
def test_muon_equals_float64_reference(kw, ref):
    shapes = [(5, 7), (9, 3)]
    grads = _grads(shapes)
    ours, _ = _run(fiamma, "Muon", shapes, grads, fiamma.float64, **kw)
    for a, b in zip(ours, _muon_ref(shapes, grads, **ref)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_muon_accepts_only_2d_parameters():
    with pytest.raises(ValueError, match="Muon only supports 2D parameters whereas we found a "
                                         "parameter with size"):
        optim.Muon([fiamma.zeros(3, 3), fiamma.zeros(3)])
    with pytest.raises(ValueError, match="Adjust learning rate function foo is not supported"):
        optim.Muon([fiamma.zeros(3, 3)], adjust_lr_fn="foo")
    with pytest.raises(ValueError, match="momentum should be >= 0"):
        optim.Muon([fiamma.zeros(3, 3)], momentum=-1)
    p = fiamma.zeros(3, 3)
    p.grad = fiamma.ones(3, 3)
    with pytest.raises(ValueError, match="Number of steps must be less than 100"):
        optim.Muon([p], ns_steps=100).step()


@pytest.mark.parametrize("name,shapes", [("Adafactor", SHAPES), ("Muon", [(5, 7), (9, 3)])])
def test_state_dict_round_trip_continues_the_trajectory(name, shapes):
    grads = _grads(shapes, steps=10, seed=7)
    full, _ = _run(fiamma, name, shapes, grads, fiamma.float64)
    half, opt = _run(fiamma, name, shapes, grads[:5], fiamma.float64)
    ps = [fiamma.tensor(x) for x in half]
    opt2 = getattr(optim, name)(ps)
    opt2.load_state_dict(opt.state_dict())
    for gs in grads[5:]:
        for p, g in zip(ps, gs):
            p.grad = fiamma.tensor(g)
        opt2.step()
    for a, b in zip(full, ps):
        np.testing.assert_array_equal(a, b.numpy())


# ---- swap_in_optimizer_params_and_state ----------------------------------------------------

def test_swap_in_params_and_state_steps_the_given_tensors_and_restores():
    w = fiamma.tensor([1.0, 2.0])
    opt = optim.Adam([w], lr=0.1)
    w.grad = fiamma.tensor([1.0, 1.0])
    opt.step()
    live_w = w.clone()
    sd = opt.state_dict()
    other = {"w": fiamma.tensor([5.0, 5.0])}
    other["w"].grad = fiamma.tensor([1.0, -1.0])
    swap_sd = {"state": {0: {k: v.clone() for k, v in sd["state"][0].items()}},
               "param_groups": [dict(sd["param_groups"][0], lr=0.5)]}
    live_groups = opt.param_groups[0]["params"]
    with optim.swap_in_optimizer_params_and_state(opt, other, swap_sd):
        assert opt.param_groups[0]["params"][0] is other["w"]
        assert opt.param_groups[0]["lr"] == 0.5
        opt.step()
    # the swapped-in tensors moved (Adam's first steps move by about lr), the live ones did not
    assert abs(other["w"][0].item() - 5.0) > 0.3
    np.testing.assert_array_equal(w.numpy(), live_w.numpy())
    assert opt.param_groups[0]["params"] is live_groups and opt.param_groups[0]["lr"] == 0.1
    assert opt.state[w]["step"].item() == 1.0
    # in-place updates reached the given state tensors
    assert swap_sd["state"][0]["step"].item() == 2.0


def test_swap_in_refuses_mismatched_state():
    w = fiamma.tensor([1.0])
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    with pytest.raises(RuntimeError, match="requires initialized optimizer state"):
        with optim.swap_in_optimizer_params_and_state(opt, {"w": w}, opt.state_dict()):
            pass
    w.grad = fiamma.tensor([1.0])
    opt.step()
    sd = opt.state_dict()
    bad = {"state": sd["state"], "param_groups": [dict(sd["param_groups"][0], extra=1)]}
    with pytest.raises(RuntimeError, match="Keys only in swap-in: \\['extra'\\]"):
        with optim.swap_in_optimizer_params_and_state(opt, {"w": w}, bad):
            pass
    bad = {"state": {5: {}}, "param_groups": sd["param_groups"]}
    with pytest.raises(RuntimeError, match="extra keys \\[5\\]"):
        with optim.swap_in_optimizer_params_and_state(opt, {"w": w}, bad):
            pass


# ---- PyTorch parity ---------------------------------------------------------------------

@pytest.mark.parity
@pytest.mark.parametrize("name,shapes,kw", [
    ("Adafactor", SHAPES, {}),
    ("Adafactor", SHAPES, dict(lr=0.05, weight_decay=0.1, d=2.0, maximize=True,
                               eps=(1e-30, 1e-3))),
    ("Muon", [(5, 7), (9, 3)], {}),
    ("Muon", [(5, 7), (9, 3)], dict(nesterov=False, adjust_lr_fn="match_rms_adamw", lr=0.02)),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_trajectory_equals_pytorch(name, shapes, kw, dtype):
    torch = pytest.importorskip("torch")
    grads = _grads(shapes)
    ours, _ = _run(fiamma, name, shapes, grads, getattr(fiamma, dtype), **kw)
    theirs, _ = _run(torch, name, shapes, grads, getattr(torch, dtype), **kw)
    tol = 1e-12 if dtype == "float64" else 1e-6
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parity
@pytest.mark.parametrize("name,shapes", [("Adafactor", SHAPES), ("Muon", [(5, 7), (9, 3)])])
def test_pytorch_state_dict_loads_and_continues(name, shapes, tmp_path):
    torch = pytest.importorskip("torch")
    grads = _grads(shapes, steps=10, seed=11)
    full, _ = _run(torch, name, shapes, grads, torch.float64)
    half, topt = _run(torch, name, shapes, grads[:5], torch.float64)
    torch.save(topt.state_dict(), tmp_path / "opt.pt")
    ps = [fiamma.tensor(x) for x in half]
    opt = getattr(optim, name)(ps)
    opt.load_state_dict(fiamma.load(tmp_path / "opt.pt"))
    assert opt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]
    for gs in grads[5:]:
        for p, g in zip(ps, gs):
            p.grad = fiamma.tensor(g)
        opt.step()
    for a, b in zip(full, ps):
        np.testing.assert_allclose(b.numpy(), a, rtol=1e-12, atol=1e-12)
    keys = {k: list(v) for k, v in topt.state_dict()["state"].items()}
    assert {k: list(v) for k, v in opt.state_dict()["state"].items()} == keys


@pytest.mark.parity
def test_swap_in_matches_pytorch():
    torch = pytest.importorskip("torch")
    outs = []
    for lib in (fiamma, torch):
        w = lib.tensor([1.0, 2.0], dtype=lib.float64)
        opt = lib.optim.AdamW([w], lr=0.1)
        w.grad = lib.tensor([1.0, 1.0], dtype=lib.float64)
        opt.step()
        sd = opt.state_dict()
        other = {"w": lib.tensor([5.0, -5.0], dtype=lib.float64)}
        other["w"].grad = lib.tensor([0.5, -2.0], dtype=lib.float64)
        swap = {"state": {0: {k: v.clone() for k, v in sd["state"][0].items()}},
                "param_groups": [dict(sd["param_groups"][0], lr=0.3)]}
        with lib.optim.swap_in_optimizer_params_and_state(opt, other, swap):
            opt.step()
        outs.append((other["w"].detach().numpy().copy(), w.detach().numpy().copy(),
                     swap["state"][0]["exp_avg"].numpy().copy()))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_lr_scheduler_reexports_math_inf():
    import math

    from fiamma.optim import lr_scheduler

    assert lr_scheduler.inf == math.inf
