"""Connectionist temporal classification loss (``torch.nn.functional.ctc_loss``).

The forward runs the log-space alpha recursion over time, vectorised over the batch and the
extended label positions (blank, l1, blank, l2, ..., blank); the backward runs the beta
recursion and turns the alpha-beta occupancies into the gradient with one scatter. Both are
loops of plain core ops inside a ``fiamma.autograd.Function`` (no graph of T steps is built).
"""

import fiamma

__all__ = ["ctc_loss"]

_NEG_INF = float("-inf")
_CTC = None


def _ctc_function():
    """The autograd Function, built on first use (importing fiamma.nn stays free of
    fiamma.autograd until gradients are needed)."""
    global _CTC
    if _CTC is None:
        from fiamma.autograd import Function, once_differentiable
        _CTC = type("_CTC", (Function,), {
            "__doc__": _CTCMethods.__doc__,
            "forward": staticmethod(_CTCMethods.forward),
            "backward": staticmethod(once_differentiable(_CTCMethods.backward)),
        })
    return _CTC


class _CTCMethods:
    """Per-sequence negative log likelihood from (T, N, C) log-probabilities.

    alpha lives in a (T, N, S' + 2) buffer with two -inf columns in front, so the three
    predecessors of every position are one sliding-window view (``unfold``); a -inf bias
    on the window forbids the skip where the label repeats (or is blank). Values past a
    sequence's input length are computed but never read: the readout takes alpha at
    ``T_n - 1``, and beta is -inf there."""

    @staticmethod
    def forward(ctx, log_probs, ext, skip, in_len, tgt_len, zero_infinity):
        t_max, n, _ = log_probs.shape
        sp = ext.shape[1]
        dt = log_probs.dtype
        lp_ext = log_probs.gather(2, ext.unsqueeze(0).expand(t_max, n, sp))
        buf = fiamma.full((t_max, n, sp + 2), _NEG_INF, dtype=dt)
        buf[0, :, 2:4] = lp_ext[0, :, :2]
        bias = fiamma.zeros((n, sp, 3), dtype=dt)
        bias[:, :, 0] = fiamma.zeros((n, sp), dtype=dt).masked_fill(~skip, _NEG_INF)
        for t in range(1, t_max):
            win = buf[t - 1].unfold(1, 3, 1)
            buf[t, :, 2:] = (win + bias).logsumexp(2) + lp_ext[t]
        alphas = buf[:, :, 2:]
        last_t = (in_len - 1).clamp(min=0)
        final = alphas[last_t, fiamma.arange(n)]  # (N, S'): alpha at each T_n - 1
        end = (2 * tgt_len).unsqueeze(1)
        last = final.gather(1, end).squeeze(1)
        before = final.gather(1, (end - 1).clamp(min=0)).squeeze(1)
        before = before.masked_fill(tgt_len == 0, _NEG_INF)
        nll = -fiamma.logaddexp(last, before)
        nll = nll.masked_fill(in_len == 0, float("inf"))
        infinite = nll == float("inf")
        if zero_infinity:
            nll = nll.masked_fill(infinite, 0.0)
        ctx.save_for_backward(log_probs, alphas, lp_ext, nll)
        ctx.meta = (ext, skip, in_len, tgt_len, zero_infinity, infinite)
        return nll

    @staticmethod
    def backward(ctx, grad):
        log_probs, alphas, lp_ext, nll = ctx.saved_tensors
        ext, skip, in_len, tgt_len, zero_infinity, infinite = ctx.meta
        t_max, n, sp = lp_ext.shape
        dt = lp_ext.dtype
        pos = fiamma.arange(sp).unsqueeze(0)
        end = (2 * tgt_len).unsqueeze(1)
        finals = (pos == end) | ((pos == end - 1) & (end > 0))
        init = lp_ext.masked_fill(~finals.unsqueeze(0), _NEG_INF)
        starts = fiamma.arange(t_max).reshape(t_max, 1, 1) == (in_len - 1).reshape(1, n, 1)
        # the window of position s is (s, s + 1, s + 2); s + 2 is reachable when skip[s + 2]
        bias = fiamma.zeros((n, sp, 3), dtype=dt)
        if sp > 2:
            bias[:, :sp - 2, 2] = fiamma.zeros((n, sp - 2), dtype=dt).masked_fill(
                ~skip[:, 2:], _NEG_INF)
        bias[:, sp - 2:, 2] = _NEG_INF
        buf = fiamma.full((t_max + 1, n, sp + 2), _NEG_INF, dtype=dt)
        for t in range(t_max - 1, -1, -1):
            rec = (buf[t + 1].unfold(1, 3, 1) + bias).logsumexp(2) + lp_ext[t]
            buf[t, :, :sp] = fiamma.where(starts[t], init[t], rec)
        log_occ = alphas + buf[:t_max, :, :sp] - lp_ext + nll.unsqueeze(1)
        occ = log_occ.exp() * (-grad.unsqueeze(1))
        g = fiamma.zeros(log_probs.shape, dtype=dt).scatter_add(
            2, ext.unsqueeze(0).expand(t_max, n, sp), occ)
        if zero_infinity:
            g = g.masked_fill(infinite.unsqueeze(0).unsqueeze(2), 0.0)
        return g, None, None, None, None, None


