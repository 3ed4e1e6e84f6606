"""Beam search for RNN transducers (Graves, 2012), with torchaudio.models.RNNTBeamSearch's
signatures and ``Hypothesis`` layout: (tokens, predictor output, predictor state, score).

Per encoder frame the search keeps two sets: ``A`` (hypotheses still expanding at this frame)
and ``B`` (hypotheses that emitted blank, i.e. are done with the frame). Each round, every
``A`` hypothesis goes to ``B`` with its blank score added (log-add-exp-merged with a ``B``
entry of the same tokens), and the best ``beam_width`` non-blank extensions that beat the
``beam_width``-th best ``B`` score become the next ``A``. After the frame ``B`` is cut to the
``beam_width`` best by ``hypo_sort_key`` (default: score / (tokens + 1)), best first."""

import math
from typing import Callable, Dict, List, Optional, Tuple

import fiamma
from fiamma import nn

__all__ = ["Hypothesis", "RNNTBeamSearch"]

Hypothesis = Tuple[List[int], fiamma.Tensor, List[List[fiamma.Tensor]], float]
Hypothesis.__doc__ = """An RNN-T beam search hypothesis: a tuple of (tokens, prediction network
output, prediction network state, score)."""


def _key(hypo) -> str:
    return str(hypo[0])


def _default_hypo_sort_key(hypo) -> float:
    return hypo[3] / (len(hypo[0]) + 1)


def _batch_state(hypos):
    first = hypos[0][2]
    return [[fiamma.cat([h[2][i][j] for h in hypos]) for j in range(len(first[i]))]
            for i in range(len(first))]


def _slice_state(states, idx):
    return [[s[idx:idx + 1] for s in layer] for layer in states]


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf and b == -math.inf:
        return -math.inf
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


