"""The Adam family: Adam, AdamW, Adamax, NAdam, RAdam (PyTorch's update rules)."""

import math

import fiamma
from fiamma import fused
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

__all__ = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "SparseAdam"]


class Adam(Optimizer):
    """Adam (Kingma & Ba), with optional AMSGrad and L2 or decoupled weight decay.

    Per step t: ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`` (``v`` replaced by its
    running maximum with ``amsgrad``).

    >>> import fiamma
    >>> w = fiamma.tensor([1.0])
    >>> opt = Adam([w], lr=0.1)
    >>> w.grad = fiamma.tensor([3.0]); opt.step(); round(w.item(), 4)
    0.9
    """

    _name = "Adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_hyper(self._name, lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        _check_flags(self._name, foreach, fused, capturable, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _check_group(self, group):
        _check_hyper(self._name, lr=group["lr"], eps=group["eps"],
                     weight_decay=group["weight_decay"], betas=group["betas"])

    @_use_grad
    def step(self, closure=None):
        """One Adam update of every parameter that has a gradient."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, (b1, b2), eps = _lr(group), group["betas"], group["eps"]
            wd, amsgrad = group["weight_decay"], group["amsgrad"]
            decoupled = group.get("decoupled_weight_decay", False)
            if group["fused"] is not False and self._fused_step(group, lr, b1, b2, eps, wd,
                                                                amsgrad, decoupled):
                continue
            for p, g in _grads(group, group["maximize"], "Adam"):
                state = self.state[p]
                t = _step_count(state, p)
                m, v = _moments(state, p, "exp_avg", "exp_avg_sq")
                if amsgrad:
                    (vmax,) = _moments(state, p, "max_exp_avg_sq")
                if p.is_complex():
                    p, g, m, v = _real(p, g, m, v)
                    if amsgrad:
                        (vmax,) = _real(vmax)
                if wd:
                    if decoupled:
                        p.mul_(1 - lr * wd)
                    else:
                        g = g.add(p, alpha=wd)
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                bc1 = 1 - b1 ** t
                bc2_sqrt = (1 - b2 ** t) ** 0.5
                if amsgrad:
                    vmax.copy_(fiamma.maximum(vmax, v))
                    denom = (vmax.sqrt() / bc2_sqrt).add_(eps)
                else:
                    denom = (v.sqrt() / bc2_sqrt).add_(eps)
                p.addcdiv_(m, denom, value=-lr / bc1)
        return loss


    def _fused_step(self, group, lr, b1, b2, eps, wd, amsgrad, decoupled):
        """The whole group in one C call (fiamma.fused.adam_) when every parameter and
        gradient allows it; False to fall back to the reference loop."""
        pairs = [(p, g) for p in group["params"] if (g := p.grad) is not None]
        if not pairs or not fused.supports([t for pg in pairs for t in pg]):
            return not pairs
        ps, gs, ms, vs, vms, steps = [], [], [], [], [], []
        for p, g in pairs:
            state = self.state[p]
            steps.append(_step_count(state, p))
            m, v = _moments(state, p, "exp_avg", "exp_avg_sq")
            if amsgrad:
                vms.append(_moments(state, p, "max_exp_avg_sq")[0])
            ps.append(p)
            gs.append(g)
            ms.append(m)
            vs.append(v)
        fused.adam_(ps, gs, ms, vs, vms if amsgrad else None, steps=steps, lr=lr, beta1=b1,
                    beta2=b2, eps=eps, weight_decay=wd, amsgrad=amsgrad,
                    maximize=group["maximize"], decoupled=decoupled)
        return True


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam update. Default ``weight_decay=1e-2``."""

    _name = "AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class Adamax(Optimizer):
    """Adamax: Adam with the infinity norm, ``u = max(b2 u, |g| + eps)``,
    ``p -= lr / (1 - b1^t) * m / u``."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_hyper("Adamax", lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        _check_flags("Adamax", foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = _lr(group), group["betas"], group["eps"], group["weight_decay"]
            for p, g in _grads(group, group["maximize"], "Adamax"):
                state = self.state[p]
                t = _step_count(state, p)
                m, u = _moments(state, p, "exp_avg", "exp_inf")
                if p.is_complex():
                    p, g, m, u = _real(p, g, m, u)
                if wd:
                    g = g.add(p, alpha=wd)
                m.lerp_(g, 1 - b1)
                u.copy_(fiamma.maximum(u.mul_(b2), g.abs().add_(eps)))
                p.addcdiv_(m, u, value=-lr / (1 - b1 ** t))
        return loss


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat), with PyTorch's momentum-decay schedule
    ``mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay))``; ``decoupled_weight_decay`` gives
    NAdamW."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_hyper("NAdam", lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        _check(momentum_decay >= 0.0, "NAdam", "momentum_decay value", momentum_decay)
        _check_flags("NAdam", foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = _lr(group), group["betas"], group["eps"], group["weight_decay"]
            psi = group["momentum_decay"]
            for p, g in _grads(group, group["maximize"], "NAdam"):
                state = self.state[p]
                t = _step_count(state, p)
                if "mu_product" not in state:
                    state["mu_product"] = fiamma.ones((), dtype=fiamma.float32)
                m, v = _moments(state, p, "exp_avg", "exp_avg_sq")
                if p.is_complex():
                    p, g, m, v = _real(p, g, m, v)
                if wd:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        g = g.add(p, alpha=wd)
                mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
                mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
                mp_t = state["mu_product"]
                mp_t.mul_(mu)
                mp = mp_t.item()
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = v.div(1 - b2 ** t).sqrt().add_(eps)
                p.addcdiv_(g, denom, value=-lr * (1.0 - mu) / (1.0 - mp))
                p.addcdiv_(m, denom, value=-lr * mu_next / (1.0 - mp * mu_next))
        return loss


class RAdam(Optimizer):
    """Rectified Adam (Liu et al.): plain momentum SGD while the variance estimate is not
    tractable (rho_t <= 5), rectified Adam steps after; ``decoupled_weight_decay`` as AdamW."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_hyper("RAdam", lr=lr, eps=eps, weight_decay=weight_decay, betas=betas)
        _check_flags("RAdam", foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, (b1, b2), eps, wd = _lr(group), group["betas"], group["eps"], group["weight_decay"]
            rho_inf = 2 / (1 - b2) - 1
            for p, g in _grads(group, group["maximize"], "RAdam"):
                state = self.state[p]
                t = _step_count(state, p)
                m, v = _moments(state, p, "exp_avg", "exp_avg_sq")
                if p.is_complex():
                    p, g, m, v = _real(p, g, m, v)
                if wd:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        g = g.add(p, alpha=wd)
                m.lerp_(g, 1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
                m_hat = m / bc1
                rho_t = rho_inf - 2 * t * (b2 ** t) / bc2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    adaptive = (bc2 ** 0.5) / v.sqrt().add_(eps)
                    p.add_(m_hat * lr * adaptive * rect, alpha=-1.0)
                else:
                    p.add_(m_hat * lr, alpha=-1.0)
        return loss


class SparseAdam(Optimizer):
    """Adam for sparse gradients (``Embedding(sparse=True)``), PyTorch's ``SparseAdam``: only
    the moments and parameter rows that the (coalesced) gradient holds are updated, with
    Adam's formulas and a per-parameter step count for the bias corrections. Dense gradients
    and sparse parameters are refused.

    >>> import fiamma
    >>> w = fiamma.zeros(4, 2)  # (an nn.Embedding(4, 2, sparse=True)'s weight, say)
    >>> opt = SparseAdam([w], lr=0.1)
    >>> w.grad = fiamma.sparse_coo_tensor([[1]], [[1.0, -1.0]], (4, 2))  # row 1 only
    >>> opt.step()
    >>> [round(v, 4) for v in w[1].tolist()], bool(w[0].any() or w[2:].any())
    ([-0.1, 0.1], False)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if not (isinstance(lr, fiamma.Tensor) or 0.0 < lr):
            raise ValueError(f"SparseAdam: invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"SparseAdam: invalid epsilon value: {eps}")
        _check_hyper("SparseAdam", lr=lr, betas=betas)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, maximize=maximize)
        super().__init__(params, defaults)
        bad = [i for i, p in enumerate(p for g in self.param_groups for p in g["params"])
               if p.is_sparse]
        if bad:
            raise ValueError(f"Sparse params at indices {bad}: SparseAdam requires dense "
                             "parameter tensors")

    def _check_group(self, group):
        _check_hyper("SparseAdam", lr=group["lr"], betas=group["betas"])

    @_use_grad
    def step(self, closure=None):
        """One update of the rows of every parameter that has a (sparse) gradient."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, (b1, b2), eps = _lr(group), group["betas"], group["eps"]
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if not g.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
                if group["maximize"]:
                    g = -g
                state = self.state[p]
                # PyTorch's SparseAdam counts steps in a Python int, its first state key
                t = state["step"] = int(state.get("step", 0)) + 1
                m, v = _moments(state, p, "exp_avg", "exp_avg_sq")
                prow, idx, vals = _sparse_rows(p, g)
                if vals.numel() == 0:
                    continue
                mrow, vrow = m.view(prow.shape), v.view(prow.shape)
                # old += (1 - b) (new - old) on the gradient's rows only
                m_old = mrow.index_select(0, idx)
                m_upd = (vals - m_old).mul_(1 - b1)
                mrow.index_add_(0, idx, m_upd)
                v_old = vrow.index_select(0, idx)
                v_upd = (vals * vals).sub_(v_old).mul_(1 - b2)
                vrow.index_add_(0, idx, v_upd)
                numer = m_upd.add_(m_old)
                denom = v_upd.add_(v_old).sqrt_().add_(eps)
                step_size = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                prow.index_add_(0, idx, numer.div_(denom), alpha=-step_size)
        return loss
