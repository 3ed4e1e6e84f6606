"""Recurrent neural network transducer (Graves, 2012) with an Emformer transcriber, an LSTM
predictor and an additive joiner. Module and parameter names, signatures and return tuples
follow torchaudio.models.RNNT / emformer_rnnt_model / emformer_rnnt_base, so their
checkpoints load by key."""

from abc import ABC, abstractmethod
from typing import List, Optional, Tuple

import fiamma
from fiamma import nn
from fiamma.audio.models._checks import check_input
from fiamma.audio.models.emformer import Emformer

__all__ = ["RNNT", "emformer_rnnt_base", "emformer_rnnt_model"]


class _TimeReduction(nn.Module):
    """Stack ``stride`` consecutive frames: (B, T, D) -> (B, T // stride, D * stride); lengths
    are divided by the stride (truncating) and trailing frames dropped."""

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.stride = stride

    def forward(self, input, lengths):
        b, t, d = input.shape
        kept = t - t % self.stride
        out = input[:, :kept, :].reshape(b, kept // self.stride, d * self.stride).contiguous()
        return out, lengths.div(self.stride, rounding_mode="trunc")


class _CustomLSTM(nn.Module):
    """LSTM layer over (time, batch, input_dim) with optional layer norm on the gates and the
    cell; gate order input, forget, cell, output. State is ``[h, c]``."""

    def __init__(self, input_dim: int, hidden_dim: int, layer_norm: bool = False,
                 layer_norm_epsilon: float = 1e-5) -> None:
        super().__init__()
        self.x2g = nn.Linear(input_dim, 4 * hidden_dim, bias=not layer_norm)
        self.p2g = nn.Linear(hidden_dim, 4 * hidden_dim, bias=False)
        if layer_norm:
            self.c_norm = nn.LayerNorm(hidden_dim, eps=layer_norm_epsilon)
            self.g_norm = nn.LayerNorm(4 * hidden_dim, eps=layer_norm_epsilon)
        else:
            self.c_norm = nn.Identity()
            self.g_norm = nn.Identity()
        self.hidden_dim = hidden_dim

    def forward(self, input, state):
        if state is None:
            h = input.new_zeros((input.shape[1], self.hidden_dim))
            c = input.new_zeros((input.shape[1], self.hidden_dim))
        else:
            h, c = state
        steps = []
        for x_gates in self.x2g(input).unbind(0):
            i, f, g, o = self.g_norm(x_gates + self.p2g(h)).chunk(4, 1)
            c = self.c_norm(fiamma.sigmoid(f) * c + fiamma.sigmoid(i) * fiamma.tanh(g))
            h = fiamma.sigmoid(o) * fiamma.tanh(c)
            steps.append(h)
        return fiamma.stack(steps, dim=0), [h, c]


class _Transcriber(ABC):
    """Interface of an RNN-T transcriber: ``forward`` over whole utterances and streaming
    ``infer``."""

    @abstractmethod
    def forward(self, input, lengths):
        ...

    @abstractmethod
    def infer(self, input, lengths, states):
        ...


class _EmformerEncoder(nn.Module, _Transcriber):
    """Linear, time reduction, Emformer, linear, layer norm."""

    def __init__(self, *, input_dim: int, output_dim: int, segment_length: int,
                 right_context_length: int, time_reduction_input_dim: int,
                 time_reduction_stride: int, transformer_num_heads: int,
                 transformer_ffn_dim: int, transformer_num_layers: int,
                 transformer_left_context_length: int, transformer_dropout: float = 0.0,
                 transformer_activation: str = "relu", transformer_max_memory_size: int = 0,
                 transformer_weight_init_scale_strategy: str = "depthwise",
                 transformer_tanh_on_mem: bool = False) -> None:
        super().__init__()
        self.input_linear = nn.Linear(input_dim, time_reduction_input_dim, bias=False)
        self.time_reduction = _TimeReduction(time_reduction_stride)
        dim = time_reduction_input_dim * time_reduction_stride
        self.transformer = Emformer(
            dim, transformer_num_heads, transformer_ffn_dim, transformer_num_layers,
            segment_length // time_reduction_stride, dropout=transformer_dropout,
            activation=transformer_activation,
            left_context_length=transformer_left_context_length,
            right_context_length=right_context_length // time_reduction_stride,
            max_memory_size=transformer_max_memory_size,
            weight_init_scale_strategy=transformer_weight_init_scale_strategy,
            tanh_on_mem=transformer_tanh_on_mem)
        self.output_linear = nn.Linear(dim, output_dim)
        self.layer_norm = nn.LayerNorm(output_dim)

    def _check(self, input, lengths, who):
        check_input(who, input, 3, "(batch, time, input_dim)",
                    {2: self.input_linear.in_features})
        check_input(who, lengths, 1, "lengths (batch,)", {0: input.shape[0]})

    def forward(self, input, lengths):
        self._check(input, lengths, "RNNT transcriber")
        x, lengths = self.time_reduction(self.input_linear(input), lengths)
        x, lengths = self.transformer(x, lengths)
        return self.layer_norm(self.output_linear(x)), lengths

    def infer(self, input, lengths, states):
        self._check(input, lengths, "RNNT transcriber (streaming)")
        x, lengths = self.time_reduction(self.input_linear(input), lengths)
        x, lengths, states = self.transformer.infer(x, lengths, states)
        return self.layer_norm(self.output_linear(x)), lengths, states


class _Predictor(nn.Module):
    """Embedding, layer norm, stacked custom LSTMs (with dropout), linear, layer norm."""

    def __init__(self, num_symbols: int, output_dim: int, symbol_embedding_dim: int,
                 num_lstm_layers: int, lstm_hidden_dim: int, lstm_layer_norm: bool = False,
                 lstm_layer_norm_epsilon: float = 1e-5, lstm_dropout: float = 0.0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_symbols, symbol_embedding_dim)
        self.input_layer_norm = nn.LayerNorm(symbol_embedding_dim)
        self.lstm_layers = nn.ModuleList([
            _CustomLSTM(symbol_embedding_dim if i == 0 else lstm_hidden_dim, lstm_hidden_dim,
                        layer_norm=lstm_layer_norm, layer_norm_epsilon=lstm_layer_norm_epsilon)
            for i in range(num_lstm_layers)])
        self.dropout = nn.Dropout(p=lstm_dropout)
        self.linear = nn.Linear(lstm_hidden_dim, output_dim)
        self.output_layer_norm = nn.LayerNorm(output_dim)
        self.lstm_dropout = lstm_dropout

    def forward(self, input, lengths, state: Optional[List[List["fiamma.Tensor"]]] = None):
        check_input("RNNT predictor", input, 2, "targets (batch, target_length)")
        h = self.input_layer_norm(self.embedding(input.permute(1, 0)))
        new_state = []
        for i, lstm in enumerate(self.lstm_layers):
            h, s = lstm(h, None if state is None else state[i])
            h = self.dropout(h)
            new_state.append(s)
        out = self.output_layer_norm(self.linear(h))
        return out.permute(1, 0, 2), lengths, new_state


class _Joiner(nn.Module):
    """activation(source[:, :, None] + target[:, None]) then a linear layer to the symbols."""

    def __init__(self, input_dim: int, output_dim: int, activation: str = "relu") -> None:
        super().__init__()
        self.linear = nn.Linear(input_dim, output_dim, bias=True)
        if activation not in ("relu", "tanh"):
            raise ValueError(f"Unsupported activation {activation} (RNNT joiner: expected "
                             "'relu' or 'tanh')")
        self.activation = nn.ReLU() if activation == "relu" else nn.Tanh()

    def forward(self, source_encodings, source_lengths, target_encodings, target_lengths):
        check_input("RNNT joiner", source_encodings, 3, "source encodings (batch, T, D)")
        check_input("RNNT joiner", target_encodings, 3, "target encodings (batch, U, D)",
                    {2: source_encodings.shape[2]})
        joint = source_encodings.unsqueeze(2) + target_encodings.unsqueeze(1)
        return self.linear(self.activation(joint)), source_lengths, target_lengths


class RNNT(nn.Module):
    """Recurrent neural network transducer from a transcriber, a predictor and a joiner.

    ``forward(sources, source_lengths, targets, target_lengths, predictor_state=None)`` ->
    (joint output (B, T, U, num_symbols), source lengths, target lengths, predictor state).
    ``transcribe``, ``transcribe_streaming``, ``predict`` and ``join`` run the parts.
    """

    def __init__(self, transcriber, predictor, joiner) -> None:
        super().__init__()
        self.transcriber = transcriber
        self.predictor = predictor
        self.joiner = joiner

    def forward(self, sources, source_lengths, targets, target_lengths,
                predictor_state: Optional[List[List["fiamma.Tensor"]]] = None):
        enc, source_lengths = self.transcriber(input=sources, lengths=source_lengths)
        pred, target_lengths, predictor_state = self.predictor(
            input=targets, lengths=target_lengths, state=predictor_state)
        out, source_lengths, target_lengths = self.joiner(
            source_encodings=enc, source_lengths=source_lengths, target_encodings=pred,
            target_lengths=target_lengths)
        return out, source_lengths, target_lengths, predictor_state

    def transcribe_streaming(self, sources, source_lengths, state
                             ) -> Tuple["fiamma.Tensor", "fiamma.Tensor", list]:
        return self.transcriber.infer(sources, source_lengths, state)

    def transcribe(self, sources, source_lengths):
        return self.transcriber(sources, source_lengths)

    def predict(self, targets, target_lengths, state):
        return self.predictor(input=targets, lengths=target_lengths, state=state)

    def join(self, source_encodings, source_lengths, target_encodings, target_lengths):
        return self.joiner(source_encodings=source_encodings, source_lengths=source_lengths,
                           target_encodings=target_encodings, target_lengths=target_lengths)


def emformer_rnnt_model(*, input_dim: int, encoding_dim: int, num_symbols: int,
                        segment_length: int, right_context_length: int,
                        time_reduction_input_dim: int, time_reduction_stride: int,
                        transformer_num_heads: int, transformer_ffn_dim: int,
                        transformer_num_layers: int, transformer_dropout: float,
                        transformer_activation: str, transformer_left_context_length: int,
                        transformer_max_memory_size: int,
                        transformer_weight_init_scale_strategy: str,
                        transformer_tanh_on_mem: bool, symbol_embedding_dim: int,
                        num_lstm_layers: int, lstm_layer_norm: bool,
                        lstm_layer_norm_epsilon: float, lstm_dropout: float) -> RNNT:
    """An RNNT with an Emformer transcriber (all arguments keyword-only, as in torchaudio);
    the predictor's LSTM hidden size is ``symbol_embedding_dim``."""
    encoder = _EmformerEncoder(
        input_dim=input_dim, output_dim=encoding_dim, segment_length=segment_length,
        right_context_length=right_context_length,
        time_reduction_input_dim=time_reduction_input_dim,
        time_reduction_stride=time_reduction_stride,
        transformer_num_heads=transformer_num_heads, transformer_ffn_dim=transformer_ffn_dim,
        transformer_num_layers=transformer_num_layers, transformer_dropout=transformer_dropout,
        transformer_activation=transformer_activation,
        transformer_left_context_length=transformer_left_context_length,
        transformer_max_memory_size=transformer_max_memory_size,
        transformer_weight_init_scale_strategy=transformer_weight_init_scale_strategy,
        transformer_tanh_on_mem=transformer_tanh_on_mem)
    predictor = _Predictor(num_symbols, encoding_dim, symbol_embedding_dim=symbol_embedding_dim,
                           num_lstm_layers=num_lstm_layers, lstm_hidden_dim=symbol_embedding_dim,
                           lstm_layer_norm=lstm_layer_norm,
                           lstm_layer_norm_epsilon=lstm_layer_norm_epsilon,
                           lstm_dropout=lstm_dropout)
    return RNNT(encoder, predictor, _Joiner(encoding_dim, num_symbols))


def emformer_rnnt_base(num_symbols: int) -> RNNT:
    """torchaudio's base Emformer RNN-T: 80 mel features, 1024-d encodings, 20 Emformer layers
    (8 heads, ffn 2048, segment 16, right context 4, left context 30, GELU, tanh memory),
    time reduction 4 from 128, a 3-layer 512-d layer-normed LSTM predictor."""
    return emformer_rnnt_model(
        input_dim=80, encoding_dim=1024, num_symbols=num_symbols, segment_length=16,
        right_context_length=4, time_reduction_input_dim=128, time_reduction_stride=4,
        transformer_num_heads=8, transformer_ffn_dim=2048, transformer_num_layers=20,
        transformer_dropout=0.1, transformer_activation="gelu",
        transformer_left_context_length=30, transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True,
        symbol_embedding_dim=512, num_lstm_layers=3, lstm_layer_norm=True,
        lstm_layer_norm_epsilon=1e-3, lstm_dropout=0.3)
