"""SQUIM objective: a reference-free estimator of STOI, wide-band PESQ and SI-SDR
(torchaudio.models.SquimObjective; Kumar et al., 2023).

waveform -> conv encoder -> dual-path RNN over overlapping chunks -> three branches
(transformer layer, auto-pooling over time, MLP), one score per branch. Submodule and
parameter names follow torchaudio, so its published checkpoint loads as is.
"""

import math

import fiamma
from fiamma import nn
from fiamma.nn import functional as F

__all__ = ["SquimObjective", "squim_objective_model", "squim_objective_base"]


def transform_wb_pesq_range(x):
    """Map a narrow-band PESQ score (ITU-T P.862) to the wide-band scale (P.862.2)."""
    return 0.999 + 4.0 / (1.0 + math.exp(3.8224 - 1.3669 * x))


# wide-band PESQ's lower end is taken as 1.0; the upper end is where narrow-band 4.5 maps
PESQRange = (1.0, transform_wb_pesq_range(4.5))


class RangeSigmoid(nn.Module):
    """``low + (high - low) * sigmoid(x)`` for ``val_range = (low, high)``."""

    def __init__(self, val_range=(0.0, 1.0)):
        super().__init__()
        if not (isinstance(val_range, tuple) and len(val_range) == 2):
            raise ValueError("RangeSigmoid: val_range must be a (low, high) tuple, got "
                             f"{val_range!r}")
        self.val_range = val_range
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        low, high = self.val_range
        return self.sigmoid(x) * (high - low) + low


