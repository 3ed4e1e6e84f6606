"""Learning-rate schedules: closed-form expectations written here, and (when PyTorch is
installed) the exact sequence PyTorch's schedulers produce for the same arguments."""

import math
import pickle
import warnings

import pytest

import fiamma
from fiamma import optim
from fiamma.optim import lr_scheduler as S

try:
    import torch
except ImportError:  # PyTorch is an optional reference
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def _opt(lib, kind="sgd", lr=1.0, groups=1):
    """An optimizer with `groups` parameter groups, in fiamma or torch."""
    if lib == "fiamma":
        params = [fiamma.zeros(1) for _ in range(groups)]
        mod = optim
    else:
        params = [torch.zeros(1) for _ in range(groups)]
        mod = torch.optim
    gs = [{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(params)]
    if kind == "sgd":
        return mod.SGD(gs, lr=lr, momentum=0.9)
    return mod.Adam(gs, lr=lr)


def _run(sched, opt, n, metric=None):
    """Learning rates (and momentum/beta1) after each of n steps, optimizer stepped first."""
    out = []
    for i in range(n):
        opt.step()
        if metric is not None:
            sched.step(metric(i))
        else:
            sched.step()
        g = opt.param_groups[0]
        mom = g.get("momentum", g.get("betas", (None,))[0])
        out.append(([float(x["lr"]) for x in opt.param_groups], mom))
    return out


# name -> (constructor taking (module, optimizer), steps, optimizer kind, metric)
SCHEDULES = {
    "lambda": (lambda m, o: m.LambdaLR(o, lambda e: 0.9 ** e), 8, "sgd", None),
    "lambda-per-group": (lambda m, o: m.LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.5]),
                         6, "sgd2", None),
    "multiplicative": (lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95), 8, "sgd", None),
    "step": (lambda m, o: m.StepLR(o, step_size=3, gamma=0.5), 10, "sgd", None),
    "multistep": (lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 7], gamma=0.1), 10,
                  "sgd", None),
    "constant": (lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=4), 8, "sgd", None),
    "linear": (lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=5), 9,
               "sgd", None),
    "exponential": (lambda m, o: m.ExponentialLR(o, gamma=0.8), 8, "sgd", None),
    "polynomial": (lambda m, o: m.PolynomialLR(o, total_iters=6, power=2.0), 9, "sgd", None),
    "cosine": (lambda m, o: m.CosineAnnealingLR(o, T_max=5, eta_min=0.01), 14, "sgd", None),
    "warm-restarts": (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                  eta_min=0.05), 16, "sgd",
                      None),
    "cyclic": (lambda m, o: m.CyclicLR(o, base_lr=0.1, max_lr=1.0, step_size_up=3,
                                       step_size_down=2), 14, "sgd", None),
    "cyclic-tri2": (lambda m, o: m.CyclicLR(o, 0.1, 1.0, step_size_up=2, mode="triangular2"),
                    14, "sgd", None),
    "cyclic-exp-adam": (lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="exp_range",
                                                gamma=0.9), 12, "adam", None),
    "onecycle": (lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=20), 20, "sgd", None),
    "onecycle-3phase-linear": (lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 2.0], epochs=2,
                                                          steps_per_epoch=7, three_phase=True,
                                                          anneal_strategy="linear"), 14,
                               "adam2", None),
    "plateau": (lambda m, o: m.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1), 16,
                "sgd", lambda i: [5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2][i]),
    "plateau-max-abs": (lambda m, o: m.ReduceLROnPlateau(o, mode="max", threshold=0.5,
                                                         threshold_mode="abs", patience=1,
                                                         min_lr=0.3), 10, "sgd",
                        lambda i: [1, 2, 2.2, 2.4, 3, 3, 3, 3, 3, 3][i]),
    "sequential": (lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, total_iters=3),
                                                  m.ExponentialLR(o, 0.9)], milestones=[3]),
                   9, "sgd", None),
    "chained": (lambda m, o: m.ChainedScheduler([m.ConstantLR(o, 0.5, total_iters=3),
                                                 m.ExponentialLR(o, 0.9)]), 8, "sgd", None),
    # found by differential fuzzing: the scheduler a milestone switches to restarts at epoch
    # 0 without a counted step, and MultiplicativeLR multiplies there too
    "sequential-multiplicative": (
        lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, 0.5, total_iters=2),
                                        m.MultiplicativeLR(o, lambda e: 0.9),
                                        m.PolynomialLR(o, total_iters=4)], milestones=[3, 6]),
        10, "sgd", None),
    "sequential-cosine": (
        lambda m, o: m.SequentialLR(o, [m.ExponentialLR(o, 0.5), m.CosineAnnealingLR(o, 4)],
                                    milestones=[2]), 10, "sgd", None),
    "sequential-milestone-0": (
        lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, 0.5), m.ExponentialLR(o, 0.9),
                                        m.StepLR(o, 2)], milestones=[0, 4]), 8, "sgd", None),
}


