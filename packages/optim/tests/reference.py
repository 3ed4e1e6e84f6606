"""Float64 NumPy implementations of each optimizer's published update rule (the references
the optimizers are checked against), and a deterministic test problem."""

import math

import numpy as np


def problem_grad(p, k, t):
    """Gradient of a smooth non-quadratic objective for parameter number k at step t:
    depends on the current value, so a wrong update changes every later gradient."""
    target = np.cos(np.arange(p.size).reshape(p.shape) + k)
    return 2.0 * (p - target) + 0.3 * np.sin(3.0 * p) + 0.05 * math.cos(t)


def sgd(p, g, s, t, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
        maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    if momentum:
        b = s.get("b")
        b = g.copy() if b is None else momentum * b + (1 - dampening) * g
        s["b"] = b
        g = g + momentum * b if nesterov else b
    return p - lr * g


def adam(p, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
         maximize=False, decoupled=False):
    b1, b2 = betas
    g = -g if maximize else g
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    s["m"], s["v"] = m, v
    if amsgrad:
        s["vmax"] = np.maximum(s.get("vmax", 0.0), v)
        v = s["vmax"]
    m_hat = m / (1 - b1 ** t)
    v_hat = v / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps)


def adamax(p, g, s, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    g = g + weight_decay * p
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    u = np.maximum(b2 * s.get("u", 0.0), np.abs(g) + eps)
    s["m"], s["u"] = m, u
    return p - lr / (1 - b1 ** t) * m / u


def nadam(p, g, s, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
          momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    if decoupled_weight_decay:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    prod = s.get("prod", 1.0) * mu
    s["prod"] = prod
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    s["m"], s["v"] = m, v
    denom = np.sqrt(v / (1 - b2 ** t)) + eps
    return (p - lr * (1 - mu) / (1 - prod) * g / denom
            - lr * mu_next / (1 - prod * mu_next) * m / denom)


def radam(p, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
          decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    if decoupled_weight_decay:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    m = b1 * s.get("m", 0.0) + (1 - b1) * g
    v = b2 * s.get("v", 0.0) + (1 - b2) * g * g
    s["m"], s["v"] = m, v
    m_hat = m / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho > 5:
        r = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
        return p - lr * m_hat * r * math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
    return p - lr * m_hat


def rmsprop(p, g, s, t, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
            centered=False, maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    sq = alpha * s.get("sq", 0.0) + (1 - alpha) * g * g
    s["sq"] = sq
    if centered:
        ga = alpha * s.get("ga", 0.0) + (1 - alpha) * g
        s["ga"] = ga
        avg = np.sqrt(sq - ga * ga) + eps
    else:
        avg = np.sqrt(sq) + eps
    if momentum > 0:
        b = momentum * s.get("b", 0.0) + g / avg
        s["b"] = b
        return p - lr * b
    return p - lr * g / avg


def adagrad(p, g, s, t, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
            eps=1e-10, maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    acc = s.get("sum", initial_accumulator_value) + g * g
    s["sum"] = acc
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(acc) + eps)


def adadelta(p, g, s, t, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    sq = rho * s.get("sq", 0.0) + (1 - rho) * g * g
    delta = np.sqrt(s.get("acc", 0.0) + eps) / np.sqrt(sq + eps) * g
    s["sq"] = sq
    s["acc"] = rho * s.get("acc", 0.0) + (1 - rho) * delta * delta
    return p - lr * delta


def asgd(p, g, s, t, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    eta = s.get("eta", lr)
    mu = s.get("mu", 1.0)
    p = p * (1 - lambd * eta) - eta * g
    ax = s.get("ax", np.zeros_like(p))
    s["ax"] = ax + (p - ax) * mu if mu != 1 else p.copy()
    s["eta"] = lr / (1 + lambd * lr * t) ** alpha
    s["mu"] = 1 / max(1, t - t0)
    return p


def rprop(p, g, s, t, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    g = -g if maximize else g
    prev = s.get("prev", np.zeros_like(p))
    size = s.get("size", np.full_like(p, lr))
    prod = g * prev
    size = np.clip(size * np.where(prod > 0, etas[1], np.where(prod < 0, etas[0], 1.0)),
                   step_sizes[0], step_sizes[1])
    g = np.where(prod < 0, 0.0, g)
    s["prev"], s["size"] = g, size
    return p - np.sign(g) * size
