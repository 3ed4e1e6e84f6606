"""Tacotron 2 (Shen et al., 2018): character embedding, convolutional + BiLSTM encoder,
location-sensitive attention, an autoregressive LSTM decoder with a pre-net, stop-token gate and
a convolutional post-net. Module and parameter names, signatures and return tuples follow
torchaudio.models.Tacotron2 (NVIDIA's layout), so its checkpoints load by key.

As in torchaudio, the pre-net's dropout (p=0.5) stays on in evaluation mode too (the paper's
choice, for output variation at inference)."""

import warnings
from typing import List, Optional, Tuple

import fiamma
from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["Tacotron2"]

F = nn.functional


def _linear(in_dim, out_dim, bias=True, w_init_gain="linear"):
    layer = nn.Linear(in_dim, out_dim, bias=bias)
    nn.init.xavier_uniform_(layer.weight, gain=nn.init.calculate_gain(w_init_gain))
    return layer


def _conv1d(in_channels, out_channels, kernel_size=1, bias=True, w_init_gain="linear"):
    if kernel_size % 2 != 1:
        raise ValueError(f"Tacotron2: kernel_size must be odd, got {kernel_size}")
    conv = nn.Conv1d(in_channels, out_channels, kernel_size=kernel_size,
                     padding=(kernel_size - 1) // 2, bias=bias)
    nn.init.xavier_uniform_(conv.weight, gain=nn.init.calculate_gain(w_init_gain))
    return conv


def _padding_mask(lengths):
    """(batch,) lengths -> (batch, max_length) bool, True at padded positions."""
    steps = fiamma.arange(int(lengths.max().item()), device=lengths.device, dtype=lengths.dtype)
    return steps.unsqueeze(0) >= lengths.unsqueeze(1)


class _LocationLayer(nn.Module):
    def __init__(self, attention_n_filter: int, attention_kernel_size: int,
                 attention_hidden_dim: int):
        super().__init__()
        self.location_conv = _conv1d(2, attention_n_filter, attention_kernel_size, bias=False)
        self.location_dense = _linear(attention_n_filter, attention_hidden_dim, bias=False,
                                      w_init_gain="tanh")

    def forward(self, attention_weights_cat):
        return self.location_dense(self.location_conv(attention_weights_cat).transpose(1, 2))


class _Attention(nn.Module):
    """Location-sensitive additive attention: energies v . tanh(W q + U memory + location
    features of the previous and cumulative weights)."""

    def __init__(self, attention_rnn_dim: int, encoder_embedding_dim: int,
                 attention_hidden_dim: int, attention_location_n_filter: int,
                 attention_location_kernel_size: int) -> None:
        super().__init__()
        self.query_layer = _linear(attention_rnn_dim, attention_hidden_dim, bias=False,
                                   w_init_gain="tanh")
        self.memory_layer = _linear(encoder_embedding_dim, attention_hidden_dim, bias=False,
                                    w_init_gain="tanh")
        self.v = _linear(attention_hidden_dim, 1, bias=False)
        self.location_layer = _LocationLayer(attention_location_n_filter,
                                             attention_location_kernel_size,
                                             attention_hidden_dim)
        self.score_mask_value = -float("inf")

    def forward(self, attention_hidden_state, memory, processed_memory, attention_weights_cat,
                mask):
        energy = self.v(fiamma.tanh(self.query_layer(attention_hidden_state.unsqueeze(1))
                                    + self.location_layer(attention_weights_cat)
                                    + processed_memory)).squeeze(2)
        weights = F.softmax(energy.masked_fill(mask, self.score_mask_value), dim=1)
        return fiamma.bmm(weights.unsqueeze(1), memory).squeeze(1), weights


class _Prenet(nn.Module):
    def __init__(self, in_dim: int, out_sizes: List[int]) -> None:
        super().__init__()
        sizes = [in_dim] + list(out_sizes)
        self.layers = nn.ModuleList([_linear(a, b, bias=False)
                                     for a, b in zip(sizes[:-1], sizes[1:])])

    def forward(self, x):
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), p=0.5, training=True)
        return x