class RNNTBeamSearch(nn.Module):
    """Beam search decoder for an :class:`~fiamma.audio.models.RNNT`.

    Args:
        model: the RNNT.
        blank: index of the blank symbol.
        temperature: the joiner's logits are divided by it before the log-softmax (1.0).
        hypo_sort_key: score used to rank final hypotheses (default: score / (len + 1)).
        step_max_tokens: most non-blank symbols emitted per frame (100).

    ``forward(input, length, beam_width)``: features (T, D) or (1, T, D) and length () or (1,)
    -> list of up to ``beam_width`` hypotheses, best first. ``infer(input, length, beam_width,
    state=None, hypothesis=None)`` does one streaming step and returns (hypotheses, state).
    """

    def __init__(self, model, blank: int, temperature: float = 1.0,
                 hypo_sort_key: Optional[Callable[[Hypothesis], float]] = None,
                 step_max_tokens: int = 100) -> None:
        super().__init__()
        self.model = model
        self.blank = blank
        self.temperature = temperature
        self.hypo_sort_key = _default_hypo_sort_key if hypo_sort_key is None else hypo_sort_key
        self.step_max_tokens = step_max_tokens

    def _init_b_hypos(self, device) -> List[Hypothesis]:
        tokens = fiamma.tensor([[self.blank]], device=device)
        out, _, state = self.model.predict(tokens, fiamma.tensor([1], device=device), None)
        return [([self.blank], out[0].detach(), state, 0.0)]

    def _gen_next_token_probs(self, enc_out, hypos, device):
        pred = fiamma.stack([h[1] for h in hypos], dim=0)
        joint, _, _ = self.model.join(enc_out, fiamma.tensor([1], device=device), pred,
                                      fiamma.tensor([1] * len(hypos), device=device))
        return nn.functional.log_softmax(joint / self.temperature, dim=3)[:, 0, 0]

    def _gen_b_hypos(self, b_hypos, a_hypos, probs, key_to_b_hypo):
        for i, h in enumerate(a_hypos):
            score = h[3] + float(probs[i, -1])
            old = key_to_b_hypo.get(_key(h))
            if old is not None:
                for j, e in enumerate(b_hypos):
                    if _key(e) == _key(old):
                        del b_hypos[j]
                        break
                score = _logaddexp(old[3], score)
            new = (h[0], h[1], h[2], score)
            b_hypos.append(new)
            key_to_b_hypo[_key(new)] = new
        return sorted(b_hypos, key=lambda e: e[3])

    def _gen_a_hypos(self, a_hypos, b_hypos, probs, t, beam_width, device):
        n_tok = probs.shape[1] - 1
        scores = fiamma.tensor([h[3] for h in a_hypos], dtype=probs.dtype).unsqueeze(1) \
            + probs[:, :-1]
        k = min(beam_width, scores.numel())
        best, flat = scores.reshape(-1).topk(k)
        floor = b_hypos[-beam_width][3] if len(b_hypos) >= beam_width else -math.inf
        base, tokens, new_scores = [], [], []
        for s, idx in zip(best.tolist(), flat.tolist()):
            if s > floor:
                base.append(a_hypos[idx // n_tok])
                tokens.append(idx % n_tok)
                new_scores.append(s)
        return self._gen_new_hypos(base, tokens, new_scores, t, device) if base else []

    def _gen_new_hypos(self, base_hypos, tokens, scores, t, device):
        out, _, states = self.model.predict(
            fiamma.tensor([[tok] for tok in tokens], device=device),
            fiamma.tensor([1] * len(base_hypos), device=device), _batch_state(base_hypos))
        return [(h[0] + [tokens[i]], out[i].detach(), _slice_state(states, i), scores[i])
                for i, h in enumerate(base_hypos)]

    def _search(self, enc_out, hypo, beam_width) -> List[Hypothesis]:
        device = enc_out.device
        b_hypos = self._init_b_hypos(device) if hypo is None else hypo
        for t in range(enc_out.shape[1]):
            a_hypos, b_hypos = b_hypos, []
            key_to_b_hypo: Dict[str, Hypothesis] = {}
            emitted = 0
            while a_hypos:
                probs = self._gen_next_token_probs(enc_out[:, t:t + 1], a_hypos, device).cpu()
                b_hypos = self._gen_b_hypos(b_hypos, a_hypos, probs, key_to_b_hypo)
                if emitted == self.step_max_tokens:
                    break
                a_hypos = self._gen_a_hypos(a_hypos, b_hypos, probs, t, beam_width, device)
                if a_hypos:
                    emitted += 1
            order = sorted(range(len(b_hypos)), key=lambda i: self.hypo_sort_key(b_hypos[i]),
                           reverse=True)
            b_hypos = [b_hypos[i] for i in order[:beam_width]]
        return b_hypos

    @staticmethod
    def _prepare(input, length):
        if not (input.dim() == 2 or (input.dim() == 3 and input.shape[0] == 1)):
            raise ValueError("RNNTBeamSearch: input must be of shape (T, D) or (1, T, D), got "
                             f"{tuple(input.shape)}")
        if tuple(length.shape) not in ((), (1,)):
            raise ValueError("RNNTBeamSearch: length must be of shape () or (1,), got "
                             f"{tuple(length.shape)}")
        return (input.unsqueeze(0) if input.dim() == 2 else input,
                length.unsqueeze(0) if length.dim() == 0 else length)

    def forward(self, input, length, beam_width: int) -> List[Hypothesis]:
        if beam_width < 1:
            raise ValueError(f"RNNTBeamSearch: beam_width must be at least 1, got {beam_width}")
        input, length = self._prepare(input, length)
        enc_out, _ = self.model.transcribe(input, length)
        return self._search(enc_out, None, beam_width)

    def infer(self, input, length, beam_width: int,
              state: Optional[List[List[fiamma.Tensor]]] = None,
              hypothesis: Optional[List[Hypothesis]] = None
              ) -> Tuple[List[Hypothesis], List[List[fiamma.Tensor]]]:
        if beam_width < 1:
            raise ValueError(f"RNNTBeamSearch: beam_width must be at least 1, got {beam_width}")
        input, length = self._prepare(input, length)
        enc_out, _, state = self.model.transcribe_streaming(input, length, state)
        return self._search(enc_out, hypothesis, beam_width), state
