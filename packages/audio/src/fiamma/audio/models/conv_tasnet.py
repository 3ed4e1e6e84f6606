"""Conv-TasNet (Luo & Mesgarani, 2019): time-domain source separation with a learned encoder,
a temporal convolutional mask generator and a transposed-convolution decoder. Module and
parameter names follow torchaudio.models.ConvTasNet, so its checkpoints load by key."""

import fiamma
from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["ConvTasNet", "conv_tasnet_base"]


def _global_norm(channels):
    return nn.GroupNorm(num_groups=1, num_channels=channels, eps=1e-8)


class ConvBlock(nn.Module):
    """1x1 conv, PReLU, norm, dilated depthwise conv, PReLU, norm; then a residual 1x1 conv
    (absent with ``no_residual``) and a skip 1x1 conv. ``forward`` returns (residual, skip)."""

    def __init__(self, io_channels: int, hidden_channels: int, kernel_size: int, padding: int,
                 dilation: int = 1, no_residual: bool = False):
        super().__init__()
        self.conv_layers = nn.Sequential(
            nn.Conv1d(io_channels, hidden_channels, kernel_size=1),
            nn.PReLU(),
            _global_norm(hidden_channels),
            nn.Conv1d(hidden_channels, hidden_channels, kernel_size=kernel_size, padding=padding,
                      dilation=dilation, groups=hidden_channels),
            nn.PReLU(),
            _global_norm(hidden_channels),
        )
        self.res_out = (None if no_residual
                        else nn.Conv1d(hidden_channels, io_channels, kernel_size=1))
        self.skip_out = nn.Conv1d(hidden_channels, io_channels, kernel_size=1)

    def forward(self, input):
        h = self.conv_layers(input)
        return (None if self.res_out is None else self.res_out(h)), self.skip_out(h)


class MaskGenerator(nn.Module):
    """Temporal convolution network producing one mask per source:
    (batch, input_dim, frames) -> (batch, num_sources, input_dim, frames)."""

    def __init__(self, input_dim: int, num_sources: int, kernel_size: int, num_feats: int,
                 num_hidden: int, num_layers: int, num_stacks: int, msk_activate: str):
        super().__init__()
        self.input_dim = input_dim
        self.num_sources = num_sources
        self.input_norm = _global_norm(input_dim)
        self.input_conv = nn.Conv1d(input_dim, num_feats, kernel_size=1)
        self.receptive_field = 0
        blocks = []
        for stack in range(num_stacks):
            for layer in range(num_layers):
                d = 2 ** layer
                last = stack == num_stacks - 1 and layer == num_layers - 1
                blocks.append(ConvBlock(num_feats, num_hidden, kernel_size, padding=d,
                                        dilation=d, no_residual=last))
                first = stack == 0 and layer == 0
                self.receptive_field += kernel_size if first else (kernel_size - 1) * d
        self.conv_layers = nn.ModuleList(blocks)
        self.output_prelu = nn.PReLU()
        self.output_conv = nn.Conv1d(num_feats, input_dim * num_sources, kernel_size=1)
        activations = {"sigmoid": nn.Sigmoid, "relu": nn.ReLU}
        if msk_activate not in activations:
            raise ValueError(f"Unsupported activation {msk_activate} "
                             "(ConvTasNet: expected 'sigmoid' or 'relu')")
        self.mask_activate = activations[msk_activate]()

    def forward(self, input):
        feats = self.input_conv(self.input_norm(input))
        total = None
        for block in self.conv_layers:
            residual, skip = block(feats)
            if residual is not None:
                feats = feats + residual
            total = skip if total is None else total + skip
        masks = self.mask_activate(self.output_conv(self.output_prelu(total)))
        return masks.view(input.shape[0], self.num_sources, self.input_dim, -1)


class ConvTasNet(nn.Module):
    """Conv-TasNet.

    Args:
        num_sources: sources to separate (default 2).
        enc_kernel_size: encoder/decoder kernel; the stride is half of it (default 16).
        enc_num_feats: encoder channels (default 512).
        msk_kernel_size, msk_num_feats, msk_num_hidden_feats, msk_num_layers, msk_num_stacks:
            mask generator sizes (defaults 3, 128, 512, 8, 3).
        msk_activate: ``"sigmoid"`` (default) or ``"relu"``.

    ``forward(input)``: (batch, 1, frames) -> (batch, num_sources, frames).
    """

    def __init__(self, num_sources: int = 2, enc_kernel_size: int = 16,
                 enc_num_feats: int = 512, msk_kernel_size: int = 3, msk_num_feats: int = 128,
                 msk_num_hidden_feats: int = 512, msk_num_layers: int = 8,
                 msk_num_stacks: int = 3, msk_activate: str = "sigmoid"):
        super().__init__()
        self.num_sources = num_sources
        self.enc_num_feats = enc_num_feats
        self.enc_kernel_size = enc_kernel_size
        self.enc_stride = enc_kernel_size // 2
        self.encoder = nn.Conv1d(1, enc_num_feats, kernel_size=enc_kernel_size,
                                 stride=self.enc_stride, padding=self.enc_stride, bias=False)
        self.mask_generator = MaskGenerator(
            input_dim=enc_num_feats, num_sources=num_sources, kernel_size=msk_kernel_size,
            num_feats=msk_num_feats, num_hidden=msk_num_hidden_feats,
            num_layers=msk_num_layers, num_stacks=msk_num_stacks, msk_activate=msk_activate)
        self.decoder = nn.ConvTranspose1d(enc_num_feats, 1, kernel_size=enc_kernel_size,
                                          stride=self.enc_stride, padding=self.enc_stride,
                                          bias=False)

    def _align_num_frames_with_strides(self, input):
        """Zero-pad the end so that the encoder's strides cover every frame; returns
        (padded input, number of frames added)."""
        n, c, frames = input.shape
        odd = self.enc_kernel_size % 2
        rest = (frames - odd) % self.enc_stride
        if rest == 0:
            return input, 0
        extra = self.enc_stride - rest
        pad = fiamma.zeros(n, c, extra, dtype=input.dtype, device=input.device)
        return fiamma.cat([input, pad], 2), extra

    def forward(self, input):
        check_input("ConvTasNet", input, 3, "(batch, channel=1, frames)", {1: 1})
        padded, extra = self._align_num_frames_with_strides(input)
        n, frames = padded.shape[0], padded.shape[2]
        feats = self.encoder(padded)
        masked = self.mask_generator(feats) * feats.unsqueeze(1)
        decoded = self.decoder(masked.view(n * self.num_sources, self.enc_num_feats, -1))
        out = decoded.view(n, self.num_sources, frames)
        return out[..., :frames - extra] if extra else out


def conv_tasnet_base(num_sources: int = 2) -> ConvTasNet:
    """ConvTasNet with the paper's best configuration (torchaudio's ``conv_tasnet_base``):
    kernel 16, 512 encoder channels, 8 layers x 3 stacks of 128/512 channels, ReLU masks."""
    return ConvTasNet(num_sources=num_sources, enc_kernel_size=16, enc_num_feats=512,
                      msk_kernel_size=3, msk_num_feats=128, msk_num_hidden_feats=512,
                      msk_num_layers=8, msk_num_stacks=3, msk_activate="relu")