def _kind(k):
    return (k.rstrip("2"), 2 if k.endswith("2") else 1)


@needs_torch
@pytest.mark.parity
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_sequence_equals_pytorch(name):
    make, n, kind, metric = SCHEDULES[name]
    kind, groups = _kind(kind)
    runs = []
    for lib, mod in (("fiamma", S), ("torch", torch.optim.lr_scheduler)):
        opt = _opt(lib, kind, groups=groups)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = make(mod, opt)
            runs.append((sched.get_last_lr(), _run(sched, opt, n, metric)))
    (f_first, f_seq), (t_first, t_seq) = runs
    assert f_first == pytest.approx([float(x) for x in t_first], rel=1e-12)
    for (fl, fm), (tl, tm) in zip(f_seq, t_seq):
        assert fl == pytest.approx(tl, rel=1e-12, abs=1e-15)
        assert fm == pytest.approx(tm, rel=1e-12)


def test_closed_forms():
    o = _opt("fiamma")
    s = S.StepLR(o, step_size=3, gamma=0.5)
    assert [lr for (lr,), _ in _run(s, o, 7)] == [1, 1, 0.5, 0.5, 0.5, 0.25, 0.25]
    o = _opt("fiamma")
    s = S.MultiStepLR(o, milestones=[2, 4, 4], gamma=0.1)
    got = [lr for (lr,), _ in _run(s, o, 5)]
    assert got == pytest.approx([1, 0.1, 0.1, 0.001, 0.001])
    o = _opt("fiamma")
    s = S.CosineAnnealingLR(o, T_max=4, eta_min=0.0)
    got = [lr for (lr,), _ in _run(s, o, 4)]
    assert got == pytest.approx([(1 + math.cos(math.pi * e / 4)) / 2 for e in range(1, 5)],
                                abs=1e-12)
    o = _opt("fiamma")
    s = S.LinearLR(o, start_factor=0.5, total_iters=2)
    assert s.get_last_lr() == [0.5]
    assert [lr for (lr,), _ in _run(s, o, 3)] == pytest.approx([0.75, 1.0, 1.0])
    o = _opt("fiamma")
    s = S.OneCycleLR(o, max_lr=1.0, total_steps=10, cycle_momentum=False)
    assert s.get_last_lr() == pytest.approx([1.0 / 25])
    seq = [lr for (lr,), _ in _run(s, o, 9)]
    assert max(seq) == pytest.approx(1.0) and seq[-1] == pytest.approx(1.0 / 25 / 1e4)
    o.step()
    s.step()  # step 10 of 10
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        s.step()


def test_step_with_epoch_uses_closed_form():
    o = _opt("fiamma")
    s = S.ExponentialLR(o, gamma=0.5)
    o.step()
    with pytest.warns(UserWarning, match="deprecated"):
        s.step(3)
    assert s.get_last_lr() == [0.125]


def test_old_base_class_name():
    # `_LRScheduler`, the base's older name, still subclassed by libraries (BoTorch imports it)
    assert issubclass(S._LRScheduler, S.LRScheduler)
    assert not isinstance(S.StepLR(_opt("fiamma"), 1), S._LRScheduler)

    class Halving(S._LRScheduler):
        def get_lr(self):
            return [g["lr"] * 0.5 for g in self.optimizer.param_groups] if self.last_epoch else \
                [g["lr"] for g in self.optimizer.param_groups]

    o = _opt("fiamma")
    s = Halving(o)
    o.step()
    s.step()
    assert s.get_last_lr() == pytest.approx([o.param_groups[0]["initial_lr"] * 0.5])


def test_warns_when_scheduler_steps_before_optimizer():
    o = _opt("fiamma")
    s = S.StepLR(o, 1)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()


