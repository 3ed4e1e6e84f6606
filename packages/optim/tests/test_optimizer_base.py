"""The Optimizer base: parameter groups, zero_grad, hooks, state_dict layout and resuming."""

import copy
import pickle

import numpy as np
import pytest

import fiamma
from fiamma import optim
from fiamma.optim.lr_scheduler import StepLR


def _params(n=3, seed=0):
    rng = np.random.default_rng(seed)
    return [fiamma.tensor(rng.standard_normal(k + 2)) for k in range(n)]


def _grad_step(opt, params, t):
    for k, p in enumerate(params):
        p.grad = p * (0.5 + k) + float(np.sin(t + k))
    opt.step()


def test_constructor_errors():
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(fiamma.ones(2), lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD({fiamma.ones(1)}, lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.SGD([fiamma.ones(1), 3.0], lr=0.1)
    w = fiamma.ones(1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate"):
        optim.SGD([w, w], lr=0.1)


def test_add_param_group_fills_defaults_and_validates():
    a, b = fiamma.ones(1), fiamma.ones(1)
    opt = optim.Adam([a], lr=0.1, betas=(0.8, 0.9))
    opt.add_param_group({"params": b, "lr": 0.5})
    g = opt.param_groups[1]
    assert g["params"] == [b] and g["lr"] == 0.5 and g["betas"] == (0.8, 0.9)
    with pytest.raises(ValueError, match="learning rate"):
        opt.add_param_group({"params": [fiamma.ones(1)], "lr": -1})
    with pytest.raises(TypeError, match="must be a dict"):
        opt.add_param_group([fiamma.ones(1)])


def test_zero_grad():
    w = fiamma.ones(3)
    opt = optim.SGD([w], lr=0.1)
    w.grad = fiamma.ones(3)
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g and w.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_step_hooks_order_and_removal():
    w = fiamma.ones(1)
    opt = optim.SGD([w], lr=0.1)
    w.grad = fiamma.ones(1)
    seen = []
    h1 = opt.register_step_pre_hook(lambda o, a, k: seen.append(("pre", o is opt)))
    h2 = opt.register_step_post_hook(lambda o, a, k: seen.append(("post", o is opt)))
    hg = optim.register_optimizer_step_pre_hook(lambda o, a, k: seen.append(("global", True)))
    opt.step()
    assert seen == [("global", True), ("pre", True), ("post", True)]
    for h in (h1, h2, hg):
        h.remove()
    seen.clear()
    opt.step()
    assert seen == []


def test_pre_hook_can_replace_arguments():
    w = fiamma.ones(1)
    opt = optim.SGD([w], lr=0.5)
    called = []

    def closure():
        called.append(1)
        w.grad = fiamma.ones(1)
        return fiamma.tensor(7.0)

    opt.register_step_pre_hook(lambda o, a, k: ((closure,), {}))
    assert opt.step().item() == 7.0 and called == [1] and w.item() == 0.5
    opt.register_step_pre_hook(lambda o, a, k: "bad")
    with pytest.raises(RuntimeError, match="pre-hook"):
        opt.step()


def test_state_dict_layout_is_pytorchs():
    params = _params()
    opt = optim.Adam([{"params": params[:2]}, {"params": params[2:], "lr": 0.01}], lr=0.1)
    _grad_step(opt, params, 1)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["lr"] == 0.01 and sd["param_groups"][0]["lr"] == 0.1
    assert set(sd["state"]) == {0, 1, 2}
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["state"][0]["step"].dtype is fiamma.float32 and sd["state"][0]["step"].ndim == 0


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                     ("Adam", dict(lr=0.05, amsgrad=True)),
                                     ("AdamW", dict(lr=0.05)), ("NAdam", dict(lr=0.05)),
                                     ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
                                     ("Adagrad", dict(lr=0.1)), ("ASGD", dict(lr=0.05)),
                                     ("Rprop", dict(lr=0.01)), ("Adadelta", dict()),
                                     ("RAdam", dict(lr=0.05)), ("Adamax", dict(lr=0.05))])
def test_state_dict_round_trip_resumes_identically(name, kw):
    params = _params()
    opt = getattr(optim, name)(params, **kw)
    for t in range(5):
        _grad_step(opt, params, t)
    saved_params = [p.clone() for p in params]
    saved = pickle.loads(pickle.dumps(opt.state_dict()))  # a real copy, as a checkpoint is
    for t in range(5, 10):
        _grad_step(opt, params, t)
    expected = [p.numpy().copy() for p in params]

    fresh = [p.clone() for p in saved_params]
    opt2 = getattr(optim, name)(fresh, **kw)
    opt2.load_state_dict(saved)
    for t in range(5, 10):
        _grad_step(opt2, fresh, t)
    for p, e in zip(fresh, expected):
        np.testing.assert_array_equal(p.numpy(), e)


def test_load_state_dict_errors_and_casts():
    params = _params(2)
    opt = optim.Adam(params, lr=0.1)
    _grad_step(opt, params, 0)
    sd = opt.state_dict()
    other = optim.Adam(_params(3), lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        other.load_state_dict(sd)
    two = optim.Adam([{"params": _params(1)}, {"params": _params(1, 1)}], lr=0.1)
    with pytest.raises(ValueError, match="number of parameter groups"):
        two.load_state_dict(sd)
    # float32 parameters get float32 state from a float64 checkpoint; step stays float32
    p32 = [p.float() for p in _params(2)]
    opt32 = optim.Adam(p32, lr=0.1)
    opt32.load_state_dict(copy.deepcopy(sd))
    st = opt32.state[p32[0]]
    assert st["exp_avg"].dtype is fiamma.float32 and st["step"].dtype is fiamma.float32
    assert opt32.param_groups[0]["params"] == p32


def test_loads_a_state_dict_written_in_pytorch_layout():
    """A state dict as PyTorch's Adam writes it (keys and nesting), built by hand."""
    w = fiamma.tensor([1.0, 2.0])
    sd = {"state": {0: {"step": fiamma.tensor(3.0), "exp_avg": fiamma.tensor([0.1, 0.2]),
                        "exp_avg_sq": fiamma.tensor([0.01, 0.04])}},
          "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-08,
                            "weight_decay": 0, "amsgrad": False, "maximize": False,
                            "foreach": None, "capturable": False, "differentiable": False,
                            "fused": None, "params": [0]}]}
    opt = optim.Adam([w], lr=0.5)
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.01
    assert opt.param_groups[0]["decoupled_weight_decay"] is False  # filled from defaults
    w.grad = fiamma.tensor([1.0, 1.0])
    opt.step()
    assert opt.state[w]["step"].item() == 4.0


