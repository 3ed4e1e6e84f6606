"""Hybrid Demucs (Défossez, 2021): music source separation with two U-Nets, one on the complex
spectrogram (real and imaginary parts as channels) and one on the waveform, that share their
innermost layers; the sources are the sum of both branches' outputs. Module and parameter
names, constructor arguments and defaults follow torchaudio.models.HDemucs (and
hdemucs_low/medium/high), so its checkpoints load by key."""

import math
from typing import Any, Dict, List, Optional

import fiamma
from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["HDemucs", "hdemucs_low", "hdemucs_medium", "hdemucs_high"]

F = nn.functional


class _ScaledEmbedding(nn.Module):
    """Embedding whose stored weight is divided by ``scale`` and whose output is multiplied
    back (a larger effective learning rate); ``smooth`` starts it as running means of the
    random rows."""

    def __init__(self, num_embeddings: int, embedding_dim: int, scale: float = 10.0,
                 smooth: bool = False):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)
        with fiamma.no_grad():
            w = self.embedding.weight
            if smooth:
                counts = fiamma.arange(1, num_embeddings + 1, dtype=w.dtype).sqrt()
                w.copy_(fiamma.cumsum(w, dim=0) / counts[:, None])
            w.div_(scale)
        self.scale = scale

    @property
    def weight(self):
        return self.embedding.weight * self.scale

    def forward(self, x):
        return self.embedding(x) * self.scale


def _norm_factory(norm_type, groups):
    if norm_type == "group_norm":
        return lambda d: nn.GroupNorm(groups, d)
    return lambda d: nn.Identity()


class _HEncLayer(nn.Module):
    """Encoder layer: strided conv (along frequency for the spectrogram branch, time for the
    waveform one), norm, GELU, residual dilated conv branch, 1x1 (or context) conv + GLU.
    ``empty`` keeps only the strided conv."""

    def __init__(self, chin: int, chout: int, kernel_size: int = 8, stride: int = 4,
                 norm_groups: int = 4, empty: bool = False, freq: bool = True,
                 norm_type: str = "group_norm", context: int = 0,
                 dconv_kw: Optional[Dict[str, Any]] = None, pad: bool = True):
        super().__init__()
        norm = _norm_factory(norm_type, norm_groups)
        pad_val = kernel_size // 4 if pad else 0
        self.freq = freq
        self.kernel_size = kernel_size
        self.stride = stride
        self.empty = empty
        self.pad = pad_val
        if freq:
            self.conv = nn.Conv2d(chin, chout, (kernel_size, 1), (stride, 1), (pad_val, 0))
            conv = nn.Conv2d
        else:
            self.conv = nn.Conv1d(chin, chout, kernel_size, stride, pad_val)
            conv = nn.Conv1d
        self.norm1 = norm(chout)
        if empty:
            self.rewrite = nn.Identity()
            self.norm2 = nn.Identity()
            self.dconv = nn.Identity()
        else:
            self.rewrite = conv(chout, 2 * chout, 1 + 2 * context, 1, context)
            self.norm2 = norm(2 * chout)
            self.dconv = _DConv(chout, **(dconv_kw or {}))

    def forward(self, x, inject=None):
        if not self.freq:
            if x.dim() == 4:
                x = x.reshape(x.shape[0], -1, x.shape[-1])
            rest = x.shape[-1] % self.stride
            if rest:
                x = F.pad(x, (0, self.stride - rest))
        y = self.conv(x)
        if self.empty:
            return y
        if inject is not None:
            if inject.shape[-1] != y.shape[-1]:
                raise ValueError("Injection shapes do not align")
            if inject.dim() == 3 and y.dim() == 4:
                inject = inject[:, :, None]
            y = y + inject
        y = F.gelu(self.norm1(y))
        if self.freq:
            b, c, fr, t = y.shape
            y = self.dconv(y.permute(0, 2, 1, 3).reshape(-1, c, t))
            y = y.view(b, fr, c, t).permute(0, 2, 1, 3)
        else:
            y = self.dconv(y)
        return F.glu(self.norm2(self.rewrite(y)), dim=1)