def test_errors():
    o = _opt("fiamma")
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.StepLR(object(), 1)
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(_opt("fiamma"), 1, last_epoch=3)
    with pytest.raises(ValueError, match="between 0 and 1"):
        S.ConstantLR(o, factor=2.0)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas"):
        S.LambdaLR(o, [lambda e: 1, lambda e: 2])
    with pytest.raises(ValueError, match="T_0"):
        S.CosineAnnealingWarmRestarts(o, T_0=0)
    with pytest.raises(ValueError, match="total_steps OR"):
        S.OneCycleLR(o, max_lr=1.0)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        S.ReduceLROnPlateau(o, factor=1.0)
    with pytest.raises(ValueError, match="momentum or beta1"):
        S.CyclicLR(optim.Adagrad([fiamma.zeros(1)]), 0.1, 1.0)
    with pytest.raises(ValueError, match="expected 1 values for max_lr"):
        S.CyclicLR(o, 0.1, [1.0, 2.0])
    other = _opt("fiamma")
    with pytest.raises(ValueError, match="same optimizer"):
        S.SequentialLR(o, [S.StepLR(o, 1), S.StepLR(other, 1)], milestones=[2])
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        S.SequentialLR(o, [S.StepLR(o, 1)], milestones=[2])


def test_state_dict_round_trip_continues_the_schedule():
    o = _opt("fiamma")
    s = S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2)
    _run(s, o, 4)
    sd = pickle.loads(pickle.dumps(s.state_dict()))
    assert "optimizer" not in sd
    rest = _run(s, o, 5)
    o2 = _opt("fiamma")
    o2.param_groups[0]["initial_lr"] = 1.0
    s2 = S.CosineAnnealingWarmRestarts(o2, T_0=3, T_mult=2, last_epoch=0)
    s2.load_state_dict(sd)
    o2.param_groups[0]["lr"] = s2.get_last_lr()[0]
    assert _run(s2, o2, 5) == rest


def test_lambda_state_dict_keeps_callable_objects():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, e):
            return self.rate ** e

    o = _opt("fiamma")
    fn = Decay()
    s = S.LambdaLR(o, fn)
    fn.rate = 0.25
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.25}]
    fresh = Decay()
    s2 = S.LambdaLR(_opt("fiamma"), fresh)
    s2.load_state_dict(sd)
    assert fresh.rate == 0.25
    s3 = S.LambdaLR(_opt("fiamma"), lambda e: 1.0)
    assert s3.state_dict()["lr_lambdas"] == [None]


def test_sequential_switch_restarts_the_next_scheduler_at_epoch_0():
    """At a milestone the next scheduler restarts at epoch 0 (MultiplicativeLR multiplies
    there too, as in PyTorch 2.13) without a counted step."""
    opt = _opt("fiamma")
    mult = S.MultiplicativeLR(opt, lambda e: 0.9)
    const = S.ConstantLR(opt, factor=0.5, total_iters=2)
    sched = S.SequentialLR(opt, [const, mult], milestones=[3])
    lrs = [sched.get_last_lr()[0]] + [lr[0] for lr, _ in _run(sched, opt, 5)]
    assert lrs == pytest.approx([0.5, 0.5, 1.0, 0.9, 0.81, 0.729], rel=1e-12)
    assert mult._step_count == 3 and mult.last_epoch == 2


@pytest.mark.parametrize("last_epoch", [0, 3])
def test_resumed_chainable_schedules_keep_the_current_rate_at_construction(last_epoch):
    """A scheduler built to resume (last_epoch >= 0) leaves the optimizer's rates alone in its
    constructor's step, then continues the chainable schedule."""
    cases = {
        "exponential": (lambda o: S.ExponentialLR(o, gamma=0.5, last_epoch=last_epoch),
                        [0.15, 0.075]),
        "multiplicative": (lambda o: S.MultiplicativeLR(o, lambda e: 0.5,
                                                        last_epoch=last_epoch), [0.15, 0.075]),
    }
    for make, want in cases.values():
        p = fiamma.zeros(1)
        opt = optim.SGD([{"params": [p], "lr": 0.3, "initial_lr": 0.2}], lr=0.3)
        sched = make(opt)
        assert sched.get_last_lr() == [0.3]
        got = []
        for _ in range(2):
            opt.step()
            sched.step()
            got.append(sched.get_last_lr()[0])
        assert got == pytest.approx(want, rel=1e-12)


