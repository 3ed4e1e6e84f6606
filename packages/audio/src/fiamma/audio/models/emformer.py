"""Emformer (Shi et al., 2021): a streaming transformer that splits the utterance into segments,
lets each segment see a limited left context, a look-ahead (right context) block and an
optional bank of memory vectors summarising earlier segments. Module and parameter names,
the ``forward``/``infer`` signatures and the per-layer streaming state
(``[memory, left-context keys, left-context values, past length]``) follow
torchaudio.models.Emformer, so its checkpoints load by key."""

import math
from typing import List, Optional, Tuple

import numpy as np

import fiamma
from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["Emformer"]


def _lengths_to_padding_mask(lengths):
    steps = fiamma.arange(int(lengths.max().item()), device=lengths.device, dtype=lengths.dtype)
    return steps.unsqueeze(0) >= lengths.unsqueeze(1)


def _activation(name):
    table = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}
    if name not in table:
        raise ValueError(f"Unsupported activation {name} (Emformer: expected 'relu', 'gelu' "
                         "or 'silu')")
    return table[name]()


def _init_gains(strategy, num_layers):
    if strategy is None:
        return [None] * num_layers
    if strategy == "depthwise":
        return [1.0 / math.sqrt(i + 1) for i in range(num_layers)]
    if strategy == "constant":
        return [1.0 / math.sqrt(2)] * num_layers
    raise ValueError(f"Unsupported weight_init_scale_strategy value {strategy} (Emformer: "
                     "expected None, 'depthwise' or 'constant')")


def _empty_steps(like):
    """A (0, batch, dim) tensor like ``like`` (time, batch, dim)."""
    return like.new_zeros((0,) + tuple(like.shape[1:]))