class _HDecLayer(nn.Module):
    """Decoder layer: add the skip, context conv + GLU, transposed strided conv, norm, GELU
    (not on the last layer); ``forward`` returns (output, the pre-upsampling features)."""

    def __init__(self, chin: int, chout: int, last: bool = False, kernel_size: int = 8,
                 stride: int = 4, norm_groups: int = 1, empty: bool = False, freq: bool = True,
                 norm_type: str = "group_norm", context: int = 1,
                 dconv_kw: Optional[Dict[str, Any]] = None, pad: bool = True):
        super().__init__()
        norm = _norm_factory(norm_type, norm_groups)
        if pad:
            if (kernel_size - stride) % 2:
                raise ValueError("Kernel size and stride do not align")
            pad = (kernel_size - stride) // 2
        else:
            pad = 0
        self.pad = pad
        self.last = last
        self.freq = freq
        self.chin = chin
        self.empty = empty
        self.stride = stride
        self.kernel_size = kernel_size
        if freq:
            self.conv_tr = nn.ConvTranspose2d(chin, chout, (kernel_size, 1), (stride, 1))
            conv = nn.Conv2d
        else:
            self.conv_tr = nn.ConvTranspose1d(chin, chout, kernel_size, stride)
            conv = nn.Conv1d
        self.norm2 = norm(chout)
        if empty:
            self.rewrite = nn.Identity()
            self.norm1 = nn.Identity()
        else:
            self.rewrite = conv(chin, 2 * chin, 1 + 2 * context, 1, context)
            self.norm1 = norm(2 * chin)

    def forward(self, x, skip, length):
        if self.freq and x.dim() == 3:
            x = x.view(x.shape[0], self.chin, -1, x.shape[-1])
        if self.empty:
            if skip is not None:
                raise ValueError("Skip must be none when empty is true.")
            y = x
        else:
            y = F.glu(self.norm1(self.rewrite(x + skip)), dim=1)
        z = self.norm2(self.conv_tr(y))
        if self.freq:
            if self.pad:
                z = z[..., self.pad:z.shape[-2] - self.pad, :]
        else:
            z = z[..., self.pad:self.pad + length]
            if z.shape[-1] != length:
                raise ValueError("Last index of z must be equal to length")
        if not self.last:
            z = F.gelu(z)
        return z, y


class _LayerScale(nn.Module):
    """Per-channel learned scale, initialised to ``init``."""

    def __init__(self, channels: int, init: float = 0):
        super().__init__()
        self.scale = nn.Parameter(fiamma.full((channels,), float(init)))

    def forward(self, x):
        return self.scale[:, None] * x


class _BLSTM(nn.Module):
    """Bidirectional 2-layer LSTM + linear over (B, C, T); sequences longer than 200 steps run
    in half-overlapping windows of 200 whose centres are kept."""

    def __init__(self, dim, layers: int = 1, skip: bool = False):
        super().__init__()
        self.max_steps = 200
        self.lstm = nn.LSTM(bidirectional=True, num_layers=layers, hidden_size=dim,
                            input_size=dim)
        self.linear = nn.Linear(2 * dim, dim)
        self.skip = skip

    def forward(self, x):
        b, c, t = x.shape
        y = x
        width = self.max_steps
        framed = width is not None and t > width
        if framed:
            stride = width // 2
            frames = _unfold(x, width, stride)
            n_frames = frames.shape[2]
            x = frames.permute(0, 2, 1, 3).reshape(-1, c, width)
        h = self.linear(self.lstm(x.permute(2, 0, 1))[0]).permute(1, 2, 0)
        if framed:
            frames = h.reshape(b, -1, c, width)
            cut = stride // 2
            pieces = []
            for k in range(n_frames):
                lo = 0 if k == 0 else cut
                hi = width if k == n_frames - 1 else width - cut
                pieces.append(frames[:, k, :, lo:hi])
            h = fiamma.cat(pieces, -1)[..., :t]
        return h + y if self.skip else h