@needs_torch
@pytest.mark.parity
@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
                                  "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
                                  "CosineAnnealingWarmRestarts", "LambdaLR",
                                  "MultiplicativeLR", "CyclicLR", "OneCycleLR"])
@pytest.mark.parametrize("last_epoch", [0, 1, 5])
def test_resume_with_last_epoch_equals_pytorch(name, last_epoch):
    kw = {"StepLR": dict(step_size=3), "MultiStepLR": dict(milestones=[2, 7]),
          "ConstantLR": dict(factor=0.5, total_iters=8), "LinearLR": dict(total_iters=8),
          "ExponentialLR": dict(gamma=0.9), "PolynomialLR": dict(total_iters=12, power=2.0),
          "CosineAnnealingLR": dict(T_max=7, eta_min=0.01),
          "CosineAnnealingWarmRestarts": dict(T_0=3, T_mult=2),
          "LambdaLR": dict(lr_lambda=lambda e: 0.9 ** e),
          "MultiplicativeLR": dict(lr_lambda=lambda e: 0.9),
          "CyclicLR": dict(base_lr=0.01, max_lr=0.1, step_size_up=3, cycle_momentum=False),
          "OneCycleLR": dict(max_lr=0.5, total_steps=30)}[name]
    runs = []
    for lib, om, sm in ((fiamma, optim, S), (torch, torch.optim, torch.optim.lr_scheduler)):
        p = lib.zeros(2)
        opt = om.SGD([{"params": [p], "lr": 0.3, "initial_lr": 0.2, "max_lr": 0.5,
                       "min_lr": 1e-5, "max_momentum": 0.9, "base_momentum": 0.8}], lr=0.3,
                     momentum=0.9)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = getattr(sm, name)(opt, last_epoch=last_epoch, **kw)
            out = [sched.get_last_lr()[0]] + [lr[0] for lr, _ in _run(sched, opt, 8)]
        runs.append(out)
    assert runs[0] == pytest.approx(runs[1], rel=1e-12)


@needs_torch
@pytest.mark.parity
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_keys_equal_pytorch(name):
    """The same keys in the same order (PyTorch 2.13's private _is_initial and
    _get_lr_called_within_step included; CyclicLR's _scale_fn_custom, which PyTorch's
    load_state_dict requires)."""
    make, n, kind, metric = SCHEDULES[name]
    kind, groups = _kind(kind)
    keys = []
    for lib, mod in (("fiamma", S), ("torch", torch.optim.lr_scheduler)):
        opt = _opt(lib, kind, groups=groups)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = make(mod, opt)
            _run(sched, opt, 3, metric)
        sd = sched.state_dict()
        keys.append((list(sd), [list(x) for x in sd.get("_schedulers", [])]))
    assert keys[0] == keys[1]


@needs_torch
@pytest.mark.parity
def test_cyclic_state_dict_loads_into_pytorch_and_back():
    fo, to = _opt("fiamma"), _opt("torch")
    f = S.CyclicLR(fo, 0.1, 1.0, step_size_up=3)
    t = torch.optim.lr_scheduler.CyclicLR(to, 0.1, 1.0, step_size_up=3)
    _run(f, fo, 4)
    t.load_state_dict(f.state_dict())
    _run(t, to, 1)
    _run(f, fo, 1)
    assert t.get_last_lr() == pytest.approx(f.get_last_lr(), rel=1e-12)
    f2 = S.CyclicLR(_opt("fiamma"), 0.1, 1.0, step_size_up=3)
    f2.load_state_dict(t.state_dict())
    assert f2.last_epoch == t.last_epoch and f2._scale_fn_custom is None


def test_private_lrscheduler_alias():
    # older code (skorch, Lightning) imports _LRScheduler and checks isinstance against it
    assert issubclass(S._LRScheduler, S.LRScheduler)
    opt = optim.SGD([fiamma.zeros(1)], lr=1.0)  # no autograd: fiamma-optim's wheel tests

    class Halve(S._LRScheduler):
        def get_lr(self):
            return [g["lr"] * 0.5 for g in self.optimizer.param_groups]

    sched = Halve(opt)
    opt.step()
    sched.step()
    # halved at creation and at step()
    assert isinstance(sched, S.LRScheduler) and sched.get_last_lr() == [0.25]