class _EmformerAttention(nn.Module):
    """Attention of [right context, utterance, summary] queries over [memory, right context,
    (left context), utterance] keys; returns (right context + utterance output, new memory)."""

    def __init__(self, input_dim: int, num_heads: int, dropout: float = 0.0,
                 weight_init_gain: Optional[float] = None, tanh_on_mem: bool = False,
                 negative_inf: float = -1e8):
        super().__init__()
        if input_dim % num_heads != 0:
            raise ValueError(f"input_dim ({input_dim}) is not a multiple of num_heads "
                             f"({num_heads}).")
        self.input_dim = input_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.tanh_on_mem = tanh_on_mem
        self.negative_inf = negative_inf
        self.scaling = (input_dim // num_heads) ** -0.5
        self.emb_to_key_value = nn.Linear(input_dim, 2 * input_dim, bias=True)
        self.emb_to_query = nn.Linear(input_dim, input_dim, bias=True)
        self.out_proj = nn.Linear(input_dim, input_dim, bias=True)
        if weight_init_gain:
            nn.init.xavier_uniform_(self.emb_to_key_value.weight, gain=weight_init_gain)
            nn.init.xavier_uniform_(self.emb_to_query.weight, gain=weight_init_gain)

    def _heads(self, x, batch):
        # (time, batch, dim) -> (batch * heads, time, head_dim), batch-major
        return x.reshape(x.shape[0], batch * self.num_heads, -1).transpose(0, 1)

    def _attend(self, utterance, lengths, right_context, summary, mems, attention_mask,
                left_context_key=None, left_context_val=None):
        batch = utterance.shape[1]
        n_query = right_context.shape[0] + utterance.shape[0] + summary.shape[0]
        query = self.emb_to_query(fiamma.cat([right_context, utterance, summary]))
        key, value = self.emb_to_key_value(fiamma.cat([mems, right_context, utterance])) \
            .chunk(2, dim=2)
        # the number of right-context frames as torchaudio counts it (query frames beyond the
        # longest utterance, summaries excluded)
        rc_frames = n_query - int(lengths.max().item()) - summary.shape[0]
        n_left = 0
        if left_context_key is not None and left_context_val is not None:
            cut = mems.shape[0] + rc_frames
            key = fiamma.cat([key[:cut], left_context_key, key[cut:]])
            value = fiamma.cat([value[:cut], left_context_val, value[cut:]])
            n_left = left_context_key.shape[0]
        q, k, v = (self._heads(t, batch) for t in (query, key, value))
        scores = fiamma.bmm(q * self.scaling, k.transpose(1, 2))
        work = scores if scores.dtype in (fiamma.float32, fiamma.float64) else scores.float()
        work = work.masked_fill(attention_mask.unsqueeze(0), self.negative_inf)
        if batch > 1:
            key_lengths = lengths + mems.shape[0] + rc_frames + n_left
            pad = _lengths_to_padding_mask(key_lengths)
            work = work.view(batch, self.num_heads, n_query, -1) \
                .masked_fill(pad[:, None, None, :], self.negative_inf) \
                .view(batch * self.num_heads, n_query, -1)
        probs = nn.functional.softmax(work, dim=-1).to(scores.dtype)
        probs = nn.functional.dropout(probs, p=float(self.dropout), training=self.training)
        out = fiamma.bmm(probs, v).transpose(0, 1).reshape(n_query, batch, self.input_dim)
        out = self.out_proj(out)
        n_summary = summary.shape[0]
        out_rc_utt, out_mems = out[:n_query - n_summary], out[n_query - n_summary:]
        out_mems = fiamma.tanh(out_mems) if self.tanh_on_mem else out_mems.clamp(-10, 10)
        return out_rc_utt, out_mems, key, value

    def forward(self, utterance, lengths, right_context, summary, mems, attention_mask):
        out, out_mems, _, _ = self._attend(utterance, lengths, right_context, summary, mems,
                                           attention_mask)
        return out, out_mems[:-1]

    def infer(self, utterance, lengths, right_context, summary, mems, left_context_key,
              left_context_val):
        n_query = right_context.shape[0] + utterance.shape[0] + summary.shape[0]
        n_key = (right_context.shape[0] + utterance.shape[0] + mems.shape[0]
                 + left_context_key.shape[0])
        mask = np.zeros((n_query, n_key), dtype=bool)
        mask[-1, :mems.shape[0]] = True      # the summary query does not see the memory
        mask = fiamma.tensor(mask, device=utterance.device)
        out, out_mems, key, value = self._attend(utterance, lengths, right_context, summary,
                                                 mems, mask, left_context_key,
                                                 left_context_val)
        start = mems.shape[0] + right_context.shape[0]
        return out, out_mems, key[start:], value[start:]


class _EmformerLayer(nn.Module):
    def __init__(self, input_dim: int, num_heads: int, ffn_dim: int, segment_length: int,
                 dropout: float = 0.0, activation: str = "relu", left_context_length: int = 0,
                 max_memory_size: int = 0, weight_init_gain: Optional[float] = None,
                 tanh_on_mem: bool = False, negative_inf: float = -1e8):
        super().__init__()
        self.attention = _EmformerAttention(input_dim, num_heads, dropout=dropout,
                                            weight_init_gain=weight_init_gain,
                                            tanh_on_mem=tanh_on_mem, negative_inf=negative_inf)
        self.dropout = nn.Dropout(dropout)
        self.memory_op = nn.AvgPool1d(kernel_size=segment_length, stride=segment_length,
                                      ceil_mode=True)
        self.pos_ff = nn.Sequential(
            nn.LayerNorm(input_dim), nn.Linear(input_dim, ffn_dim), _activation(activation),
            nn.Dropout(dropout), nn.Linear(ffn_dim, input_dim), nn.Dropout(dropout))
        self.layer_norm_input = nn.LayerNorm(input_dim)
        self.layer_norm_output = nn.LayerNorm(input_dim)
        self.left_context_length = left_context_length
        self.segment_length = segment_length
        self.max_memory_size = max_memory_size
        self.input_dim = input_dim
        self.use_mem = max_memory_size > 0

    def _summary(self, utterance):
        if not self.use_mem:
            return _empty_steps(utterance)
        return self.memory_op(utterance.permute(1, 2, 0)).permute(2, 0, 1)

    def _init_state(self, batch_size, device):
        dim = self.input_dim
        zeros = [fiamma.zeros(n, batch_size, dim, device=device)
                 for n in (self.max_memory_size, self.left_context_length,
                           self.left_context_length)]
        return zeros + [fiamma.zeros(1, batch_size, dtype=fiamma.int32, device=device)]

    def _norm_in(self, utterance, right_context):
        h = self.layer_norm_input(fiamma.cat([right_context, utterance]))
        return h[right_context.shape[0]:], h[:right_context.shape[0]]

    def _ffn_out(self, attn_out, utterance, right_context):
        h = self.dropout(attn_out) + fiamma.cat([right_context, utterance])
        h = self.layer_norm_output(self.pos_ff(h) + h)
        return h[right_context.shape[0]:], h[:right_context.shape[0]]

    def forward(self, utterance, lengths, right_context, mems, attention_mask):
        if attention_mask is None:
            raise ValueError("attention_mask must be not None when for_inference is False")
        utt_n, rc_n = self._norm_in(utterance, right_context)
        out, out_mems = self.attention(utt_n, lengths, rc_n, self._summary(utt_n), mems,
                                       attention_mask)
        out_utt, out_rc = self._ffn_out(out, utterance, right_context)
        return out_utt, out_rc, out_mems

    def infer(self, utterance, lengths, right_context, state, mems):
        utt_n, rc_n = self._norm_in(utterance, right_context)
        if state is None:
            state = self._init_state(utterance.shape[1], utterance.device)
        past = int(state[3][0][0].item())
        n_left = min(self.left_context_length, past)
        n_mem = min(self.max_memory_size, math.ceil(past / self.segment_length))
        pre_mems = state[0][self.max_memory_size - n_mem:]
        lc_key = state[1][self.left_context_length - n_left:]
        lc_val = state[2][self.left_context_length - n_left:]
        out, out_mems, next_k, next_v = self.attention.infer(
            utt_n, lengths, rc_n, self._summary(utt_n)[:1], pre_mems, lc_key, lc_val)
        # new state: the memory bank gains this layer's input memory; the left context keeps
        # the newest keys/values
        keys = fiamma.cat([state[1], next_k])
        vals = fiamma.cat([state[2], next_v])
        bank = fiamma.cat([state[0], mems])
        state = [bank[bank.shape[0] - self.max_memory_size:],
                 keys[keys.shape[0] - self.left_context_length:],
                 vals[vals.shape[0] - self.left_context_length:],
                 state[3] + utterance.shape[0]]
        out_utt, out_rc = self._ffn_out(out, utterance, right_context)
        return out_utt, out_rc, state, out_mems


class _EmformerImpl(nn.Module):
    def __init__(self, emformer_layers, segment_length: int, left_context_length: int = 0,
                 right_context_length: int = 0, max_memory_size: int = 0):
        super().__init__()
        self.use_mem = max_memory_size > 0
        self.memory_op = nn.AvgPool1d(kernel_size=segment_length, stride=segment_length,
                                      ceil_mode=True)
        self.emformer_layers = emformer_layers
        self.left_context_length = left_context_length
        self.right_context_length = right_context_length
        self.segment_length = segment_length
        self.max_memory_size = max_memory_size

    def _input_dim(self):
        return self.emformer_layers[0].input_dim if len(self.emformer_layers) else None

    def _gen_right_context(self, input):
        """The look-ahead block of every segment, concatenated: the R frames after each
        segment, the last segment's being the input's final R frames."""
        total, rc, seg = input.shape[0], self.right_context_length, self.segment_length
        n_segs = math.ceil((total - rc) / seg)
        blocks = [input[(i + 1) * seg:(i + 1) * seg + rc] for i in range(n_segs - 1)]
        return fiamma.cat(blocks + [input[total - rc:]])

    def _gen_attention_mask(self, utterance):
        """Training-time mask (True = blocked) of [rc blocks, utterance, summaries] queries
        over [memories, rc blocks, utterance] keys."""
        u = utterance.shape[0]
        seg, rc, lc = self.segment_length, self.right_context_length, self.left_context_length
        n_segs = math.ceil(u / seg)
        n_mem = n_segs - 1 if self.use_mem else 0
        n_rc = rc * n_segs
        n_keys = n_mem + n_rc + u
        rc_rows, utt_rows, sum_rows = [], [], []
        for i in range(n_segs):
            seen = np.zeros(n_keys, dtype=bool)
            seen[n_mem + i * rc:n_mem + (i + 1) * rc] = True
            start, end = max(i * seg - lc, 0), min((i + 1) * seg, u)
            seen[n_mem + n_rc + start:n_mem + n_rc + end] = True
            sum_rows.append(seen.copy())
            if self.use_mem:
                seen[max(i - self.max_memory_size, 0):i] = True
            rc_rows += [seen] * rc
            utt_rows += [seen] * (end - i * seg)
        rows = rc_rows + utt_rows + (sum_rows if self.use_mem else [])
        mask = ~np.stack(rows) if rows else np.ones((0, n_keys), dtype=bool)
        return fiamma.tensor(mask, device=utterance.device)

    def forward(self, input, lengths):
        """(batch, frames + right_context_length, input_dim) and (batch,) valid utterance
        lengths -> (output (batch, frames, input_dim), lengths)."""
        check_input("Emformer", input, 3, "(batch, time, input_dim)", {2: self._input_dim()}
                    if self._input_dim() else None)
        x = input.permute(1, 0, 2)
        right_context = self._gen_right_context(x)
        utterance = x[:x.shape[0] - self.right_context_length]
        mask = self._gen_attention_mask(utterance)
        if self.use_mem:
            mems = self.memory_op(utterance.permute(1, 2, 0)).permute(2, 0, 1)[:-1]
        else:
            mems = _empty_steps(utterance)
        out = utterance
        for layer in self.emformer_layers:
            out, right_context, mems = layer(out, lengths, right_context, mems, mask)
        return out.permute(1, 0, 2), lengths

    def infer(self, input, lengths, states: Optional[List[List["fiamma.Tensor"]]] = None
              ) -> Tuple["fiamma.Tensor", "fiamma.Tensor", List[List["fiamma.Tensor"]]]:
        """Streaming step on one segment plus its right context,
        (batch, segment_length + right_context_length, input_dim) -> (output, output lengths,
        states for the next call)."""
        check_input("Emformer.infer", input, 3, "(batch, time, input_dim)")
        if input.shape[1] != self.segment_length + self.right_context_length:
            raise ValueError("Per configured segment_length and right_context_length, expected "
                             f"size of {self.segment_length + self.right_context_length} for "
                             f"dimension 1 of input, but got {input.shape[1]}.")
        x = input.permute(1, 0, 2)
        split = x.shape[0] - self.right_context_length
        right_context, utterance = x[split:], x[:split]
        out_lengths = (lengths - self.right_context_length).clamp(min=0)
        if self.use_mem:
            mems = self.memory_op(utterance.permute(1, 2, 0)).permute(2, 0, 1)
        else:
            mems = _empty_steps(utterance)
        out, new_states = utterance, []
        for i, layer in enumerate(self.emformer_layers):
            out, right_context, state, mems = layer.infer(
                out, out_lengths, right_context, None if states is None else states[i], mems)
            new_states.append(state)
        return out.permute(1, 0, 2), out_lengths, new_states


class Emformer(_EmformerImpl):
    """Emformer.

    Args:
        input_dim, num_heads, ffn_dim, num_layers, segment_length: sizes.
        dropout (0.0), activation ("relu", "gelu" or "silu"), left_context_length (0),
        right_context_length (0), max_memory_size (0: no memory bank),
        weight_init_scale_strategy ("depthwise", "constant" or None), tanh_on_mem (False:
        memories are clamped to [-10, 10]), negative_inf (-1e8).

    ``forward(input, lengths)`` runs the whole utterance at once (training);
    ``infer(input, lengths, states=None)`` streams one segment at a time.
    """

    def __init__(self, input_dim: int, num_heads: int, ffn_dim: int, num_layers: int,
                 segment_length: int, dropout: float = 0.0, activation: str = "relu",
                 left_context_length: int = 0, right_context_length: int = 0,
                 max_memory_size: int = 0,
                 weight_init_scale_strategy: Optional[str] = "depthwise",
                 tanh_on_mem: bool = False, negative_inf: float = -1e8):
        gains = _init_gains(weight_init_scale_strategy, num_layers)
        layers = nn.ModuleList([
            _EmformerLayer(input_dim, num_heads, ffn_dim, segment_length, dropout=dropout,
                           activation=activation, left_context_length=left_context_length,
                           max_memory_size=max_memory_size, weight_init_gain=gains[i],
                           tanh_on_mem=tanh_on_mem, negative_inf=negative_inf)
            for i in range(num_layers)])
        super().__init__(layers, segment_length, left_context_length=left_context_length,
                         right_context_length=right_context_length,
                         max_memory_size=max_memory_size)