class Encoder(nn.Module):
    """(batch, time) waveforms -> (batch, feat_dim, frame) by one bias-free strided conv
    (stride ``win_len // 2``) and ReLU."""

    def __init__(self, feat_dim=512, win_len=32):
        super().__init__()
        self.conv1d = nn.Conv1d(1, feat_dim, win_len, stride=win_len // 2, bias=False)

    def forward(self, x):
        return F.relu(self.conv1d(x.unsqueeze(1)))


class SingleRNN(nn.Module):
    """A one-layer bidirectional RNN (``rnn_type`` names the ``nn`` class) on (batch, seq, dim)
    with a linear map of both directions back to ``input_size``."""

    def __init__(self, rnn_type, input_size, hidden_size, dropout=0.0):
        super().__init__()
        if rnn_type not in ("RNN", "LSTM", "GRU"):
            raise ValueError("SingleRNN: rnn_type must be one of 'RNN', 'LSTM', 'GRU', got "
                             f"{rnn_type!r}")
        self.rnn_type = rnn_type
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.rnn = getattr(nn, rnn_type)(input_size, hidden_size, 1, dropout=dropout,
                                         batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden_size, input_size)

    def forward(self, x):
        return self.proj(self.rnn(x)[0])


class DPRNN(nn.Module):
    """Dual-path RNN (Luo et al., 2020): the frame axis is cut into half-overlapping chunks of
    ``chunk_size``; each block runs an RNN along every chunk and one across chunks (each
    followed by a one-group GroupNorm and a residual add); a 1x1 conv + PReLU maps
    ``feat_dim`` to ``d_model`` and the chunks are overlap-added back.

    (batch, feat_dim, frame) -> (batch, frame, d_model)."""

    def __init__(self, feat_dim=64, hidden_dim=128, num_blocks=6, rnn_type="LSTM", d_model=256,
                 chunk_size=100, chunk_stride=50):
        super().__init__()
        self.num_blocks = num_blocks
        self.row_rnn = nn.ModuleList()
        self.col_rnn = nn.ModuleList()
        self.row_norm = nn.ModuleList()
        self.col_norm = nn.ModuleList()
        for _ in range(num_blocks):
            self.row_rnn.append(SingleRNN(rnn_type, feat_dim, hidden_dim))
            self.col_rnn.append(SingleRNN(rnn_type, feat_dim, hidden_dim))
            self.row_norm.append(nn.GroupNorm(1, feat_dim, eps=1e-8))
            self.col_norm.append(nn.GroupNorm(1, feat_dim, eps=1e-8))
        self.conv = nn.Sequential(nn.Conv2d(feat_dim, d_model, 1), nn.PReLU())
        self.chunk_size = chunk_size
        self.chunk_stride = chunk_stride

    def pad_chunk(self, x):
        """Pad (batch, dim, frame) by ``chunk_stride`` on the left and ``rest + chunk_stride``
        on the right so the middle splits into whole chunks; returns (padded, rest)."""
        size, stride = self.chunk_size, self.chunk_stride
        rest = size - (stride + x.shape[-1] % size) % size
        return F.pad(x, [stride, rest + stride]), rest

    def chunking(self, x):
        """(batch, dim, frame) -> (batch, dim, chunk_size, n_chunks), rest."""
        padded, rest = self.pad_chunk(x)
        b, d, _ = padded.shape
        size, stride = self.chunk_size, self.chunk_stride
        # the chunks starting at 0, size, 2*size, ... and those starting at stride, ...
        first = padded[:, :, :-stride].reshape(b, d, -1, size)
        second = padded[:, :, stride:].reshape(b, d, -1, size)
        chunks = fiamma.cat([first, second], dim=3).reshape(b, d, -1, size)
        return chunks.transpose(2, 3).contiguous(), rest

    def merging(self, x, rest):
        """Overlap-add (batch, dim, chunk_size, n_chunks) back to (batch, dim, frame)."""
        b, d = x.shape[:2]
        size, stride = self.chunk_size, self.chunk_stride
        pairs = x.transpose(2, 3).reshape(b, d, -1, 2 * size)
        first = pairs[..., :size].reshape(b, d, -1)[:, :, stride:]
        second = pairs[..., size:].reshape(b, d, -1)[:, :, :-stride]
        out = first + second
        if rest > 0:
            out = out[:, :, :-rest]
        return out.contiguous()

    def forward(self, x):
        if x.ndim != 3:
            raise ValueError("DPRNN: expected a 3-D input (batch, feat_dim, frame), got shape "
                             f"{list(x.shape)}")
        out, rest = self.chunking(x)
        b, _, size, n = out.shape
        for row_rnn, row_norm, col_rnn, col_norm in zip(self.row_rnn, self.row_norm,
                                                        self.col_rnn, self.col_norm):
            # intra-chunk: one sequence per chunk, along its chunk_size frames
            rows = out.permute(0, 3, 2, 1).reshape(b * n, size, -1)
            rows = row_rnn(rows).reshape(b, n, size, -1).permute(0, 3, 2, 1)
            out = out + row_norm(rows)
            # inter-chunk: one sequence per position in the chunk, across the n chunks
            cols = out.permute(0, 2, 3, 1).reshape(b * size, n, -1)
            cols = col_rnn(cols).reshape(b, size, n, -1).permute(0, 3, 1, 2)
            out = out + col_norm(cols)
        out = self.merging(self.conv(out), rest)
        return out.transpose(1, 2).contiguous()


class AutoPool(nn.Module):
    """Auto-pooling over ``pool_dim``: a softmax(alpha * x)-weighted sum, alpha learnt."""

    def __init__(self, pool_dim=1):
        super().__init__()
        self.pool_dim = pool_dim
        self.softmax = nn.Softmax(dim=pool_dim)
        self.register_parameter("alpha", nn.Parameter(fiamma.ones(1)))

    def forward(self, x):
        weight = self.softmax(x * self.alpha)
        return (x * weight).sum(dim=self.pool_dim)


class SquimObjective(nn.Module):
    """SQUIM objective model: ``forward(x)`` with ``x`` of shape (batch, time) (16 kHz
    speech) returns the list ``[stoi, pesq, si_sdr]`` of (batch,) estimates.

    Each waveform is first scaled to an RMS of 1/20.
    """

    def __init__(self, encoder, dprnn, branches):
        super().__init__()
        self.encoder = encoder
        self.dprnn = dprnn
        self.branches = branches

    def forward(self, x):
        if x.ndim != 2:
            raise ValueError("SquimObjective: expected a 2-D input (batch, time), got shape "
                             f"{list(x.shape)} ({x.ndim}-D)")
        x = x / (20.0 * x.pow(2).mean(dim=1, keepdim=True).sqrt())
        out = self.dprnn(self.encoder(x))
        return [branch(out).squeeze(1) for branch in self.branches]


def _create_branch(d_model, nhead, metric):
    """transformer layer -> AutoPool -> Linear/PReLU/Linear (-> the metric's range)."""
    head = [nn.Linear(d_model, d_model), nn.PReLU(), nn.Linear(d_model, 1)]
    if metric == "stoi":
        head.append(RangeSigmoid())
    elif metric == "pesq":
        head.append(RangeSigmoid(val_range=PESQRange))
    layer = nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model, dropout=0.0,
                                       batch_first=True)
    return nn.Sequential(layer, AutoPool(), nn.Sequential(*head))


def squim_objective_model(feat_dim, win_len, d_model, nhead, hidden_dim, num_blocks, rnn_type,
                          chunk_size, chunk_stride=None):
    """A :class:`SquimObjective` of the given size (``chunk_stride`` defaults to half the
    chunk); branches in the order STOI, PESQ, SI-SDR."""
    if chunk_stride is None:
        chunk_stride = chunk_size // 2
    if chunk_size < 1 or chunk_stride < 1:
        raise ValueError("squim_objective_model: chunk_size and chunk_stride must be positive, "
                         f"got chunk_size={chunk_size}, chunk_stride={chunk_stride}")
    encoder = Encoder(feat_dim, win_len)
    dprnn = DPRNN(feat_dim, hidden_dim, num_blocks, rnn_type, d_model, chunk_size, chunk_stride)
    branches = nn.ModuleList([_create_branch(d_model, nhead, m)
                              for m in ("stoi", "pesq", "sisdr")])
    return SquimObjective(encoder, dprnn, branches)


def squim_objective_base():
    """The published size: feat_dim=256, win_len=64, d_model=256, 4 heads, LSTM hidden 256,
    2 dual-path blocks, chunks of 71 frames."""
    return squim_objective_model(feat_dim=256, win_len=64, d_model=256, nhead=4, hidden_dim=256,
                                 num_blocks=2, rnn_type="LSTM", chunk_size=71)