class _Postnet(nn.Module):
    def __init__(self, n_mels: int, postnet_embedding_dim: int, postnet_kernel_size: int,
                 postnet_n_convolution: int):
        super().__init__()
        self.convolutions = nn.ModuleList()
        for i in range(postnet_n_convolution):
            last = i == postnet_n_convolution - 1
            cin = n_mels if i == 0 else postnet_embedding_dim
            cout = n_mels if last else postnet_embedding_dim
            self.convolutions.append(nn.Sequential(
                _conv1d(cin, cout, postnet_kernel_size,
                        w_init_gain="linear" if last else "tanh"),
                nn.BatchNorm1d(cout)))
        self.n_convs = len(self.convolutions)

    def forward(self, x):
        for i, conv in enumerate(self.convolutions):
            x = conv(x)
            if i < self.n_convs - 1:
                x = fiamma.tanh(x)
            x = F.dropout(x, 0.5, training=self.training)
        return x


class _Encoder(nn.Module):
    def __init__(self, encoder_embedding_dim: int, encoder_n_convolution: int,
                 encoder_kernel_size: int) -> None:
        super().__init__()
        dim = encoder_embedding_dim
        self.convolutions = nn.ModuleList([
            nn.Sequential(_conv1d(dim, dim, encoder_kernel_size, w_init_gain="relu"),
                          nn.BatchNorm1d(dim))
            for _ in range(encoder_n_convolution)])
        self.lstm = nn.LSTM(dim, dim // 2, 1, batch_first=True, bidirectional=True)

    def forward(self, x, input_lengths):
        for conv in self.convolutions:
            x = F.dropout(F.relu(conv(x)), 0.5, self.training)
        packed = nn.utils.rnn.pack_padded_sequence(x.transpose(1, 2), input_lengths.cpu(),
                                                   batch_first=True)
        out, _ = self.lstm(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0]


class _Decoder(nn.Module):
    def __init__(self, n_mels: int, n_frames_per_step: int, encoder_embedding_dim: int,
                 decoder_rnn_dim: int, decoder_max_step: int, decoder_dropout: float,
                 decoder_early_stopping: bool, attention_rnn_dim: int,
                 attention_hidden_dim: int, attention_location_n_filter: int,
                 attention_location_kernel_size: int, attention_dropout: float,
                 prenet_dim: int, gate_threshold: float) -> None:
        super().__init__()
        self.n_mels = n_mels
        self.n_frames_per_step = n_frames_per_step
        self.encoder_embedding_dim = encoder_embedding_dim
        self.attention_rnn_dim = attention_rnn_dim
        self.decoder_rnn_dim = decoder_rnn_dim
        self.prenet_dim = prenet_dim
        self.decoder_max_step = decoder_max_step
        self.gate_threshold = gate_threshold
        self.attention_dropout = attention_dropout
        self.decoder_dropout = decoder_dropout
        self.decoder_early_stopping = decoder_early_stopping
        frame = n_mels * n_frames_per_step
        self.prenet = _Prenet(frame, [prenet_dim, prenet_dim])
        self.attention_rnn = nn.LSTMCell(prenet_dim + encoder_embedding_dim, attention_rnn_dim)
        self.attention_layer = _Attention(attention_rnn_dim, encoder_embedding_dim,
                                          attention_hidden_dim, attention_location_n_filter,
                                          attention_location_kernel_size)
        self.decoder_rnn = nn.LSTMCell(attention_rnn_dim + encoder_embedding_dim,
                                       decoder_rnn_dim, True)
        self.linear_projection = _linear(decoder_rnn_dim + encoder_embedding_dim, frame)
        self.gate_layer = _linear(decoder_rnn_dim + encoder_embedding_dim, 1, bias=True,
                                  w_init_gain="sigmoid")

    def _initial_state(self, memory):
        b, t = memory.shape[0], memory.shape[1]
        z = memory.new_zeros
        return {"att_h": z((b, self.attention_rnn_dim)), "att_c": z((b, self.attention_rnn_dim)),
                "dec_h": z((b, self.decoder_rnn_dim)), "dec_c": z((b, self.decoder_rnn_dim)),
                "weights": z((b, t)), "weights_cum": z((b, t)),
                "context": z((b, self.encoder_embedding_dim)),
                "processed": self.attention_layer.memory_layer(memory)}

    def _step(self, frame, s, memory, mask):
        """One decoder step from a pre-net output; updates ``s`` and returns (frame output,
        gate logit)."""
        s["att_h"], s["att_c"] = self.attention_rnn(fiamma.cat((frame, s["context"]), -1),
                                                    (s["att_h"], s["att_c"]))
        s["att_h"] = F.dropout(s["att_h"], self.attention_dropout, self.training)
        both = fiamma.stack((s["weights"], s["weights_cum"]), dim=1)
        s["context"], s["weights"] = self.attention_layer(s["att_h"], memory, s["processed"],
                                                          both, mask)
        s["weights_cum"] = s["weights_cum"] + s["weights"]
        s["dec_h"], s["dec_c"] = self.decoder_rnn(fiamma.cat((s["att_h"], s["context"]), -1),
                                                  (s["dec_h"], s["dec_c"]))
        s["dec_h"] = F.dropout(s["dec_h"], self.decoder_dropout, self.training)
        hc = fiamma.cat((s["dec_h"], s["context"]), dim=1)
        return self.linear_projection(hc), self.gate_layer(hc)

    def _to_mel(self, frames):
        """(steps, batch, n_mels * n_frames_per_step) -> (batch, n_mels, steps * fps)."""
        b = frames.shape[1]
        return frames.transpose(0, 1).reshape(b, -1, self.n_mels).transpose(1, 2)

    def forward(self, memory, mel_specgram_truth, memory_lengths):
        b = memory.shape[0]
        truth = mel_specgram_truth.transpose(1, 2)
        truth = truth.reshape(b, truth.shape[1] // self.n_frames_per_step, -1).transpose(0, 1)
        go = memory.new_zeros((1, b, self.n_mels * self.n_frames_per_step))
        inputs = self.prenet(fiamma.cat((go, truth), dim=0))
        mask = _padding_mask(memory_lengths)
        s = self._initial_state(memory)
        mels, gates, aligns = [], [], []
        for t in range(inputs.shape[0] - 1):
            mel, gate = self._step(inputs[t], s, memory, mask)
            mels.append(mel)
            gates.append(gate.squeeze(1))
            aligns.append(s["weights"])
        return (self._to_mel(fiamma.stack(mels)), fiamma.stack(gates).transpose(0, 1),
                fiamma.stack(aligns).transpose(0, 1))

    def infer(self, memory, memory_lengths):
        """Free-running decoding until every item's gate passes ``gate_threshold`` (with
        early stopping) or ``decoder_max_step``; returns (mel (batch, n_mels, steps * fps),
        lengths in steps (int32), gate logits (batch, steps), alignments (batch, steps,
        text length))."""
        b = memory.shape[0]
        frame = memory.new_zeros((b, self.n_mels * self.n_frames_per_step))
        mask = _padding_mask(memory_lengths)
        s = self._initial_state(memory)
        lengths = fiamma.zeros(b, dtype=fiamma.int32, device=memory.device)
        finished = fiamma.zeros(b, dtype=fiamma.bool, device=memory.device)
        mels, gates, aligns = [], [], []
        for _ in range(self.decoder_max_step):
            mel, gate = self._step(self.prenet(frame), s, memory, mask)
            mels.append(mel)
            gates.append(gate.squeeze(1))
            aligns.append(s["weights"])
            lengths = lengths + (~finished).to(fiamma.int32)
            finished = finished | (fiamma.sigmoid(gate.squeeze(1)) > self.gate_threshold)
            if self.decoder_early_stopping and bool(finished.all()):
                break
            frame = mel
        if len(mels) == self.decoder_max_step:
            warnings.warn("Reached max decoder steps. The generated spectrogram might not cover "
                          "the whole transcript.", stacklevel=2)
        return (self._to_mel(fiamma.stack(mels)), lengths, fiamma.stack(gates).transpose(0, 1),
                fiamma.stack(aligns).transpose(0, 1))


class Tacotron2(nn.Module):
    """Tacotron 2 (torchaudio's constructor arguments and defaults).

    ``forward(tokens, token_lengths, mel_specgram, mel_specgram_lengths)`` (teacher forcing;
    token lengths sorted in decreasing order) -> (mel before post-net, mel after post-net, gate
    logits (batch, steps), alignments (batch, steps, max token length)).
    ``infer(tokens, lengths=None)`` -> (mel after post-net (batch, n_mels, time), mel lengths
    (int32), alignments (batch, time, max token length)).
    """

    def __init__(self, mask_padding: bool = False, n_mels: int = 80, n_symbol: int = 148,
                 n_frames_per_step: int = 1, symbol_embedding_dim: int = 512,
                 encoder_embedding_dim: int = 512, encoder_n_convolution: int = 3,
                 encoder_kernel_size: int = 5, decoder_rnn_dim: int = 1024,
                 decoder_max_step: int = 2000, decoder_dropout: float = 0.1,
                 decoder_early_stopping: bool = True, attention_rnn_dim: int = 1024,
                 attention_hidden_dim: int = 128, attention_location_n_filter: int = 32,
                 attention_location_kernel_size: int = 31, attention_dropout: float = 0.1,
                 prenet_dim: int = 256, postnet_n_convolution: int = 5,
                 postnet_kernel_size: int = 5, postnet_embedding_dim: int = 512,
                 gate_threshold: float = 0.5) -> None:
        super().__init__()
        self.mask_padding = mask_padding
        self.n_mels = n_mels
        self.n_frames_per_step = n_frames_per_step
        self.embedding = nn.Embedding(n_symbol, symbol_embedding_dim)
        nn.init.xavier_uniform_(self.embedding.weight)
        self.encoder = _Encoder(encoder_embedding_dim, encoder_n_convolution,
                                encoder_kernel_size)
        self.decoder = _Decoder(n_mels, n_frames_per_step, encoder_embedding_dim,
                                decoder_rnn_dim, decoder_max_step, decoder_dropout,
                                decoder_early_stopping, attention_rnn_dim, attention_hidden_dim,
                                attention_location_n_filter, attention_location_kernel_size,
                                attention_dropout, prenet_dim, gate_threshold)
        self.postnet = _Postnet(n_mels, postnet_embedding_dim, postnet_kernel_size,
                                postnet_n_convolution)

    def _check_tokens(self, tokens, lengths, who):
        check_input(who, tokens, 2, "tokens (batch, max_length)")
        if tokens.is_floating_point():
            raise TypeError(f"{who}: tokens must be integer symbol indices, got {tokens.dtype}")
        if lengths is not None:
            check_input(who, lengths, 1, "token lengths (batch,)", {0: tokens.shape[0]})

    def forward(self, tokens, token_lengths, mel_specgram, mel_specgram_lengths):
        self._check_tokens(tokens, token_lengths, "Tacotron2")
        check_input("Tacotron2", mel_specgram, 3, "mel_specgram (batch, n_mels, time)",
                    {0: tokens.shape[0], 1: self.n_mels})
        if mel_specgram.shape[2] % self.n_frames_per_step:
            raise ValueError(f"Tacotron2: mel_specgram time ({mel_specgram.shape[2]}) must be a "
                             f"multiple of n_frames_per_step ({self.n_frames_per_step})")
        memory = self.encoder(self.embedding(tokens).transpose(1, 2), token_lengths)
        mel, gates, aligns = self.decoder(memory, mel_specgram, memory_lengths=token_lengths)
        mel_post = mel + self.postnet(mel)
        if self.mask_padding:
            pad = _padding_mask(mel_specgram_lengths)
            mel = mel.masked_fill(pad.unsqueeze(1), 0.0)
            mel_post = mel_post.masked_fill(pad.unsqueeze(1), 0.0)
            gates = gates.masked_fill(pad, 1000.0)
        return mel, mel_post, gates, aligns

    def infer(self, tokens, lengths: Optional["fiamma.Tensor"] = None
              ) -> Tuple["fiamma.Tensor", "fiamma.Tensor", "fiamma.Tensor"]:
        self._check_tokens(tokens, lengths, "Tacotron2.infer")
        n_batch, max_length = tokens.shape
        if lengths is None:
            lengths = fiamma.full((n_batch,), max_length, dtype=tokens.dtype,
                                  device=tokens.device)
        memory = self.encoder(self.embedding(tokens).transpose(1, 2), lengths)
        mel, mel_lengths, _, aligns = self.decoder.infer(memory, lengths)
        return mel + self.postnet(mel), mel_lengths, aligns
