"""Sequence losses and alignment (torchaudio.functional): edit_distance, rnnt_loss, forced_align,
merge_tokens, TokenSpan."""

from dataclasses import dataclass

import numpy as np

import fiamma
from fiamma.autograd import Function

__all__ = ["edit_distance", "rnnt_loss", "forced_align", "merge_tokens", "TokenSpan"]


def edit_distance(seq1, seq2):
    """Levenshtein distance between two sequences (strings, lists of words or tokens, 1-D
    tensors): the least number of insertions, deletions and substitutions turning one into the
    other.

    >>> edit_distance("kitten", "sitting")
    3
    >>> edit_distance(["a", "b", "c"], ["a", "c"])
    1
    """
    a = seq1.tolist() if isinstance(seq1, fiamma.Tensor) else list(seq1)
    b = seq2.tolist() if isinstance(seq2, fiamma.Tensor) else list(seq2)
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


# ------------------------------------------------------------------------------- RNN-T loss

_NEG = -np.inf


def _lse(a, b):
    return np.logaddexp(a, b)


def _rnnt_np(lp, y, T, U, blank):
    """Forward-backward of the RNN-T lattice in log space, vectorised over the batch and the
    anti-diagonals t + u. lp (B, Tm, Um+1, C) log-probs (float64), y (B, Um) labels, T/U (B,)
    lengths. Returns the losses (B,), alpha and beta (B, Tm, Um+1)."""
    B, Tm, U1, _ = lp.shape
    Um = U1 - 1
    bi = np.arange(B)[:, None]
    lp_blank = lp[..., blank]  # (B, Tm, U1)
    yi = np.zeros((B, U1), np.int64)
    yi[:, :Um] = y
    lp_emit = np.take_along_axis(lp, yi[:, None, :, None], axis=3)[..., 0]  # (B, Tm, U1)
    tt = np.arange(Tm)[None, :, None]
    uu = np.arange(U1)[None, None, :]
    valid = (tt < T[:, None, None]) & (uu <= U[:, None, None])
    alpha = np.full((B, Tm, U1), _NEG)
    alpha[:, 0, 0] = 0.0
    for n in range(1, Tm + Um):
        t = np.arange(max(0, n - Um), min(n, Tm - 1) + 1)
        u = n - t
        a_stay = np.where(t > 0, alpha[:, np.maximum(t - 1, 0), u]
                          + lp_blank[:, np.maximum(t - 1, 0), u], _NEG)
        a_emit = np.where(u > 0, alpha[:, t, np.maximum(u - 1, 0)]
                          + lp_emit[:, t, np.maximum(u - 1, 0)], _NEG)
        alpha[:, t, u] = np.where(valid[:, t, u], _lse(a_stay, a_emit), _NEG)
    beta = np.full((B, Tm, U1), _NEG)
    b_ = np.arange(B)
    beta[b_, T - 1, U] = lp_blank[b_, T - 1, U]
    for n in range(Tm + Um - 2, -1, -1):
        t = np.arange(max(0, n - Um), min(n, Tm - 1) + 1)
        u = n - t
        b_stay = np.where(t + 1 < Tm, beta[:, np.minimum(t + 1, Tm - 1), u], _NEG) \
            + lp_blank[:, t, u]
        b_emit = np.where(u + 1 <= Um, beta[:, t, np.minimum(u + 1, Um)], _NEG) + lp_emit[:, t, u]
        end = (t[None] == (T - 1)[:, None]) & (u[None] == U[:, None])
        val = np.where(end, lp_blank[:, t, u], _lse(b_stay, b_emit))
        beta[:, t, u] = np.where(valid[:, t, u], val, _NEG)
    del bi
    return -beta[:, 0, 0], alpha, beta, lp_blank, lp_emit, valid


