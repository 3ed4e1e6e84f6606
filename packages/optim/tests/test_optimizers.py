"""Every optimizer's trajectory over 100 steps equals a float64 NumPy implementation of its
published update rule (tests/reference.py), for each option."""

import numpy as np
import pytest
import reference as R

import fiamma
from fiamma import optim

SHAPES = [(5,), (3, 4), (), (2, 1, 3)]

CASES = [
    ("SGD", R.sgd, dict(lr=0.05)),
    ("SGD", R.sgd, dict(lr=0.05, momentum=0.9)),
    ("SGD", R.sgd, dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", R.sgd, dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("SGD", R.sgd, dict(lr=0.01, maximize=True)),
    ("Adam", R.adam, dict(lr=0.01)),
    ("Adam", R.adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", R.adam, dict(lr=0.01, amsgrad=True)),
    ("Adam", R.adam, dict(lr=0.01, maximize=True)),
    ("AdamW", lambda p, g, s, t, **k: R.adam(p, g, s, t, decoupled=True, **k),
     dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", lambda p, g, s, t, **k: R.adam(p, g, s, t, decoupled=True, **k),
     dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("Adamax", R.adamax, dict(lr=0.02)),
    ("Adamax", R.adamax, dict(lr=0.02, weight_decay=0.05, maximize=True)),
    ("NAdam", R.nadam, dict(lr=0.01)),
    ("NAdam", R.nadam, dict(lr=0.01, weight_decay=0.1, momentum_decay=1e-2)),
    ("NAdam", R.nadam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", R.radam, dict(lr=0.01)),
    ("RAdam", R.radam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", R.radam, dict(lr=0.01, weight_decay=0.1, betas=(0.9, 0.9))),
    ("RMSprop", R.rmsprop, dict(lr=0.01)),
    ("RMSprop", R.rmsprop, dict(lr=0.01, momentum=0.9, weight_decay=0.01)),
    ("RMSprop", R.rmsprop, dict(lr=0.01, centered=True, alpha=0.9)),
    ("RMSprop", R.rmsprop, dict(lr=0.01, centered=True, momentum=0.5, maximize=True)),
    ("Adagrad", R.adagrad, dict(lr=0.1)),
    ("Adagrad", R.adagrad, dict(lr=0.1, lr_decay=0.01, weight_decay=0.01,
                                initial_accumulator_value=0.5)),
    ("Adadelta", R.adadelta, dict()),
    ("Adadelta", R.adadelta, dict(lr=0.5, rho=0.8, weight_decay=0.1)),
    ("ASGD", R.asgd, dict(lr=0.05)),
    ("ASGD", R.asgd, dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=10, weight_decay=0.01)),
    ("Rprop", R.rprop, dict(lr=0.01)),
    ("Rprop", R.rprop, dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-4, 0.2), maximize=True)),
]

# float32 state scalars (NAdam's mu product, ASGD's eta and mu) round at 1e-7, as in PyTorch
LOOSE = {"NAdam", "ASGD"}


def _run(name, ref, kw, dtype, steps=100, seed=0):
    rng = np.random.default_rng(seed)
    starts = [rng.standard_normal(s) for s in SHAPES]
    params = [fiamma.tensor(x, dtype=dtype) for x in starts]
    opt = getattr(optim, name)(params, **kw)
    ref_p = [x.astype(np.float64) for x in starts]
    ref_state = [dict() for _ in starts]
    for t in range(1, steps + 1):
        for k, p in enumerate(params):
            p.grad = fiamma.tensor(R.problem_grad(p.numpy().astype(np.float64), k, t),
                                   dtype=dtype)
        opt.step()
        for k in range(len(ref_p)):
            g = R.problem_grad(ref_p[k], k, t)
            ref_p[k] = ref(ref_p[k], g, ref_state[k], t, **kw)
    return [p.numpy() for p in params], ref_p


@pytest.mark.parametrize("name,ref,kw", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_trajectory_float64_equals_reference(name, ref, kw):
    got, want = _run(name, ref, kw, fiamma.float64)
    rtol = 1e-6 if name in LOOSE else 1e-10
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
    # the run moved the parameters (a no-op optimizer would fail the comparison above only if
    # the reference also stood still)
    assert any(np.abs(w - x).max() > 1e-3 for w, x in zip(want, _run(name, ref, kw,
               fiamma.float64, steps=0)[1]))


@pytest.mark.parametrize("name,ref,kw", CASES[::3], ids=[c[0] for c in CASES[::3]])
def test_trajectory_float32_tracks_reference(name, ref, kw):
    got, want = _run(name, ref, kw, fiamma.float32, steps=30)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3)


def test_params_without_grad_are_skipped_and_state_is_lazy():
    a, b = fiamma.ones(3), fiamma.ones(2)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = fiamma.ones(3)
    opt.step()
    assert b.tolist() == [1.0, 1.0] and len(opt.state) == 1
    assert a.tolist() != [1.0, 1.0, 1.0]
    assert set(opt.state[a]) == {"step", "exp_avg", "exp_avg_sq"}
    assert opt.state[a]["step"].item() == 1.0


def test_closure_is_called_and_its_loss_returned():
    w = fiamma.tensor([2.0])
    opt = optim.SGD([w], lr=0.25)
    calls = []

    def closure():
        calls.append(1)
        w.grad = 2 * w
        return (w * w).sum()

    loss = opt.step(closure)
    assert calls == [1] and loss.item() == 4.0 and w.item() == 1.0


def test_per_group_hyperparameters():
    a, b = fiamma.ones(2), fiamma.ones(2)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.0)
    a.grad = fiamma.ones(2)
    b.grad = fiamma.ones(2)
    opt.step()
    np.testing.assert_allclose(a.numpy(), 0.9)
    np.testing.assert_allclose(b.numpy(), 0.5)
    assert opt.param_groups[1]["momentum"] == 0.0


@pytest.mark.parametrize("name,kw,msg", [
    ("SGD", dict(lr=-1.0), "learning rate"),
    ("SGD", dict(lr=0.1, momentum=-0.5), "momentum"),
    ("SGD", dict(lr=0.1, nesterov=True), "Nesterov"),
    ("Adam", dict(betas=(1.0, 0.9)), "beta parameter at index 0"),
    ("Adam", dict(betas=(0.9, -0.1)), "beta parameter at index 1"),
    ("Adam", dict(eps=-1e-8), "epsilon"),
    ("AdamW", dict(weight_decay=-0.1), "weight_decay"),
    ("Adagrad", dict(lr_decay=-1.0), "lr_decay"),
    ("Adadelta", dict(rho=1.5), "rho"),
    ("Rprop", dict(etas=(1.5, 1.2)), "eta"),
    ("RMSprop", dict(alpha=-0.1), "alpha"),
    ("NAdam", dict(momentum_decay=-1.0), "momentum_decay"),
    ("Adam", dict(capturable=True), "capturable"),
    ("Adam", dict(differentiable=True), "differentiable"),
])
def test_bad_hyperparameters_raise(name, kw, msg):
    with pytest.raises(ValueError, match=msg):
        getattr(optim, name)([fiamma.ones(1)], **kw)


def test_fused_and_foreach_flags_give_the_same_result():
    results = []
    for flags in ({}, {"foreach": True}, {"fused": True}):
        w = fiamma.tensor([1.0, 2.0])
        opt = optim.AdamW([w], lr=0.1, **flags)
        for _ in range(3):
            w.grad = w * 2
            opt.step()
        results.append(w.tolist())
    assert results[0] == results[1] == results[2]
    with pytest.raises(RuntimeError, match="fused"):
        optim.Adam([fiamma.ones(1)], fused=True, foreach=True)


FUSED_CASES = [
    ("SGD", dict(lr=0.05)), ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True)),
    ("Adam", dict(lr=0.01)), ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, maximize=True, decoupled_weight_decay=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)), ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True)),
]


