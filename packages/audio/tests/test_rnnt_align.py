"""edit_distance, rnnt_loss/RNNTLoss, forced_align, merge_tokens against brute-force
enumerations of every path written here, and finite-difference gradients."""

import itertools
import math

import numpy as np
import pytest

import fiamma
import fiamma.audio.functional as AF
import fiamma.audio.transforms as AT
from fiamma.autograd import gradcheck

rng = np.random.default_rng(3)


def i32(a):
    return fiamma.tensor(np.asarray(a, np.int64)).to(fiamma.int32)


def test_edit_distance():
    assert AF.edit_distance("kitten", "sitting") == 3
    assert AF.edit_distance("", "abc") == 3
    assert AF.edit_distance("abc", "abc") == 0
    assert AF.edit_distance("the cat sat".split(), "the cat sat down".split()) == 1
    assert AF.edit_distance(fiamma.tensor([1, 2, 3]), fiamma.tensor([3, 2, 1])) == 2
    for _ in range(20):  # symmetric and bounded by the longer length
        a = rng.integers(0, 3, rng.integers(0, 7)).tolist()
        b = rng.integers(0, 3, rng.integers(0, 7)).tolist()
        d = AF.edit_distance(a, b)
        assert d == AF.edit_distance(b, a) and abs(len(a) - len(b)) <= d <= max(len(a), len(b))


# ----------------------------------------------------------------------------- RNN-T

def rnnt_brute(lp, y, T, U, blank):
    """-log of the sum over every monotonic lattice path (blank: t+1, label: u+1)."""
    total = -math.inf

    def walk(t, u, acc):
        nonlocal total
        if t == T - 1 and u == U:
            total = np.logaddexp(total, acc + lp[t, u, blank])
            return
        if u < U:
            walk(t, u + 1, acc + lp[t, u, y[u]])
        if t < T - 1:
            walk(t + 1, u, acc + lp[t, u, blank])

    walk(0, 0, 0.0)
    return -total


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


@pytest.mark.parametrize("blank", [-1, 0])
def test_rnnt_loss_brute_force(blank):
    B, Tm, Um, C = 3, 5, 3, 4
    x = rng.standard_normal((B, Tm, Um + 1, C))
    T = np.array([5, 3, 4])
    U = np.array([3, 1, 0])
    y = rng.integers(1, C - 1, (B, Um))  # neither 0 nor C-1: never the blank
    out = AF.rnnt_loss(fiamma.tensor(x), i32(y), i32(T), i32(U), blank=blank,
                       reduction="none").numpy()
    lp = log_softmax(x)
    bl = blank % C
    ref = [rnnt_brute(lp[b], y[b], T[b], U[b], bl) for b in range(B)]
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    mean = AF.rnnt_loss(fiamma.tensor(x), i32(y), i32(T), i32(U), blank=blank).item()
    assert abs(mean - np.mean(ref)) < 1e-12
    s = AT.RNNTLoss(blank=blank, reduction="sum")(fiamma.tensor(x).float(), i32(y), i32(T), i32(U))
    assert s.dtype == fiamma.float32 and abs(s.item() - np.sum(ref)) < 1e-4
    # not fused: the input is taken as log-probabilities
    nf = AF.rnnt_loss(fiamma.tensor(lp), i32(y), i32(T), i32(U), blank=blank,
                      reduction="none", fused_log_softmax=False).numpy()
    np.testing.assert_allclose(nf, ref, rtol=1e-12)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_rnnt_loss_gradcheck(fused, reduction):
    x = fiamma.tensor(rng.standard_normal((2, 3, 3, 3))).requires_grad_()
    if not fused:
        x = fiamma.tensor(log_softmax(rng.standard_normal((2, 3, 3, 3)))).requires_grad_()
    y, T, U = i32([[1, 0], [1, 1]]), i32([3, 2]), i32([2, 1])
    assert gradcheck(lambda v: AF.rnnt_loss(v, y, T, U, blank=2, reduction=reduction,
                                            fused_log_softmax=fused), (x,))


def test_rnnt_loss_grad_padding_and_clamp():
    x = fiamma.tensor(rng.standard_normal((2, 4, 3, 5)) * 3).requires_grad_()
    y, T, U = i32([[1, 2], [3, 0]]), i32([4, 2]), i32([2, 1])
    AF.rnnt_loss(x, y, T, U, reduction="sum").backward()
    g = x.grad.numpy()
    assert np.all(g[1, 2:] == 0) and np.all(g[1, :, 2:] == 0)  # padding gets no gradient
    np.testing.assert_allclose(g.sum(-1), 0, atol=1e-12)  # through log_softmax
    x2 = fiamma.tensor(x.detach().numpy()).requires_grad_()
    AF.rnnt_loss(x2, y, T, U, reduction="sum", clamp=0.05).backward()
    np.testing.assert_allclose(x2.grad.numpy(), np.clip(g, -0.05, 0.05), atol=1e-15)