class _LocalState(nn.Module):
    """Local self-attention over time with learned per-head distance decays."""

    def __init__(self, channels: int, heads: int = 4, ndecay: int = 4):
        super().__init__()
        if channels % heads:
            raise ValueError("Channels must be divisible by heads.")
        self.heads = heads
        self.ndecay = ndecay
        self.content = nn.Conv1d(channels, channels, 1)
        self.query = nn.Conv1d(channels, channels, 1)
        self.key = nn.Conv1d(channels, channels, 1)
        self.query_decay = nn.Conv1d(channels, heads * ndecay, 1)
        if ndecay:
            with fiamma.no_grad():
                self.query_decay.weight.mul_(0.01)
                self.query_decay.bias.fill_(-2.0)
        self.proj = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        b, c, t = x.shape
        h = self.heads
        steps = fiamma.arange(t, device=x.device, dtype=x.dtype)
        delta = steps[:, None] - steps[None, :]
        queries = self.query(x).view(b, h, -1, t)
        keys = self.key(x).view(b, h, -1, t)
        dots = fiamma.einsum("bhct,bhcs->bhts", keys, queries) / math.sqrt(keys.shape[2])
        if self.ndecay:
            decays = fiamma.arange(1, self.ndecay + 1, device=x.device, dtype=x.dtype)
            decay_q = fiamma.sigmoid(self.query_decay(x).view(b, h, -1, t)) / 2
            kernel = -decays.view(-1, 1, 1) * delta.abs() / math.sqrt(self.ndecay)
            dots = dots + fiamma.einsum("fts,bhfs->bhts", kernel, decay_q)
        dots = dots.masked_fill(fiamma.eye(t, device=x.device, dtype=fiamma.bool), -100)
        weights = fiamma.softmax(dots, dim=2)
        content = self.content(x).view(b, h, -1, t)
        out = fiamma.einsum("bhts,bhct->bhcs", weights, content).reshape(b, -1, t)
        return x + self.proj(out)