def test_scheduler_and_optimizer_state_survive_together():
    params = _params(1)
    opt = optim.SGD(params, lr=1.0, momentum=0.9)
    sched = StepLR(opt, step_size=2, gamma=0.5)
    for t in range(3):
        _grad_step(opt, params, t)
        sched.step()
    o_sd, s_sd = pickle.loads(pickle.dumps((opt.state_dict(), sched.state_dict())))
    opt2 = optim.SGD([params[0].clone()], lr=1.0, momentum=0.9)
    opt2.load_state_dict(o_sd)
    sched2 = StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(s_sd)
    sched.step()
    sched2.step()
    assert sched.get_last_lr() == sched2.get_last_lr() == [0.25]


def test_repr_lists_groups():
    opt = optim.SGD([fiamma.ones(1)], lr=0.1)
    r = repr(opt)
    assert r.startswith("SGD (") and "Parameter Group 0" in r and "lr: 0.1" in r
    two = optim.Adamax([{"params": [fiamma.ones(1)]}, {"params": [fiamma.ones(1)], "lr": 0.5}])
    r = repr(two)
    # PyTorch's layout: sorted keys, a blank line between groups
    assert "    weight_decay: 0\n\nParameter Group 1\n    betas: (0.9, 0.999)\n" in r
    assert r.endswith("    weight_decay: 0\n)")


def test_group_tensors_by_device_and_dtype():
    # PyTorch's static helper for foreach steps, called by libraries (timm's ADOPT)
    a = [fiamma.ones(2), fiamma.ones(2, dtype=fiamma.float64), fiamma.ones(3)]
    b = [fiamma.zeros(2), None, fiamma.zeros(3)]
    groups = optim.Optimizer._group_tensors_by_device_and_dtype([a, b], with_indices=True)
    assert set(groups) == {(fiamma.device("cpu"), fiamma.float32),
                           (fiamma.device("cpu"), fiamma.float64)}
    (fa, fb), idx = groups[(fiamma.device("cpu"), fiamma.float32)]
    assert idx == [0, 2] and fa[0] is a[0] and fa[1] is a[2] and fb[1] is b[2]
    (da, db), idx = groups[(fiamma.device("cpu"), fiamma.float64)]
    assert idx == [1] and len(da) == 1 and da[0] is a[1] and db == [None]
    assert optim.Optimizer._group_tensors_by_device_and_dtype([]) == {}


def test_wrapper_subclass_without_optimizer_init_runs_hooks_once():
    # a wrapper (as accelerate's AcceleratedOptimizer) subclasses Optimizer without running its
    # __init__ and steps the inner optimizer: its own step must work, and the hooks run once
    # (for the inner optimizer), as in PyTorch
    class Wrapper(optim.Optimizer):
        def __init__(self, inner):
            self.inner = inner

        @property
        def param_groups(self):
            return self.inner.param_groups

        def step(self, closure=None):
            return self.inner.step(closure)

    w = fiamma.ones(2)
    inner = optim.SGD([w], lr=0.5)
    seen = []
    h = optim.register_optimizer_step_pre_hook(lambda o, a, k: seen.append(type(o).__name__))
    try:
        w.grad = fiamma.ones(2)
        Wrapper(inner).step()
    finally:
        h.remove()
    assert seen == ["SGD"]
    assert w.tolist() == [0.5, 0.5]
