"""ASGD (averaged SGD) and Rprop (PyTorch's update rules)."""

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
    _step_count,
    _use_grad,
)

__all__ = ["ASGD", "Rprop"]


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky): SGD with a decaying step ``eta_t = lr / (1 + lambd lr
    t)^alpha`` and a running average ``ax`` of the iterates, started after ``t0`` steps."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_hyper("ASGD", lr=lr, weight_decay=weight_decay)
        _check_flags("ASGD", foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = _lr(group), group["lambd"], group["alpha"], group["t0"]
            wd = group["weight_decay"]
            for p, g in _grads(group, group["maximize"], "ASGD"):
                state = self.state[p]
                if "eta" not in state:
                    # eta and mu live in float32 0-d tensors, as in PyTorch's state dicts
                    # (whose key order is step, eta, mu, ax)
                    state.setdefault("step", fiamma.zeros((), dtype=fiamma.float32))
                    state["eta"] = fiamma.full((), lr, dtype=fiamma.float32)
                    state["mu"] = fiamma.ones((), dtype=fiamma.float32)
                (ax,) = _moments(state, p, "ax")
                t = _step_count(state, p)
                if wd:
                    g = g.add(p, alpha=wd)
                eta = state["eta"].item()
                p.mul_(1 - lambd * eta)
                p.add_(g, alpha=-eta)
                mu = state["mu"].item()
                if mu != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                state["eta"].fill_(lr / ((1 + lambd * lr * t) ** alpha))
                state["mu"].fill_(1 / max(1, t - t0))
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller & Braun): per-coordinate step sizes grow by
    ``etas[1]`` while the gradient keeps its sign and shrink by ``etas[0]`` when it flips
    (that step is skipped), clamped to ``step_sizes``; the update uses only the sign."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_hyper("Rprop", lr=lr)
        _check(0.0 < etas[0] < 1.0 < etas[1], "Rprop", "eta values", etas)
        _check_flags("Rprop", foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, (eminus, eplus) = _lr(group), group["etas"]
            smin, smax = group["step_sizes"]
            for p, g in _grads(group, group["maximize"], "Rprop"):
                state = self.state[p]
                _step_count(state, p)
                (prev,) = _moments(state, p, "prev")
                if "step_size" not in state:  # lr + lr j for complex (both parts step)
                    state["step_size"] = fiamma.full_like(g, complex(lr, lr) if g.is_complex()
                                                          else lr)
                size = state["step_size"]
                if p.is_complex():
                    p, g, prev, size = _real(p, g, prev, size)
                s = g.mul(prev).sign()
                grow, shrink = s > 0, s < 0
                dt = size.dtype  # the factors in the state's dtype, not the default float
                factor = fiamma.where(grow, fiamma.tensor(eplus, dtype=dt), fiamma.where(
                    shrink, fiamma.tensor(eminus, dtype=dt), fiamma.tensor(1.0, dtype=dt)))
                size.mul_(factor).clamp_(smin, smax)
                g = fiamma.where(shrink, 0.0, g).to(g.dtype)
                p.addcmul_(g.sign(), size, value=-1)
                prev.copy_(g)
        return loss