class _DConv(nn.Module):
    """Residual stack of dilated conv branches (conv, norm, GELU, [BLSTM], [local attention],
    1x1 conv, norm, GLU, layer scale)."""

    def __init__(self, channels: int, compress: float = 4, depth: int = 2, init: float = 1e-4,
                 norm_type: str = "group_norm", attn: bool = False, heads: int = 4,
                 ndecay: int = 4, lstm: bool = False, kernel_size: int = 3):
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError("Kernel size should not be divisible by 2")
        self.channels = channels
        self.compress = compress
        self.depth = abs(depth)
        norm = _norm_factory(norm_type, 1)
        hidden = int(channels / compress)
        self.layers = nn.ModuleList()
        for d in range(self.depth):
            dilation = 2 ** d if depth > 0 else 1
            mods = [nn.Conv1d(channels, hidden, kernel_size, dilation=dilation,
                              padding=dilation * (kernel_size // 2)),
                    norm(hidden), nn.GELU()]
            if lstm:
                mods.append(_BLSTM(hidden, layers=2, skip=True))
            if attn:
                mods.append(_LocalState(hidden, heads=heads, ndecay=ndecay))
            mods += [nn.Conv1d(hidden, 2 * channels, 1), norm(2 * channels), nn.GLU(1),
                     _LayerScale(channels, init)]
            self.layers.append(nn.Sequential(*mods))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


def _unfold(a, kernel_size, stride):
    """Frames of ``kernel_size`` every ``stride`` along the last dim (zero-padded at the end):
    (..., T) -> (..., ceil(T / stride), kernel_size)."""
    length = a.shape[-1]
    n_frames = math.ceil(length / stride)
    a = F.pad(a, [0, (n_frames - 1) * stride + kernel_size - length])
    return a.unfold(-1, kernel_size, stride)


def _rescale_module(module):
    """Scale every convolution's weight and bias by 1 / sqrt(std(weight) / 0.1)."""
    with fiamma.no_grad():
        for sub in module.modules():
            if isinstance(sub, (nn.Conv1d, nn.ConvTranspose1d, nn.Conv2d, nn.ConvTranspose2d)):
                scale = (sub.weight.std() / 0.1) ** 0.5
                sub.weight.div_(scale)
                if sub.bias is not None:
                    sub.bias.div_(scale)


def _spectro(x, n_fft, hop_length):
    lead = list(x.shape[:-1])
    window = fiamma.hann_window(n_fft, dtype=x.dtype, device=x.device)
    z = fiamma.stft(x.reshape(-1, x.shape[-1]), n_fft, hop_length, window=window,
                    win_length=n_fft, normalized=True, center=True, return_complex=True,
                    pad_mode="reflect")
    return z.view(lead + list(z.shape[-2:]))


def _ispectro(z, hop_length, length):
    lead = list(z.shape[:-2])
    freqs, frames = z.shape[-2], z.shape[-1]
    n_fft = 2 * freqs - 2
    window = fiamma.hann_window(n_fft, dtype=z.real.dtype, device=z.device)
    x = fiamma.istft(z.reshape(-1, freqs, frames), n_fft, hop_length, window=window,
                     win_length=n_fft, normalized=True, length=length, center=True)
    return x.view(lead + [x.shape[-1]])


class HDemucs(nn.Module):
    """Hybrid Demucs.

    Args:
        sources: names of the sources to separate (e.g. ["drums", "bass", "other", "vocals"]).
        audio_channels (2), channels (48), growth (2), nfft (4096), depth (6), freq_emb (0.2),
        emb_scale (10), emb_smooth (True), kernel_size (8), time_stride (2), stride (4),
        context (1), context_enc (0), norm_starts (4), norm_groups (4), dconv_depth (2),
        dconv_comp (4), dconv_attn (4), dconv_lstm (4), dconv_init (1e-4): as torchaudio's.

    ``forward(input)``: (batch, audio_channels, frames) -> (batch, len(sources),
    audio_channels, frames).
    """

    def __init__(self, sources: List[str], audio_channels: int = 2, channels: int = 48,
                 growth: int = 2, nfft: int = 4096, depth: int = 6, freq_emb: float = 0.2,
                 emb_scale: int = 10, emb_smooth: bool = True, kernel_size: int = 8,
                 time_stride: int = 2, stride: int = 4, context: int = 1, context_enc: int = 0,
                 norm_starts: int = 4, norm_groups: int = 4, dconv_depth: int = 2,
                 dconv_comp: int = 4, dconv_attn: int = 4, dconv_lstm: int = 4,
                 dconv_init: float = 1e-4):
        super().__init__()
        self.depth = depth
        self.nfft = nfft
        self.audio_channels = audio_channels
        self.sources = sources
        self.kernel_size = kernel_size
        self.context = context
        self.stride = stride
        self.channels = channels
        self.hop_length = nfft // 4
        self.freq_emb = None
        self.freq_encoder = nn.ModuleList()
        self.freq_decoder = nn.ModuleList()
        self.time_encoder = nn.ModuleList()
        self.time_decoder = nn.ModuleList()
        chin, chout = audio_channels, channels           # waveform branch
        chin_z, chout_z = 2 * audio_channels, channels   # spectrogram branch (re/im channels)
        freqs = nfft // 2
        for index in range(depth):
            freq = freqs > 1
            ker, stri, pad, last_freq = kernel_size, stride, True, False
            if not freq:
                if freqs != 1:
                    raise ValueError("When freq is false, freqs must be 1.")
                ker, stri = 2 * time_stride, time_stride
            if freq and freqs <= kernel_size:
                ker, pad, last_freq = freqs, False, True
            kw = {"kernel_size": ker, "stride": stri, "freq": freq, "pad": pad,
                  "norm_type": "group_norm" if index >= norm_starts else "none",
                  "norm_groups": norm_groups,
                  "dconv_kw": {"lstm": index >= dconv_lstm, "attn": index >= dconv_attn,
                               "depth": dconv_depth, "compress": dconv_comp,
                               "init": dconv_init}}
            kwt = dict(kw, freq=False, kernel_size=kernel_size, stride=stride, pad=True)
            if last_freq:
                chout_z = max(chout, chout_z)
                chout = chout_z
            self.freq_encoder.append(_HEncLayer(chin_z, chout_z, context=context_enc, **kw))
            if freq:
                if last_freq and nfft == 2048:
                    kwt["stride"], kwt["kernel_size"] = 2, 4
                self.time_encoder.append(_HEncLayer(chin, chout, context=context_enc,
                                                    empty=last_freq, **kwt))
            if index == 0:
                chin = audio_channels * len(sources)
                chin_z = 2 * chin
            self.freq_decoder.insert(0, _HDecLayer(chout_z, chin_z, last=index == 0,
                                                   context=context, **kw))
            if freq:
                self.time_decoder.insert(0, _HDecLayer(chout, chin, empty=last_freq,
                                                       last=index == 0, context=context,
                                                       **kwt))
            chin, chin_z = chout, chout_z
            chout, chout_z = int(growth * chout), int(growth * chout_z)
            if freq:
                freqs = 1 if freqs <= kernel_size else freqs // stride
            if index == 0 and freq_emb:
                self.freq_emb = _ScaledEmbedding(freqs, chin_z, smooth=emb_smooth,
                                                 scale=emb_scale)
                self.freq_emb_scale = freq_emb
        _rescale_module(self)

    def _pad1d(self, x, padding_left: int, padding_right: int, mode: str = "zero",
               value: float = 0.0):
        if mode == "reflect":
            widest = max(padding_left, padding_right)
            if x.shape[-1] <= widest:
                x = F.pad(x, (0, widest - x.shape[-1] + 1))
        return F.pad(x, (padding_left, padding_right), mode, value)

    def _spec(self, x):
        hl = self.hop_length
        if hl != self.nfft // 4:
            raise ValueError("Hop length must be nfft // 4")
        frames = math.ceil(x.shape[-1] / hl)
        pad = hl // 2 * 3
        x = self._pad1d(x, pad, pad + frames * hl - x.shape[-1], mode="reflect")
        z = _spectro(x, self.nfft, hl)[..., :-1, :]
        if z.shape[-1] != frames + 4:
            raise ValueError("Spectrogram's last dimension must be 4 + input size divided by "
                             "stride")
        return z[..., 2:2 + frames]

    def _ispec(self, z, length):
        hl = self.hop_length
        # restore the dropped top frequency bin and the two frames cut on each side
        zr = F.pad(fiamma.view_as_real(z), [0, 0, 2, 2, 0, 1])
        pad = hl // 2 * 3
        full = hl * math.ceil(length / hl) + 2 * pad
        x = _ispectro(fiamma.view_as_complex(zr), hl, full)
        return x[..., pad:pad + length]

    def _magnitude(self, z):
        b, c, fr, t = z.shape
        return fiamma.view_as_real(z).permute(0, 1, 4, 2, 3).reshape(b, 2 * c, fr, t)

    def _mask(self, m):
        b, s, c, fr, t = m.shape
        out = m.view(b, s, -1, 2, fr, t).permute(0, 1, 2, 4, 5, 3)
        return fiamma.view_as_complex(out.contiguous())

    def forward(self, input):
        check_input("HDemucs", input, 3, "(batch, audio_channels, frames)",
                    {1: self.audio_channels})
        length = input.shape[-1]
        x = self._magnitude(self._spec(input))
        b, _, fq, t = x.shape
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        std = x.std(dim=(1, 2, 3), keepdim=True)
        x = (x - mean) / (1e-5 + std)
        meant = input.mean(dim=(1, 2), keepdim=True)
        stdt = input.std(dim=(1, 2), keepdim=True)
        xt = (input - meant) / (1e-5 + stdt)

        saved, saved_t, lengths, lengths_t = [], [], [], []
        for idx, encode in enumerate(self.freq_encoder):
            lengths.append(x.shape[-1])
            inject = None
            if idx < len(self.time_encoder):
                lengths_t.append(xt.shape[-1])
                tenc = self.time_encoder[idx]
                xt = tenc(xt)
                if tenc.empty:
                    inject = xt          # the shared layers take the time branch as input
                else:
                    saved_t.append(xt)
            x = encode(x, inject)
            if idx == 0 and self.freq_emb is not None:
                emb = self.freq_emb(fiamma.arange(x.shape[-2], device=x.device))
                x = x + self.freq_emb_scale * emb.t()[None, :, :, None].expand_as(x)
            saved.append(x)

        x = fiamma.zeros_like(x)
        xt = fiamma.zeros_like(x)
        offset = self.depth - len(self.time_decoder)
        for idx, decode in enumerate(self.freq_decoder):
            x, pre = decode(x, saved.pop(-1), lengths.pop(-1))
            if idx >= offset:
                tdec = self.time_decoder[idx - offset]
                length_t = lengths_t.pop(-1)
                if tdec.empty:
                    if pre.shape[2] != 1:
                        raise ValueError("If tdec empty is True, pre shape does not match "
                                         f"{tuple(pre.shape)}")
                    xt, _ = tdec(pre[:, :, 0], None, length_t)
                else:
                    xt, _ = tdec(xt, saved_t.pop(-1), length_t)
        if saved or saved_t or lengths_t:
            raise AssertionError("HDemucs: unbalanced encoder/decoder skips")

        n_src = len(self.sources)
        x = x.view(b, n_src, -1, fq, t) * std[:, None] + mean[:, None]
        x = self._ispec(self._mask(x), length)
        xt = xt.view(b, n_src, -1, length) * stdt[:, None] + meant[:, None]
        return xt + x


def hdemucs_low(sources: List[str]) -> HDemucs:
    """HDemucs for 8 kHz audio (nfft 1024, depth 5)."""
    return HDemucs(sources=sources, nfft=1024, depth=5)


def hdemucs_medium(sources: List[str]) -> HDemucs:
    """HDemucs for 16-32 kHz audio (nfft 2048, depth 6)."""
    return HDemucs(sources=sources, nfft=2048, depth=6)


def hdemucs_high(sources: List[str]) -> HDemucs:
    """HDemucs for 44.1-48 kHz audio (nfft 4096, depth 6)."""
    return HDemucs(sources=sources, nfft=4096, depth=6)
