"""Conformer encoder (Gulati et al., 2020): macaron feed-forward halves around self-attention
and a convolution module. Module and parameter names follow torchaudio.models.Conformer."""

import fiamma
from fiamma import nn
from fiamma.audio.models._checks import check_input

__all__ = ["Conformer"]


def _lengths_to_padding_mask(lengths):
    """(batch,) lengths -> (batch, max_length) bool mask, True at padded positions."""
    steps = fiamma.arange(int(lengths.max().item()), device=lengths.device, dtype=lengths.dtype)
    return steps.unsqueeze(0) >= lengths.unsqueeze(1)


class _ConvolutionModule(nn.Module):
    """LayerNorm, pointwise conv + GLU, depthwise conv, batch (or group) norm, SiLU, pointwise
    conv, dropout; (batch, time, dim) -> (batch, time, dim)."""

    def __init__(self, input_dim: int, num_channels: int, depthwise_kernel_size: int,
                 dropout: float = 0.0, bias: bool = False, use_group_norm: bool = False) -> None:
        super().__init__()
        if depthwise_kernel_size % 2 != 1:
            raise ValueError("depthwise_kernel_size must be odd to achieve 'SAME' padding.")
        self.layer_norm = nn.LayerNorm(input_dim)
        norm = (nn.GroupNorm(num_groups=1, num_channels=num_channels) if use_group_norm
                else nn.BatchNorm1d(num_channels))
        self.sequential = nn.Sequential(
            nn.Conv1d(input_dim, 2 * num_channels, 1, bias=bias),
            nn.GLU(dim=1),
            nn.Conv1d(num_channels, num_channels, depthwise_kernel_size,
                      padding=depthwise_kernel_size // 2, groups=num_channels, bias=bias),
            norm,
            nn.SiLU(),
            nn.Conv1d(num_channels, input_dim, kernel_size=1, bias=bias),
            nn.Dropout(dropout),
        )

    def forward(self, input):
        return self.sequential(self.layer_norm(input).transpose(1, 2)).transpose(1, 2)


class _FeedForwardModule(nn.Module):
    def __init__(self, input_dim: int, hidden_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.sequential = nn.Sequential(
            nn.LayerNorm(input_dim), nn.Linear(input_dim, hidden_dim), nn.SiLU(),
            nn.Dropout(dropout), nn.Linear(hidden_dim, input_dim), nn.Dropout(dropout))

    def forward(self, input):
        return self.sequential(input)


class ConformerLayer(nn.Module):
    """One Conformer layer on (time, batch, dim) input."""

    def __init__(self, input_dim: int, ffn_dim: int, num_attention_heads: int,
                 depthwise_conv_kernel_size: int, dropout: float = 0.0,
                 use_group_norm: bool = False, convolution_first: bool = False) -> None:
        super().__init__()
        self.ffn1 = _FeedForwardModule(input_dim, ffn_dim, dropout=dropout)
        self.self_attn_layer_norm = nn.LayerNorm(input_dim)
        self.self_attn = nn.MultiheadAttention(input_dim, num_attention_heads, dropout=dropout)
        self.self_attn_dropout = nn.Dropout(dropout)
        self.conv_module = _ConvolutionModule(input_dim, input_dim, depthwise_conv_kernel_size,
                                              dropout=dropout, bias=True,
                                              use_group_norm=use_group_norm)
        self.ffn2 = _FeedForwardModule(input_dim, ffn_dim, dropout=dropout)
        self.final_layer_norm = nn.LayerNorm(input_dim)
        self.convolution_first = convolution_first

    def _apply_convolution(self, x):
        return x + self.conv_module(x.transpose(0, 1)).transpose(0, 1)

    def forward(self, input, key_padding_mask):
        x = input + 0.5 * self.ffn1(input)
        if self.convolution_first:
            x = self._apply_convolution(x)
        h = self.self_attn_layer_norm(x)
        h, _ = self.self_attn(query=h, key=h, value=h, key_padding_mask=key_padding_mask,
                              need_weights=False)
        x = x + self.self_attn_dropout(h)
        if not self.convolution_first:
            x = self._apply_convolution(x)
        x = x + 0.5 * self.ffn2(x)
        return self.final_layer_norm(x)


class Conformer(nn.Module):
    """Conformer encoder.

    Args:
        input_dim, num_heads, ffn_dim, num_layers, depthwise_conv_kernel_size (odd),
        dropout (0.0), use_group_norm (False: BatchNorm1d in the convolution module),
        convolution_first (False).

    ``forward(input, lengths)``: (batch, time, input_dim) and (batch,) valid lengths ->
    (output of the same shape, lengths).
    """

    def __init__(self, input_dim: int, num_heads: int, ffn_dim: int, num_layers: int,
                 depthwise_conv_kernel_size: int, dropout: float = 0.0,
                 use_group_norm: bool = False, convolution_first: bool = False):
        super().__init__()
        self.conformer_layers = nn.ModuleList([
            ConformerLayer(input_dim, ffn_dim, num_heads, depthwise_conv_kernel_size,
                           dropout=dropout, use_group_norm=use_group_norm,
                           convolution_first=convolution_first)
            for _ in range(num_layers)])

    def forward(self, input, lengths):
        dim = self.conformer_layers[0].final_layer_norm.normalized_shape[0] \
            if len(self.conformer_layers) else input.shape[-1]
        check_input("Conformer", input, 3, "(batch, time, input_dim)", {2: dim})
        check_input("Conformer", lengths, 1, "lengths (batch,)", {0: input.shape[0]})
        mask = _lengths_to_padding_mask(lengths)
        x = input.transpose(0, 1)
        for layer in self.conformer_layers:
            x = layer(x, mask)
        return x.transpose(0, 1), lengths
