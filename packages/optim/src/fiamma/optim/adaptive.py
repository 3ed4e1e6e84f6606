"""Per-coordinate adaptive methods: RMSprop, Adagrad, Adadelta (PyTorch's update rules)."""

import fiamma
from fiamma.optim.optimizer import (
    Optimizer,
    _check,
    _check_flags,
    _check_hyper,
    _closure_loss,
    _grads,
    _lr,
    _moments,
    _real,
    _sparse_rows,
    _step_count,
    _use_grad,
)

__all__ = ["RMSprop", "Adagrad", "Adadelta"]


class RMSprop(Optimizer):
    """RMSprop (Hinton): ``s = alpha s + (1 - alpha) g^2``, ``p -= lr g / (sqrt(s) + eps)``;
    ``centered`` subtracts the squared running mean of g, ``momentum`` adds a velocity."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_hyper("RMSprop", lr=lr, eps=eps, weight_decay=weight_decay, momentum=momentum)
        _check(alpha >= 0.0, "RMSprop", "alpha value", alpha)
        _check_flags("RMSprop", foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, alpha, eps, wd = _lr(group), group["alpha"], group["eps"], group["weight_decay"]
            mom, centered = group["momentum"], group["centered"]
            for p, g in _grads(group, group["maximize"], "RMSprop"):
                state = self.state[p]
                _step_count(state, p)
                (sq,) = _moments(state, p, "square_avg")
                buf = _moments(state, p, "momentum_buffer")[0] if mom > 0 else None
                ga = _moments(state, p, "grad_avg")[0] if centered else None
                if p.is_complex():
                    p, g, sq = _real(p, g, sq)
                    buf = _real(buf)[0] if buf is not None else None
                    ga = _real(ga)[0] if ga is not None else None
                if wd:
                    g = g.add(p, alpha=wd)
                sq.mul_(alpha).addcmul_(g, g, value=1 - alpha)
                if centered:
                    ga.lerp_(g, 1 - alpha)
                    avg = sq.addcmul(ga, ga, value=-1).sqrt_()
                else:
                    avg = sq.sqrt()
                avg.add_(eps)
                if mom > 0:
                    buf.mul_(mom).addcdiv_(g, avg)
                    p.add_(buf, alpha=-lr)
                else:
                    p.addcdiv_(g, avg, value=-lr)
        return loss


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.): ``s += g^2``, ``p -= lr_t g / (sqrt(s) + eps)`` with
    ``lr_t = lr / (1 + (t - 1) lr_decay)``. State is created at construction, as in PyTorch.
    A sparse gradient (``Embedding(sparse=True)``) updates only its rows of ``s`` and ``p``
    (weight decay is refused for it, as in PyTorch)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_hyper("Adagrad", lr=lr, eps=eps, weight_decay=weight_decay)
        _check(lr_decay >= 0.0, "Adagrad", "lr_decay value", lr_decay)
        _check(initial_accumulator_value >= 0.0, "Adagrad", "initial_accumulator_value value",
               initial_accumulator_value)
        _check_flags("Adagrad", foreach, fused, False, differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        # PyTorch fills every accumulator with the constructor's initial_accumulator_value
        # (a group's own value is kept in the group but not used); v + vj for complex
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p):
        state = self.state[p]  # keys in PyTorch's order: step, sum
        state.setdefault("step", fiamma.zeros((), dtype=fiamma.float32))
        v = self.defaults["initial_accumulator_value"]
        state["sum"] = fiamma.full_like(p, complex(v, v) if p.is_complex() else v)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, decay, eps, wd = _lr(group), group["lr_decay"], group["eps"], group["weight_decay"]
            for p, g in _grads(group, group["maximize"], sparse=True):
                state = self.state[p]
                if "sum" not in state:  # a group added after construction
                    self._init_state(p)
                t = _step_count(state, p)
                clr = lr / (1 + (t - 1) * decay)
                s = state["sum"]
                if g.is_sparse:  # PyTorch's sparse path: only the gradient's rows change
                    if wd:
                        raise RuntimeError("weight_decay option is not compatible with sparse "
                                           "gradients")
                    prow, idx, vals = _sparse_rows(p, g)
                    srow = s.view(prow.shape)
                    srow.index_add_(0, idx, vals * vals)
                    std = srow.index_select(0, idx).sqrt_().add_(eps)
                    prow.index_add_(0, idx, vals / std, alpha=-clr)
                    continue
                if p.is_complex():
                    p, g, s = _real(p, g, s)
                if wd:
                    g = g.add(p, alpha=wd)
                s.addcmul_(g, g, value=1)
                p.addcdiv_(g, s.sqrt().add_(eps), value=-clr)
        return loss


class Adadelta(Optimizer):
    """Adadelta (Zeiler): ``s = rho s + (1 - rho) g^2``,
    ``d = sqrt(a + eps) / sqrt(s + eps) * g``, ``a = rho a + (1 - rho) d^2``, ``p -= lr d``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_hyper("Adadelta", lr=lr, eps=eps, weight_decay=weight_decay)
        _check(0.0 <= rho <= 1.0, "Adadelta", "rho value", rho)
        _check_flags("Adadelta", foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, rho, eps, wd = _lr(group), group["rho"], group["eps"], group["weight_decay"]
            for p, g in _grads(group, group["maximize"], "Adadelta"):
                state = self.state[p]
                _step_count(state, p)
                sq, acc = _moments(state, p, "square_avg", "acc_delta")
                if p.is_complex():
                    p, g, sq, acc = _real(p, g, sq, acc)
                if wd:
                    g = g.add(p, alpha=wd)
                sq.mul_(rho).addcmul_(g, g, value=1 - rho)
                std = sq.add(eps).sqrt_()
                delta = acc.add(eps).sqrt_().div_(std).mul_(g)
                acc.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                p.add_(delta, alpha=-lr)
        return loss