def _rnnt_grad_lp(lp, y, T, U, blank, alpha, beta, lp_blank, lp_emit, valid, loss):
    """d loss_b / d log-prob (B, Tm, U1, C), and the occupancy of each lattice node."""
    B, Tm, U1, C = lp.shape
    Um = U1 - 1
    logZ = -loss[:, None, None]
    beta_next_t = np.full_like(beta, _NEG)
    beta_next_t[:, :-1] = beta[:, 1:]
    b_ = np.arange(B)
    beta_next_t[b_, T - 1, U] = 0.0  # the final blank leaves the lattice
    beta_next_u = np.full_like(beta, _NEG)
    beta_next_u[:, :, :-1] = beta[:, :, 1:]
    with np.errstate(invalid="ignore"):
        g_blank = -np.exp(alpha + beta_next_t + lp_blank - logZ)
        g_emit = -np.exp(alpha + beta_next_u + lp_emit - logZ)
        occ = np.exp(alpha + beta - logZ)
    g_blank = np.where(valid & np.isfinite(g_blank), g_blank, 0.0)
    g_emit = np.where(valid & np.isfinite(g_emit), g_emit, 0.0)
    occ = np.where(valid & np.isfinite(occ), occ, 0.0)
    grad = np.zeros((B, Tm, U1, C))
    grad[..., blank] += g_blank
    yi = np.zeros((B, U1), np.int64)
    yi[:, :Um] = y
    bi, ti, ui = np.meshgrid(np.arange(B), np.arange(Tm), np.arange(U1), indexing="ij")
    np.add.at(grad, (bi, ti, ui, np.broadcast_to(yi[:, None, :], (B, Tm, U1))), g_emit)
    return grad, occ


class _RNNTLoss(Function):
    @staticmethod
    def forward(ctx, logits, targets, logit_lengths, target_lengths, blank, clamp, fused):
        x = logits.detach().numpy().astype(np.float64)
        if fused:
            m = x.max(-1, keepdims=True)
            lse = m + np.log(np.exp(x - m).sum(-1, keepdims=True))
            lp = x - lse
        else:
            lp = x
        y = targets.detach().numpy().astype(np.int64)
        T = logit_lengths.detach().numpy().astype(np.int64)
        U = target_lengths.detach().numpy().astype(np.int64)
        loss, alpha, beta, lpb, lpe, valid = _rnnt_np(lp, y, T, U, blank)
        g, occ = _rnnt_grad_lp(lp, y, T, U, blank, alpha, beta, lpb, lpe, valid, loss)
        if fused:  # through the log-softmax: g - softmax * sum_k g = g + softmax * occupancy
            g = g + np.exp(lp) * occ[..., None]
        if clamp > 0:
            g = np.clip(g, -clamp, clamp)
        ctx.grad = g
        ctx.dtype = logits.dtype
        return fiamma.from_numpy(loss).to(logits.dtype)

    @staticmethod
    def backward(ctx, gout):
        g = fiamma.from_numpy(ctx.grad).to(ctx.dtype)
        return g * gout.reshape(-1, 1, 1, 1), None, None, None, None, None, None