@pytest.mark.parametrize("name,kw", FUSED_CASES, ids=[c[0] for c in FUSED_CASES])
@pytest.mark.parametrize("dtype", [fiamma.float32, fiamma.float64])
def test_fused_path_equals_reference_loop(name, kw, dtype):
    """The default (fused C) path against fused=False (the readable op-by-op loop), with a
    parameter that skips steps and a non-contiguous parameter that forces the loop."""
    rng = np.random.default_rng(3)
    starts = [rng.standard_normal(s) for s in [(7,), (40, 33), (), (5, 1)]]
    runs = []
    for fused in (None, False):
        params = [fiamma.tensor(x, dtype=dtype) for x in starts]
        opt = getattr(optim, name)(params, fused=fused, **kw)
        for t in range(1, 21):
            for k, p in enumerate(params):
                p.grad = (None if (k == 3 and t % 3 == 0) else
                          fiamma.tensor(R.problem_grad(p.numpy().astype(np.float64), k, t),
                                        dtype=dtype))
            opt.step()
        runs.append([p.numpy() for p in params])
    tol = 1e-5 if dtype is fiamma.float32 else 1e-12
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_fused_falls_back_for_layouts_it_cannot_take():
    base = fiamma.ones(4, 6)
    w = base.t()  # non-contiguous parameter
    opt = optim.Adam([w], lr=0.1)
    w.grad = fiamma.ones(6, 4)
    opt.step()
    np.testing.assert_allclose(w.numpy(), 0.9, rtol=1e-6)
    h = fiamma.ones(3, dtype=fiamma.float16)  # a dtype the C kernel does not take
    opt = optim.SGD([h], lr=0.5, momentum=0.9)
    h.grad = fiamma.ones(3, dtype=fiamma.float16)
    opt.step()
    assert h.tolist() == [0.5, 0.5, 0.5]


def test_fused_kernel_validates_its_arguments():
    from fiamma import fused

    p = fiamma.ones(3)
    with pytest.raises(ValueError, match="expected 1 grads"):
        fused.sgd_([p], [], lr=0.1)
    with pytest.raises(ValueError, match="shape"):
        fused.sgd_([p], [fiamma.ones(4)], lr=0.1)
    with pytest.raises(TypeError, match="dtype"):
        fused.sgd_([p], [fiamma.ones(3, dtype=fiamma.float64)], lr=0.1)
    with pytest.raises(ValueError, match="momentum_buffers"):
        fused.sgd_([p], [fiamma.ones(3)], lr=0.1, momentum=0.9)
    with pytest.raises(TypeError, match="float32 or all"):
        fused.adam_([fiamma.ones(3, dtype=fiamma.int32)], [p], [p], [p], steps=[1], lr=0.1,
                    beta1=0.9, beta2=0.99, eps=1e-8)
    with pytest.raises(ValueError):  # a step count below 1 is refused in C
        fused.adam_([p], [fiamma.ones(3)], [fiamma.zeros(3)], [fiamma.zeros(3)], steps=[0],
                    lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8)
