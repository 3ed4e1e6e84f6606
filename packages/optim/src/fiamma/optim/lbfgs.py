"""L-BFGS (``torch.optim.LBFGS``): limited-memory quasi-Newton steps with an optional
strong-Wolfe line search (cubic interpolation, Nocedal & Wright, Algorithms 3.5 and 3.6)."""

import math

import fiamma
from fiamma.optim.optimizer import Optimizer, _check_hyper

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to ``bounds``
    (default: the interval between the points); the midpoint when the cubic has none."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


class _Point:
    """A trial step length with its loss, flat gradient and directional derivative."""

    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Find a step ``t`` along ``d`` meeting the strong Wolfe conditions. ``evaluate(t)``
    returns (loss, flat gradient) at x + t d; at most ``max_ls`` evaluations after the first
    (none if ``max_ls`` <= 0: then the better of 0 and ``t``). Returns (loss, gradient, t,
    evaluations)."""
    d_norm = d.abs().max().item()
    start = _Point(0.0, f, g.clone(), gtd)
    prev = start
    f_new, g_new = evaluate(t)
    evals = 1
    cur = _Point(t, f_new, g_new, g_new.dot(d).item())
    it = 0
    bracket = None
    while it < max_ls:
        if cur.f > f + c1 * cur.t * gtd or (it > 1 and cur.f >= prev.f):
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        if abs(cur.gtd) <= -c2 * gtd:
            return cur.f, cur.g, cur.t, evals
        if cur.gtd >= 0:
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        # extrapolate: the cubic's minimiser, kept between 1.01 t and 10 t
        t_next = _cubic_min(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd,
                            bounds=(cur.t + 0.01 * (cur.t - prev.t), cur.t * 10))
        prev = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
        f_new, g_new = evaluate(t_next)
        evals += 1
        cur = _Point(t_next, f_new, g_new, g_new.dot(d).item())
        it += 1
    if bracket is None:  # ran out of iterations while extrapolating
        bracket = [start, cur]

    # zoom: shrink the bracket until a point meets the conditions
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stalled = False
    while it < max_ls:
        a, b = bracket
        if abs(b.t - a.t) * d_norm < tolerance_change:
            break
        t = _cubic_min(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        top, bottom = max(a.t, b.t), min(a.t, b.t)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:
            # too close to an end: move inside, unless the last step already was close
            if stalled or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = evaluate(t)
        evals += 1
        it += 1
        trial = _Point(t, f_new, g_new.clone(), g_new.dot(d).item())
        if trial.f > f + c1 * t * gtd or trial.f >= bracket[low].f:
            bracket[high] = trial
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(trial.gtd) <= -c2 * gtd:
                bracket[low] = trial
                break
            if trial.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = trial
    best = bracket[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """L-BFGS over all parameters as one flat vector. ``step(closure)`` needs a closure that
    zeroes the gradients, computes the loss, fills ``.grad`` and returns the loss; it runs up
    to ``max_iter`` iterations (``max_eval`` loss evaluations). ``line_search_fn`` is None
    (fixed step ``lr``) or ``'strong_wolfe'``. One parameter group only, as in PyTorch.

    >>> import fiamma
    >>> x = fiamma.tensor([3.0, -2.0], dtype=fiamma.float64)
    >>> opt = LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     x.grad = 2 * (x - 1.0)
    ...     return ((x - 1.0) ** 2).sum()
    >>> _ = opt.step(closure)
    >>> [round(v, 6) for v in x.tolist()]
    [1.0, 1.0]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        _check_hyper("LBFGS", lr=lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError("LBFGS: only 'strong_wolfe' is supported as line_search_fn, got "
                             f"{line_search_fn!r}")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the parameters as one flat vector ---------------------------------------------------

    def _flat_grad(self):
        # a sparse gradient (Embedding(sparse=True)) is used densely, as PyTorch's LBFGS; a
        # complex one as its real and imaginary parts (view_as_real)
        parts = []
        for p in self._params:
            g = p.grad
            if g is None:
                g = fiamma.zeros(p.numel(), dtype=p.dtype, device=p.device)
            elif g.is_sparse:
                g = g.to_dense()
            if g.is_complex():
                g = fiamma.view_as_real(g.reshape(-1))
            parts.append(g.reshape(-1))
        return fiamma.cat(parts, 0)

    def _add_to_params(self, scale, vec):
        off = 0
        for p in self._params:
            if p.is_complex():
                p = fiamma.view_as_real(p)
            n = p.numel()
            p.add_(vec[off:off + n].view_as(p), alpha=scale)
            off += n

    def _snapshot(self):
        return [p.clone() for p in self._params]

    def _restore(self, saved):
        for p, s in zip(self._params, saved):
            p.copy_(s)

    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss of the first closure
        call."""
        if closure is None:
            raise RuntimeError("LBFGS.step: a closure that recomputes the loss is required")
        with fiamma.no_grad():
            return self._step(closure)

    def _evaluate(self, closure):
        with fiamma.enable_grad():
            loss = closure()
        return float(loss)

    def _step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history, line_search = group["history_size"], group["line_search_fn"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with fiamma.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().max().item() <= tol_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_y, old_s, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_y, old_s, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_grad
                s = d * t
                ys = y.dot(s).item()
                if ys > 1e-10:  # keep the pair only if it keeps the Hessian estimate positive
                    if len(old_y) == history:
                        old_y.pop(0)
                        old_s.pop(0)
                        ro.pop(0)
                    old_y.append(y)
                    old_s.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y).item()
                # two-loop recursion: d = -H g
                alpha = [0.0] * len(old_y)
                q = flat_grad.neg()
                for i in range(len(old_y) - 1, -1, -1):
                    alpha[i] = old_s[i].dot(q).item() * ro[i]
                    q.add_(old_y[i], alpha=-alpha[i])
                d = q * h_diag
                for i in range(len(old_y)):
                    beta = old_y[i].dot(d).item() * ro[i]
                    d.add_(old_s[i], alpha=alpha[i] - beta)
            prev_grad = flat_grad.clone()
            prev_loss = loss

            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d).item()
            if gtd > -tol_change:  # not a descent direction
                break

            ls_evals = 0
            if line_search is not None:
                start = self._snapshot()

                def evaluate(step, start=start, d=d):
                    self._add_to_params(step, d)
                    f = self._evaluate(closure)
                    g = self._flat_grad()
                    self._restore(start)
                    return f, g

                # the search may spend only what is left of max_eval (as PyTorch does): with
                # max_eval=1 it evaluates t once and keeps the better of 0 and t
                loss, flat_grad, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, flat_grad,
                                                             gtd, max_ls=max_eval - evals)
                self._add_to_params(t, d)
                converged = flat_grad.abs().max().item() <= tol_grad
            else:
                self._add_to_params(t, d)
                converged = False
                if n_iter != max_iter:
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad()
                    converged = flat_grad.abs().max().item() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or evals >= max_eval or converged:
                break
            if (d * t).abs().max().item() <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break

        state.update(d=d, t=t, old_dirs=old_y, old_stps=old_s, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_grad, prev_loss=prev_loss)
        return orig_loss