def rnnt_loss(logits, targets, logit_lengths, target_lengths, blank=-1, clamp=-1,
              reduction="mean", fused_log_softmax=True):
    """RNN-Transducer loss (Graves 2012) of ``logits`` (batch, T, U+1, classes) for ``targets``
    (batch, U) int labels, with per-example ``logit_lengths`` (batch,) and ``target_lengths``
    (batch,); ``T``/``U`` must be their maxima. ``blank`` is the blank index (-1: the last
    class). Computed by the forward-backward recursions in log space (float64), vectorised over
    the batch and the lattice's anti-diagonals. The gradient w.r.t. ``logits`` is computed with
    the loss; ``clamp > 0`` clips it to [-clamp, clamp]. ``fused_log_softmax=False``: the logits
    are already log-probabilities (the gradient is then w.r.t. them). ``reduction``: "none"
    (per-example losses), "mean" (over the batch) or "sum".

    >>> logits = fiamma.zeros(1, 2, 2, 3)   # uniform over 3 classes
    >>> round(rnnt_loss(logits, fiamma.tensor([[0]], dtype=fiamma.int32),
    ...                 fiamma.tensor([2], dtype=fiamma.int32),
    ...                 fiamma.tensor([1], dtype=fiamma.int32)).item(), 4)  # -log(2 / 27)
    2.6027
    """
    op = "fiamma.audio.functional.rnnt_loss"
    if not isinstance(logits, fiamma.Tensor) or logits.dim() != 4:
        raise ValueError(f"{op}: logits must be a 4-D tensor (batch, T, U+1, classes), got "
                         f"{getattr(logits, 'shape', type(logits).__name__)}")
    if logits.dtype not in (fiamma.float32, fiamma.float64, fiamma.float16):
        raise TypeError(f"{op}: logits must be float32, float64 or float16, got {logits.dtype}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    B, Tm, U1, C = logits.shape
    for name, v in (("targets", targets), ("logit_lengths", logit_lengths),
                    ("target_lengths", target_lengths)):
        if not isinstance(v, fiamma.Tensor) or v.dtype not in (fiamma.int32, fiamma.int64):
            raise TypeError(f"{op}: {name} must be an int32 tensor, got "
                            f"{getattr(v, 'dtype', type(v).__name__)}")
    if tuple(targets.shape) != (B, U1 - 1):
        raise ValueError(f"{op}: targets must be (batch, U) = {(B, U1 - 1)}, got "
                         f"{tuple(targets.shape)}")
    if tuple(logit_lengths.shape) != (B,) or tuple(target_lengths.shape) != (B,):
        raise ValueError(f"{op}: logit_lengths and target_lengths must be ({B},), got "
                         f"{tuple(logit_lengths.shape)} and {tuple(target_lengths.shape)}")
    T = logit_lengths.numpy()
    U = target_lengths.numpy()
    if B and (T.max() != Tm or T.min() < 1):
        raise ValueError(f"{op}: logits' time dim {Tm} must equal max(logit_lengths) "
                         f"{T.max()} (and every length be >= 1)")
    if B and (U.max() + 1 != U1 or U.min() < 0):
        raise ValueError(f"{op}: logits' target dim {U1} must equal max(target_lengths) + 1 = "
                         f"{U.max() + 1}")
    blank_i = blank + C if blank < 0 else blank
    if not 0 <= blank_i < C:
        raise ValueError(f"{op}: blank {blank} out of range for {C} classes")
    y = targets.numpy()
    if y.size and (y.min() < 0 or y.max() >= C):
        raise ValueError(f"{op}: target labels must be in [0, {C}), got [{y.min()}, {y.max()}]")
    losses = _RNNTLoss.apply(logits, targets, logit_lengths, target_lengths, blank_i,
                             float(clamp), bool(fused_log_softmax))
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    return losses


# ------------------------------------------------------------------------------- forced_align

def forced_align(log_probs, targets, input_lengths=None, target_lengths=None, blank=0):
    """CTC forced alignment (Viterbi): the most likely frame-level path of ``log_probs``
    (1, T, classes) through ``targets`` (1, L). Returns ``(alignments, scores)``, both (1, T):
    the label of every frame (``blank`` between tokens) and its log-probability on that path.
    Batch size 1 only (as torchaudio). Raises if T is too short for the targets (L plus the
    repeats that need a blank in between)."""
    op = "fiamma.audio.functional.forced_align"
    if log_probs.dim() != 3 or targets.dim() != 2:
        raise ValueError(f"{op}: expected log_probs (1, T, C) and targets (1, L), got "
                         f"{tuple(log_probs.shape)} and {tuple(targets.shape)}")
    if log_probs.shape[0] != 1 or targets.shape[0] != 1:
        raise ValueError(f"{op}: only batch size 1 is supported, got {log_probs.shape[0]} and "
                         f"{targets.shape[0]}")
    if not log_probs.is_floating_point():
        raise TypeError(f"{op}: log_probs must be floating point, got {log_probs.dtype}")
    if targets.is_floating_point():
        raise TypeError(f"{op}: targets must be an integer tensor, got {targets.dtype}")
    T = int(input_lengths[0]) if input_lengths is not None else log_probs.shape[1]
    L = int(target_lengths[0]) if target_lengths is not None else targets.shape[1]
    C = log_probs.shape[2]
    if not 0 <= blank < C:
        raise ValueError(f"{op}: blank {blank} out of range for {C} classes")
    lp = log_probs[0, :T].detach().numpy().astype(np.float64)
    y = targets[0, :L].numpy().astype(np.int64)
    if (y == blank).any():
        raise ValueError(f"{op}: targets must not contain the blank index {blank}")
    if y.size and (y.min() < 0 or y.max() >= C):
        raise ValueError(f"{op}: target labels must be in [0, {C}), got [{y.min()}, {y.max()}]")
    repeats = int((y[1:] == y[:-1]).sum())
    if T < L + repeats:
        raise ValueError(f"{op}: {T} frames are too few for {L} targets with {repeats} repeats "
                         f"(need {L + repeats})")
    S = 2 * L + 1
    ext = np.full(S, blank, np.int64)
    ext[1::2] = y
    skip = np.zeros(S, bool)
    skip[3::2] = y[1:] != y[:-1]
    score = np.full(S, -np.inf)
    score[0] = lp[0, blank]
    if S > 1:
        score[1] = lp[0, ext[1]]
    back = np.zeros((T, S), np.int8)  # 0 stay, 1 from s-1, 2 from s-2
    for t in range(1, T):
        s1 = np.concatenate([[-np.inf], score[:-1]])
        s2 = np.where(skip, np.concatenate([[-np.inf, -np.inf], score[:-2]]), -np.inf)
        cand = np.stack([score, s1, s2])
        k = np.argmax(cand, axis=0)
        back[t] = k
        score = cand[k, np.arange(S)] + lp[t, ext]
    end = S - 1 if S == 1 or score[S - 1] >= score[S - 2] else S - 2
    path = np.empty(T, np.int64)
    s = end
    for t in range(T - 1, -1, -1):
        path[t] = s
        s -= int(back[t, s])
    labels = ext[path]
    frame_scores = lp[np.arange(T), labels]
    ali = fiamma.from_numpy(labels).to(targets.dtype).reshape(1, T)
    return ali, fiamma.from_numpy(frame_scores).to(log_probs.dtype).reshape(1, T)


@dataclass
class TokenSpan:
    """A token's span of frames: ``token``, ``start`` (inclusive), ``end`` (exclusive) and
    ``score`` (mean frame score); ``len(span)`` is its number of frames."""

    token: int
    start: int
    end: int
    score: float

    def __len__(self):
        return self.end - self.start


def merge_tokens(tokens, scores, blank=0):
    """Runs of the same non-blank token in a frame-level alignment ``tokens`` (T,) as a list of
    ``TokenSpan``, each scored with the mean of ``scores`` (T,) over its frames (e.g. the
    exponentiated scores of ``forced_align``).

    >>> [(s.token, s.start, s.end) for s in merge_tokens(fiamma.tensor([0, 3, 3, 0, 3, 5]),
    ...                                                     fiamma.ones(6))]
    [(3, 1, 3), (3, 4, 5), (5, 5, 6)]
    """
    if tokens.dim() != 1 or scores.dim() != 1 or tokens.shape[0] != scores.shape[0]:
        raise ValueError("fiamma.audio.functional.merge_tokens: expected 1-D tokens and scores "
                         f"of one length, got {tuple(tokens.shape)} and {tuple(scores.shape)}")
    tok = tokens.tolist()
    sc = scores.detach().double().numpy()
    spans = []
    start = 0
    for i in range(1, len(tok) + 1):
        if i == len(tok) or tok[i] != tok[start]:
            if tok[start] != blank:
                spans.append(TokenSpan(tok[start], start, i, float(sc[start:i].mean())))
            start = i
    return spans