def _lengths(x, n, name):
    if isinstance(x, fiamma.Tensor):
        x = x.reshape(-1).long()
    else:
        x = fiamma.tensor(list(x), dtype=fiamma.int64).reshape(-1)
    if x.shape[0] != n:
        raise RuntimeError(f"ctc_loss: expected {name} to have size {n} (the batch size), got "
                           f"{x.shape[0]}")
    return x


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """CTC loss of (T, N, C) (or unbatched (T, C)) log-probabilities (``log_softmax``
    output) against targets given padded ``(N, S)`` or concatenated 1-D. ``reduction='mean'``
    divides each loss by its target length, then averages; ``zero_infinity`` turns the
    infinite losses of impossible alignments (and their gradients) into zeros.

    The gradient is the exact derivative with respect to ``log_probs``; for log-probabilities
    from ``log_softmax`` (the documented use) the gradient reaching the logits equals
    PyTorch's.

    >>> lp = fiamma.randn(6, 2, 4).log_softmax(2)
    >>> tg = fiamma.tensor([[1, 2], [3, 3]])
    >>> ctc_loss(lp, tg, [6, 5], [2, 2]).shape
    fiamma.Size([])
    """
    op = "ctc_loss"
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.reshape(1, -1)
        input_lengths = [int(input_lengths)] if not isinstance(input_lengths, fiamma.Tensor) \
            else input_lengths.reshape(1)
        target_lengths = [int(target_lengths)] if not isinstance(target_lengths, fiamma.Tensor) \
            else target_lengths.reshape(1)
    if log_probs.dim() != 3:
        raise RuntimeError(f"{op}: expected log_probs of shape (T, N, C) or (T, C), got "
                           f"{list(log_probs.shape)}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction")
    t_max, n, c = log_probs.shape
    if not 0 <= blank < c:
        raise RuntimeError(f"{op}: blank must be in label range [0, {c}), got {blank}")
    in_len = _lengths(input_lengths, n, "input_lengths")
    tgt_len = _lengths(target_lengths, n, "target_lengths")
    if n and (bool((in_len < 0).any()) or bool((in_len > t_max).any())):
        raise RuntimeError(f"{op}: input_lengths must be in [0, {t_max}] (the input length), "
                           f"got {in_len.tolist()}")
    if n and bool((tgt_len < 0).any()):
        raise RuntimeError(f"{op}: target_lengths must be >= 0, got {tgt_len.tolist()}")
    targets = targets.long()
    s = int(tgt_len.max().item()) if n else 0
    if targets.dim() == 1:  # concatenated
        total = int(tgt_len.sum().item())
        if targets.shape[0] < total:
            raise RuntimeError(f"{op}: concatenated targets hold {targets.shape[0]} labels, "
                               f"target_lengths sum to {total}")
        starts = tgt_len.cumsum(0) - tgt_len
        idx = (starts.unsqueeze(1) + fiamma.arange(s).unsqueeze(0)).clamp(
            max=max(targets.shape[0] - 1, 0))
        padded = targets[idx] if targets.numel() else fiamma.zeros((n, s), dtype=fiamma.int64)
    elif targets.dim() == 2:
        if targets.shape[0] != n:
            raise RuntimeError(f"{op}: targets have batch size {targets.shape[0]}, log_probs "
                               f"{n}")
        if s > targets.shape[1]:
            raise RuntimeError(f"{op}: target_lengths up to {s} exceed the padded targets' "
                               f"length {targets.shape[1]}")
        padded = targets[:, :s]
    else:
        raise RuntimeError(f"{op}: targets must be 1-D (concatenated) or 2-D (padded), got "
                           f"{targets.dim()}-D")
    within = fiamma.arange(s).unsqueeze(0) < tgt_len.unsqueeze(1)
    padded = fiamma.where(within, padded, fiamma.full_like(padded, blank))
    if padded.numel() and bool(((padded < 0) | (padded >= c)).any()):
        bad = padded[(padded < 0) | (padded >= c)][0].item()
        raise IndexError(f"{op}: target label {bad} out of range [0, {c})")
    sp = 2 * s + 1
    ext = fiamma.full((n, sp), blank, dtype=fiamma.int64)
    if s:
        ext[:, 1::2] = padded
    skip = fiamma.zeros((n, sp), dtype=fiamma.bool)
    if s > 1:
        skip[:, 3::2] = padded[:, 1:] != padded[:, :-1]
    nll = _ctc_function().apply(log_probs, ext, skip, in_len, tgt_len, bool(zero_infinity))
    if reduction == "none":
        return nll.reshape(()) if unbatched else nll
    if reduction == "sum":
        return nll.sum()
    return (nll / tgt_len.clamp(min=1).to(nll.dtype)).mean()