def test_rnnt_loss_errors():
    x = fiamma.zeros(1, 3, 2, 4)
    with pytest.raises(ValueError, match="rnnt_loss.*max\\(logit_lengths\\)"):
        AF.rnnt_loss(x, i32([[1]]), i32([2]), i32([1]))
    with pytest.raises(ValueError, match="rnnt_loss.*target dim"):
        AF.rnnt_loss(x, i32([[1]]), i32([3]), i32([0]))
    with pytest.raises(ValueError, match="rnnt_loss.*reduction"):
        AF.rnnt_loss(x, i32([[1]]), i32([3]), i32([1]), reduction="max")
    with pytest.raises(TypeError, match="rnnt_loss.*targets"):
        AF.rnnt_loss(x, fiamma.tensor([[1.0]]), i32([3]), i32([1]))
    with pytest.raises(ValueError, match="rnnt_loss.*labels"):
        AF.rnnt_loss(x, i32([[7]]), i32([3]), i32([1]))


# ----------------------------------------------------------------------------- forced_align

def ctc_collapse(path, blank):
    out, prev = [], None
    for p in path:
        if p != blank and p != prev:
            out.append(p)
        prev = p
    return out


@pytest.mark.parametrize("target", [[1, 2], [1, 1], [2, 1, 2], [3]])
def test_forced_align_brute_force(target):
    T, C = 6, 4
    lp = log_softmax(rng.standard_normal((T, C)))
    best, best_path = -math.inf, None
    for path in itertools.product(range(C), repeat=T):
        if ctc_collapse(path, 0) == target:
            s = lp[np.arange(T), list(path)].sum()
            if s > best:
                best, best_path = s, path
    ali, scores = AF.forced_align(fiamma.tensor(lp[None]), fiamma.tensor([target]), blank=0)
    assert ali.shape == (1, T) and scores.shape == (1, T)
    assert ctc_collapse(ali[0].tolist(), 0) == target
    assert abs(scores.numpy().sum() - best) < 1e-12
    assert ali[0].tolist() == list(best_path)
    np.testing.assert_allclose(scores.numpy()[0], lp[np.arange(T), ali[0].tolist()])


def test_forced_align_lengths_and_errors():
    lp = fiamma.tensor(log_softmax(rng.standard_normal((1, 8, 5))))
    ali, sc = AF.forced_align(lp, fiamma.tensor([[1, 2, 3]]), fiamma.tensor([5]),
                              fiamma.tensor([2]))
    assert ali.shape == (1, 5) and ctc_collapse(ali[0].tolist(), 0) == [1, 2]
    with pytest.raises(ValueError, match="forced_align.*too few"):
        AF.forced_align(lp[:, :3], fiamma.tensor([[1, 1, 2]]))
    with pytest.raises(ValueError, match="forced_align.*batch size 1"):
        AF.forced_align(lp.expand(2, 8, 5), fiamma.tensor([[1], [2]]))
    with pytest.raises(ValueError, match="forced_align.*blank"):
        AF.forced_align(lp, fiamma.tensor([[0, 1]]))


def test_merge_tokens():
    tokens = fiamma.tensor([0, 0, 4, 4, 0, 2, 2, 2, 0, 2, 0])
    scores = fiamma.tensor([0.1 * i for i in range(11)])
    spans = AF.merge_tokens(tokens, scores)
    assert [(s.token, s.start, s.end) for s in spans] == [(4, 2, 4), (2, 5, 8), (2, 9, 10)]
    assert [len(s) for s in spans] == [2, 3, 1]
    assert abs(spans[1].score - 0.6) < 1e-6
    assert spans[0] == AF.TokenSpan(token=4, start=2, end=4, score=spans[0].score)
    assert [s.token for s in AF.merge_tokens(tokens, scores, blank=2)] == [0, 4, 0, 0, 0]


def test_forced_align_long():
    # more than 127 lattice states (the back-pointers are int8)
    T, C, L = 400, 30, 150
    lp = log_softmax(rng.standard_normal((T, C)) * 3)
    y = rng.integers(1, C, L)
    ali, sc = AF.forced_align(fiamma.tensor(lp[None]), fiamma.tensor(y[None]))
    assert ctc_collapse(ali[0].tolist(), 0) == y.tolist()
    np.testing.assert_allclose(sc.numpy()[0], lp[np.arange(T), ali[0].tolist()])
    # its score is the optimum of an independent Viterbi recursion over the CTC states
    S = 2 * L + 1
    ext = np.zeros(S, np.int64)
    ext[1::2] = y
    v = np.full(S, -np.inf)
    v[:2] = lp[0, ext[:2]]
    for t in range(1, T):
        s1 = np.concatenate([[-np.inf], v[:-1]])
        s2 = np.concatenate([[-np.inf, -np.inf], v[:-2]])
        s2[np.r_[False, False, (ext[2:] == 0) | (ext[2:] == ext[:-2])]] = -np.inf
        v = np.maximum(np.maximum(v, s1), s2) + lp[t, ext]
    assert abs(sc.numpy().sum() - max(v[-1], v[-2])) < 1e-9
