"""Adafactor and Muon (PyTorch 2.13's ``torch.optim.Adafactor`` and ``torch.optim.Muon``).

Adafactor keeps, for a parameter of two or more dimensions, only the row and column means of
the squared gradient over its last two dimensions (factored second moments), so its state is
``O(rows + cols)`` per matrix; a vector or scalar keeps the full second moment. Muon
orthogonalises the (Nesterov) momentum of a 2-d parameter by a quintic Newton-Schulz iteration
run in bfloat16, as PyTorch's does, so the two libraries' updates agree bit for bit.
"""

import math

import fiamma
from fiamma.optim.optimizer import Optimizer, _closure_loss, _lr, _use_grad

__all__ = ["Adafactor", "Muon"]


def _scalar(v):
    return v.item() if isinstance(v, fiamma.Tensor) else v


def _check_lr(lr):
    if isinstance(lr, fiamma.Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= _scalar(lr):
        raise ValueError(f"Learning rate should be >= 0 but is: {lr}")


def _plain_grads(group, name):
    """(param, grad) pairs with a gradient; complex parameters and sparse gradients are
    refused with PyTorch's messages."""
    out = []
    for p in group["params"]:
        g = p.grad
        if g is None:
            continue
        if p.is_complex():
            raise RuntimeError(f"{name} does not support complex parameters")
        if g.is_sparse:
            raise RuntimeError(f"{name} does not support sparse gradients")
        out.append((p, g))
    return out


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, 2018) as PyTorch 2.13 defines it.

    Per step t (``rho_t = min(lr, 1/sqrt(t))``, ``beta2_t = 1 - t**beta2_decay``):
    ``alpha = max(eps2, rms(p)) * rho_t``; decoupled weight decay ``p *= 1 - lr * weight_decay``;
    for ``p.dim() >= 2`` the row and column means of ``g^2`` over the last two dimensions are
    averaged into ``row_var`` (shape ``(..., R, 1)``) and ``col_var`` (``(..., 1, C)``) and the
    second moment is estimated as ``row_var @ col_var / max(mean(row_var), eps1)``; otherwise
    ``variance`` averages ``g^2``. The update ``u = g / sqrt(max(v, eps1^2))`` is clipped to
    RMS ``d`` and ``p -= alpha * u / max(1, rms(u) / d)``. ``eps1=None`` is the parameter
    dtype's machine epsilon (the first parameter's of the group, as in PyTorch).

    >>> import fiamma
    >>> w = fiamma.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> opt = Adafactor([w])
    >>> w.grad = fiamma.ones(2, 2); opt.step()
    >>> sorted(opt.state[w])
    ['col_var', 'row_var', 'step']
    >>> tuple(opt.state[w]["row_var"].shape), tuple(opt.state[w]["col_var"].shape)
    ((2, 1), (1, 2))
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        _check_lr(lr)
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)

    @staticmethod
    def _init_state(state, g):
        # keys in PyTorch's order; the factors have the gradient's dtype
        state["step"] = fiamma.zeros((), dtype=fiamma.float32)
        if g.dim() > 1:
            state["row_var"] = fiamma.zeros((*g.shape[:-1], 1), dtype=g.dtype)
            state["col_var"] = fiamma.zeros((*g.shape[:-2], 1, g.shape[-1]), dtype=g.dtype)
        else:
            state["variance"] = fiamma.zeros_like(g)

    @_use_grad
    def step(self, closure=None):
        """One Adafactor update of every parameter that has a gradient."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, decay, d, wd = _lr(group), group["beta2_decay"], group["d"], group["weight_decay"]
            eps1, eps2 = group["eps"]
            for p, g in _plain_grads(group, "Adafactor"):
                if group["maximize"]:
                    g = -g
                state = self.state[p]
                if len(state) == 0:
                    self._init_state(state, g)
                if eps1 is None:
                    eps1 = fiamma.finfo(p.dtype).eps
                state["step"] += 1
                t = state["step"].item()
                one_minus_beta2 = t ** decay
                rho = min(lr, 1 / t ** 0.5)
                n = p.numel()
                alpha = max(eps2, p.norm(2).item() / n ** 0.5) * rho
                if wd != 0:
                    p.mul_(1 - lr * wd)
                if g.dim() > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    row_var.lerp_(g.norm(dim=-1, keepdim=True).square_().div_(g.shape[-1]),
                                  one_minus_beta2)
                    col_var.lerp_(g.norm(dim=-2, keepdim=True).square_().div_(g.shape[-2]),
                                  one_minus_beta2)
                    v = row_var @ col_var
                    v.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
                else:
                    variance = state["variance"]
                    variance.lerp_(g * g, one_minus_beta2)
                    v = variance.clone()
                u = v.clamp_(min=eps1 * eps1).rsqrt_().mul_(g)
                denom = max(1.0, u.norm(2).item() / (u.numel() ** 0.5 * d))
                p.add_(u, alpha=-alpha / denom)
        return loss


_NS_A, _NS_B, _NS_C = 3.4445, -4.7750, 2.0315


def _newton_schulz(grad, coefficients, steps, eps):
    """The quintic Newton-Schulz iteration ``X <- a X + (b A + c A^2) X`` with ``A = X X^T``,
    from ``X = G / max(||G||_F, eps)`` in bfloat16 (on the wide orientation of ``G``): an
    approximate orthogonalisation ``U S' V^T`` of ``G = U S V^T`` (``S'`` near 1)."""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.dim() != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    tall = grad.shape[0] > grad.shape[1]
    x = grad.bfloat16()
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        poly = fiamma.addmm(gram, gram, gram, beta=b, alpha=c)
        x = fiamma.addmm(x, poly, x, beta=a)
    return x.T if tall else x


def _adjusted_lr(lr, how, shape):
    rows, cols = shape[:2]
    if how is None or how == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if how == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    """Muon (MomentUm Orthogonalized by Newton-Schulz) for 2-d parameters, as PyTorch 2.13's.

    Per step: ``B = momentum * B + (1 - momentum) * g`` (a lerp); the update direction is
    ``g.lerp(B, momentum)`` with ``nesterov`` (else ``B``), orthogonalised by ``ns_steps``
    Newton-Schulz iterations with ``ns_coefficients`` in bfloat16; then decoupled weight decay
    ``p *= 1 - lr * weight_decay`` and ``p -= lr' * O`` where ``lr'`` is ``lr *
    sqrt(max(1, A/B))`` (``adjust_lr_fn=None`` or ``"original"``) or ``0.2 * lr *
    sqrt(max(A, B))`` (``"match_rms_adamw"``) for an ``A x B`` parameter. Only 2-d
    parameters are accepted (use AdamW for biases and embeddings).

    >>> import fiamma
    >>> w = fiamma.zeros(2, 2)
    >>> opt = Muon([w], lr=0.1, weight_decay=0.0)
    >>> w.grad = fiamma.tensor([[1.0, 0.0], [0.0, 1.0]]); opt.step()
    >>> [[round(v, 2) for v in row] for row in w.tolist()]
    [[-0.11, 0.0], [0.0, -0.11]]
    """

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(_NS_A, _NS_B, _NS_C), eps=1e-7, ns_steps=5,
                 adjust_lr_fn=None):
        _check_lr(lr)
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    @_use_grad
    def step(self, closure=None):
        """One Muon update of every parameter that has a gradient."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, wd, mom = _lr(group), group["weight_decay"], group["momentum"]
            for p, g in _plain_grads(group, "Muon"):
                if g.dim() != 2:
                    raise ValueError("Param gradient must be a 2D matrix")
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = fiamma.zeros_like(g)
                buf.lerp_(g, 1 - mom)
                u = g.lerp(buf, mom) if group["nesterov"] else buf
                u = _newton_schulz(u, group["ns_coefficients"], group["ns_steps"], group["eps"])
                p.mul_(1 - lr * wd)
                p.add_(u, alpha=-_adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss
