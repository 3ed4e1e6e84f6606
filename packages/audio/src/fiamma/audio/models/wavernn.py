"""WaveRNN vocoder (Kalchbrenner et al., 2018) in torchaudio's variant (fatchord's): a MelResNet
conditioning network and an upsampler feed two GRUs and a 3-layer classifier over the
``n_classes`` quantised sample values. Module and parameter names follow
torchaudio.models.WaveRNN, so its checkpoints load by key."""

import math
from typing import List, Optional, Tuple

import fiamma
from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["ResBlock", "MelResNet", "Stretch2d", "UpsampleNetwork", "WaveRNN"]


class ResBlock(nn.Module):
    """Two (1x1 conv, batch norm) layers with a ReLU between, plus the input."""

    def __init__(self, n_freq: int = 128) -> None:
        super().__init__()
        self.resblock_model = nn.Sequential(
            nn.Conv1d(n_freq, n_freq, kernel_size=1, bias=False), nn.BatchNorm1d(n_freq),
            nn.ReLU(inplace=True),
            nn.Conv1d(n_freq, n_freq, kernel_size=1, bias=False), nn.BatchNorm1d(n_freq))

    def forward(self, specgram):
        return self.resblock_model(specgram) + specgram


class MelResNet(nn.Module):
    """(batch, n_freq, frames) -> (batch, n_output, frames - kernel_size + 1)."""

    def __init__(self, n_res_block: int = 10, n_freq: int = 128, n_hidden: int = 128,
                 n_output: int = 128, kernel_size: int = 5) -> None:
        super().__init__()
        self.melresnet_model = nn.Sequential(
            nn.Conv1d(n_freq, n_hidden, kernel_size=kernel_size, bias=False),
            nn.BatchNorm1d(n_hidden), nn.ReLU(inplace=True),
            *[ResBlock(n_hidden) for _ in range(n_res_block)],
            nn.Conv1d(n_hidden, n_output, kernel_size=1))

    def forward(self, specgram):
        return self.melresnet_model(specgram)


class Stretch2d(nn.Module):
    """Repeat every element ``freq_scale`` times along dim -2 and ``time_scale`` times along
    dim -1."""

    def __init__(self, time_scale: int, freq_scale: int) -> None:
        super().__init__()
        self.freq_scale = freq_scale
        self.time_scale = time_scale

    def forward(self, specgram):
        return specgram.repeat_interleave(self.freq_scale, -2) \
            .repeat_interleave(self.time_scale, -1)


class UpsampleNetwork(nn.Module):
    """Upsamples a spectrogram by prod(upsample_scales) (stretch + smoothing conv per scale)
    and the MelResNet features by stretching; ``forward`` -> (upsampled spectrogram,
    upsampled features), both (batch, channels, (frames - kernel_size + 1) * total_scale)."""

    def __init__(self, upsample_scales: List[int], n_res_block: int = 10, n_freq: int = 128,
                 n_hidden: int = 128, n_output: int = 128, kernel_size: int = 5) -> None:
        super().__init__()
        self.total_scale: int = math.prod(upsample_scales)
        self.indent = (kernel_size - 1) // 2 * self.total_scale
        self.resnet = MelResNet(n_res_block, n_freq, n_hidden, n_output, kernel_size)
        self.resnet_stretch = Stretch2d(self.total_scale, 1)
        layers = []
        for scale in upsample_scales:
            conv = nn.Conv2d(1, 1, kernel_size=(1, 2 * scale + 1), padding=(0, scale),
                             bias=False)
            nn.init.constant_(conv.weight, 1.0 / (2 * scale + 1))
            layers += [Stretch2d(scale, 1), conv]
        self.upsample_layers = nn.Sequential(*layers)

    def forward(self, specgram):
        features = self.resnet_stretch(self.resnet(specgram).unsqueeze(1)).squeeze(1)
        up = self.upsample_layers(specgram.unsqueeze(1)).squeeze(1)
        return up[:, :, self.indent:up.shape[-1] - self.indent], features


class WaveRNN(nn.Module):
    """WaveRNN.

    Args:
        upsample_scales: upsampling factors; their product must equal ``hop_length``.
        n_classes: output classes (2 ** bits).
        hop_length: samples per spectrogram frame.
        n_res_block (10), n_rnn (512), n_fc (512), kernel_size (5), n_freq (128),
        n_hidden (128), n_output (128).

    ``forward(waveform, specgram)``: (batch, 1, (frames - kernel_size + 1) * hop_length) and
    (batch, 1, n_freq, frames) -> logits (batch, 1, samples, n_classes).
    ``infer(specgram, lengths=None)``: (batch, n_freq, frames) -> (waveform in [-1, 1] of shape
    (batch, 1, frames * hop_length), lengths * hop_length), sampling autoregressively.
    """

    def __init__(self, upsample_scales: List[int], n_classes: int, hop_length: int,
                 n_res_block: int = 10, n_rnn: int = 512, n_fc: int = 512,
                 kernel_size: int = 5, n_freq: int = 128, n_hidden: int = 128,
                 n_output: int = 128) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self._pad = (kernel_size - 1 if kernel_size % 2 else kernel_size) // 2
        self.n_rnn = n_rnn
        self.n_aux = n_output // 4
        self.hop_length = hop_length
        self.n_classes = n_classes
        self.n_bits: int = int(math.log2(n_classes))
        total = math.prod(upsample_scales)
        if total != hop_length:
            raise ValueError(f"Expected: total_scale == hop_length, but found {total} != "
                             f"{hop_length}")
        self.upsample = UpsampleNetwork(upsample_scales, n_res_block, n_freq, n_hidden,
                                        n_output, kernel_size)
        self.fc = nn.Linear(n_freq + self.n_aux + 1, n_rnn)
        self.rnn1 = nn.GRU(n_rnn, n_rnn, batch_first=True)
        self.rnn2 = nn.GRU(n_rnn + self.n_aux, n_rnn, batch_first=True)
        self.relu1 = nn.ReLU(inplace=True)
        self.relu2 = nn.ReLU(inplace=True)
        self.fc1 = nn.Linear(n_rnn + self.n_aux, n_fc)
        self.fc2 = nn.Linear(n_fc + self.n_aux, n_fc)
        self.fc3 = nn.Linear(n_fc, n_classes)

    def _aux_parts(self, aux, axis):
        n = self.n_aux
        return [aux.narrow(axis, i * n, n) for i in range(4)]

    def forward(self, waveform, specgram):
        check_input("WaveRNN", waveform, 3, "waveform (batch, 1, samples)", {1: 1})
        n_freq = self.fc.in_features - self.n_aux - 1
        check_input("WaveRNN", specgram, 4, "specgram (batch, 1, n_freq, frames)",
                    {1: 1, 2: n_freq})
        wav, spec = waveform.squeeze(1), specgram.squeeze(1)
        h = wav.new_zeros((1, wav.shape[0], self.n_rnn))
        spec, aux = self.upsample(spec)
        spec, aux = spec.transpose(1, 2), aux.transpose(1, 2)
        if spec.shape[1] != wav.shape[1]:
            raise ValueError(f"WaveRNN: the waveform has {wav.shape[1]} samples but the "
                             f"specgram upsamples to {spec.shape[1]} ((frames - kernel_size + 1)"
                             " * hop_length)")
        a1, a2, a3, a4 = self._aux_parts(aux, 2)
        x = self.fc(fiamma.cat([wav.unsqueeze(-1), spec, a1], dim=-1))
        x = x + self.rnn1(x, h)[0]
        x = x + self.rnn2(fiamma.cat([x, a2], dim=-1), h)[0]
        x = self.relu1(self.fc1(fiamma.cat([x, a3], dim=-1)))
        x = self.relu2(self.fc2(fiamma.cat([x, a4], dim=-1)))
        return self.fc3(x).unsqueeze(1)

    def infer(self, specgram, lengths: Optional["fiamma.Tensor"] = None
              ) -> Tuple["fiamma.Tensor", Optional["fiamma.Tensor"]]:
        n_freq = self.fc.in_features - self.n_aux - 1
        check_input("WaveRNN.infer", specgram, 3, "specgram (batch, n_freq, frames)",
                    {1: n_freq})
        F = nn.functional
        spec, aux = self.upsample(F.pad(specgram, (self._pad, self._pad)))
        if lengths is not None:
            lengths = lengths * self.upsample.total_scale
        batch, _, steps = spec.shape
        h1 = spec.new_zeros((1, batch, self.n_rnn))
        h2 = spec.new_zeros((1, batch, self.n_rnn))
        x = spec.new_zeros((batch, 1))
        parts = self._aux_parts(aux, 1)
        samples = []
        for t in range(steps):
            a1, a2, a3, a4 = (p[:, :, t] for p in parts)
            x = self.fc(fiamma.cat([x, spec[:, :, t], a1], dim=1))
            _, h1 = self.rnn1(x.unsqueeze(1), h1)
            x = x + h1[0]
            _, h2 = self.rnn2(fiamma.cat([x, a2], dim=1).unsqueeze(1), h2)
            x = x + h2[0]
            x = F.relu(self.fc1(fiamma.cat([x, a3], dim=1)))
            x = F.relu(self.fc2(fiamma.cat([x, a4], dim=1)))
            probs = F.softmax(self.fc3(x), dim=1)
            x = fiamma.multinomial(probs, 1).float()
            x = 2 * x / (2 ** self.n_bits - 1.0) - 1.0
            samples.append(x)
        return fiamma.stack(samples).permute(1, 2, 0), lengths
