"""MultiheadAttention and the Transformer family (``torch.nn.MultiheadAttention``,
``TransformerEncoderLayer``, ``TransformerDecoderLayer``, ``TransformerEncoder``,
``TransformerDecoder``, ``Transformer``) with PyTorch's submodule and parameter names, so
checkpoints load by key."""

import copy

import fiamma
from fiamma.nn import functional as F, init
from fiamma.nn.modules.activation import GELU, ReLU
from fiamma.nn.modules.container import ModuleList
from fiamma.nn.modules.dropout import Dropout
from fiamma.nn.modules.linear import Linear
from fiamma.nn.modules.module import Module
from fiamma.nn.parameter import Parameter

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerDecoder", "Transformer"]


# ----------------------------------------------------------------------------------------
# LayerNorm: nn.LayerNorm when the package has it; a private fallback of core ops otherwise

def _layer_norm(x, shape, w, b, eps):
    """Layer norm over the trailing dims ``shape`` (mean / biased variance of core ops)."""
    dims = tuple(range(-len(shape), 0))
    mean = x.mean(dims, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(dims, keepdim=True)
    out = xc * fiamma.rsqrt(var + eps)
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out


class LayerNorm(Module):  # not exported: the fallback, named so that its repr matches
    """Fallback LayerNorm (weight/bias named as PyTorch's) used only while fiamma.nn has no
    LayerNorm of its own."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps = tuple(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        f = {"device": device, "dtype": dtype}
        self.register_parameter("weight", Parameter(fiamma.ones(self.normalized_shape, **f))
                                if elementwise_affine else None)
        self.register_parameter("bias", Parameter(fiamma.zeros(self.normalized_shape, **f))
                                if elementwise_affine and bias else None)

    def forward(self, input):
        return _layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


def _make_layer_norm(d_model, eps, bias, f):
    import fiamma.nn as nn
    cls = getattr(nn, "LayerNorm", None) or LayerNorm
    if bias:
        return cls(d_model, eps=eps, **f)
    return cls(d_model, eps=eps, bias=False, **f)


# ----------------------------------------------------------------------------------------

class NonDynamicallyQuantizableLinear(Linear):
    """The Linear of MultiheadAttention.out_proj (PyTorch's class name, same behaviour)."""


class MultiheadAttention(Module):
    """Multi-head attention (Attention Is All You Need), PyTorch's parameters and defaults.

    Parameters: ``in_proj_weight`` (3E, E) when key/value feature sizes equal ``embed_dim``,
    otherwise ``q_proj_weight``/``k_proj_weight``/``v_proj_weight``; ``in_proj_bias`` (3E),
    ``bias_k``/``bias_v`` (1, 1, E) with ``add_bias_kv``, and ``out_proj`` (a Linear).
    Inputs are (L, N, E) or, with ``batch_first``, (N, L, E); unbatched (L, E) works too.

    Example::

        >>> mha = nn.MultiheadAttention(16, 4, batch_first=True)
        >>> x = fiamma.randn(2, 5, 16)
        >>> out, w = mha(x, x, x)          # out (2, 5, 16), w (2, 5, 5)
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater "
                             f"than 0, got embed_dim={embed_dim} and num_heads={num_heads} "
                             "instead")
        super().__init__()
        f = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("MultiheadAttention: embed_dim must be divisible by num_heads"
                                 f" (got embed_dim={embed_dim}, num_heads={num_heads})")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(fiamma.empty(embed_dim, embed_dim, **f))
            self.k_proj_weight = Parameter(fiamma.empty(embed_dim, self.kdim, **f))
            self.v_proj_weight = Parameter(fiamma.empty(embed_dim, self.vdim, **f))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(fiamma.empty(3 * embed_dim, embed_dim, **f))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(fiamma.empty(3 * embed_dim, **f))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **f)
        if add_bias_kv:
            self.bias_k = Parameter(fiamma.empty(1, 1, embed_dim, **f))
            self.bias_v = Parameter(fiamma.empty(1, 1, embed_dim, **f))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """Returns ``(attn_output, attn_weights)``; weights are None unless
        ``need_weights`` (averaged over heads when ``average_attn_weights``)."""
        is_batched = query.dim() == 3
        if self.batch_first and is_batched:
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = query.transpose(1, 0), key.transpose(1, 0)
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        if self.batch_first and is_batched:
            out = out.transpose(1, 0)
        return out, weights


# ----------------------------------------------------------------------------------------

def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


def _relu_or_gelu(act):
    if act is F.relu or isinstance(act, ReLU):
        return 1
    if act is F.gelu or isinstance(act, GELU):
        return 2
    return 0


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """``is_causal`` if given; otherwise whether ``mask`` equals the square causal mask."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.shape[-2]
        if tuple(mask.shape) == (sz, sz):
            causal = Transformer.generate_square_subsequent_mask(sz, dtype=mask.dtype) \
                if mask.is_floating_point() else \
                fiamma.ones(sz, sz, dtype=fiamma.bool).triu(1)
            make_causal = bool((mask == causal).all().item())
        else:
            make_causal = False
    return make_causal


def _check_d_model(name, x, d_model, batch_first):
    if x.dim() not in (2, 3) or x.shape[-1] != d_model:
        raise RuntimeError(f"{name}: expected input of shape (L, {d_model}) or "
                           f"{'(N, L' if batch_first else '(L, N'}, {d_model}), got "
                           f"{tuple(x.shape)}")


class TransformerEncoderLayer(Module):
    """Self-attention + feed-forward block (post-norm, or pre-norm with ``norm_first``)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        f = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **f)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **f)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **f)
        self.norm_first = norm_first
        self.norm1 = _make_layer_norm(d_model, layer_norm_eps, bias, f)
        self.norm2 = _make_layer_norm(d_model, layer_norm_eps, bias, f)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(self.activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        _check_d_model("TransformerEncoderLayer", src, self.self_attn.embed_dim,
                       self.self_attn.batch_first)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over ``memory`` and feed-forward blocks."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        f = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **f)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **f)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **f)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **f)
        self.norm_first = norm_first
        self.norm1 = _make_layer_norm(d_model, layer_norm_eps, bias, f)
        self.norm2 = _make_layer_norm(d_model, layer_norm_eps, bias, f)
        self.norm3 = _make_layer_norm(d_model, layer_norm_eps, bias, f)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        d = self.self_attn.embed_dim
        _check_d_model("TransformerDecoderLayer", tgt, d, self.self_attn.batch_first)
        _check_d_model("TransformerDecoderLayer (memory)", memory, d,
                       self.self_attn.batch_first)
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask,
                                               memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer`` (``layers.0``, ...) and an
    optional final ``norm``."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check
        # PyTorch runs inference with a padding mask on nested tensors when the layer allows
        # it; the visible effect (zeros at the padded positions, before the final norm) is
        # reproduced so that outputs match
        layer = encoder_layer
        sa = getattr(layer, "self_attn", None)
        self.use_nested_tensor = bool(
            enable_nested_tensor and isinstance(layer, TransformerEncoderLayer)
            and not layer.norm_first and sa.batch_first and sa._qkv_same_embed_dim
            and sa.in_proj_bias is not None and layer.activation_relu_or_gelu
            and layer.norm1.eps == layer.norm2.eps and sa.num_heads % 2 == 0)

    def _pads_with_zeros(self, src, mask, src_key_padding_mask):
        """Whether PyTorch would take its nested-tensor path (which zeroes padded positions)."""
        if not self.use_nested_tensor or self.layers[0].training or src.dim() != 3 or \
                src_key_padding_mask is None or mask is not None:
            return False
        if fiamma.is_grad_enabled() and (src.requires_grad or any(
                p.requires_grad for p in self.layers[0].parameters())):
            return False
        if self.mask_check:
            keep = (src_key_padding_mask == 0).int()
            # left aligned: every row keeps a prefix and pads the rest
            if keep.shape[-1] > 1 and bool((keep[:, 1:] > keep[:, :-1]).any().item()):
                return False
        return True

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        seq_len = None
        if src.dim() == 3:
            seq_len = src.shape[1] if self.layers[0].self_attn.batch_first else src.shape[0]
        elif src.dim() == 2:
            seq_len = src.shape[0]
        is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        pad_zero = self._pads_with_zeros(src, mask, src_key_padding_mask)
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, is_causal=is_causal,
                      src_key_padding_mask=src_key_padding_mask)
        if pad_zero:
            out = out.masked_fill((src_key_padding_mask != 0).unsqueeze(-1), 0.0)
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer`` and an optional ``norm``."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        seq_len = None
        if tgt.dim() == 3:
            seq_len = tgt.shape[1] if self.layers[0].self_attn.batch_first else tgt.shape[0]
        elif tgt.dim() == 2:
            seq_len = tgt.shape[0]
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        out = tgt
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    """The full encoder-decoder Transformer (``encoder``, ``decoder``), PyTorch's defaults
    (d_model=512, nhead=8, 6 + 6 layers) and init (xavier_uniform_ on every matrix).

    Example::

        >>> model = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2,
        ...                        num_decoder_layers=2, dim_feedforward=64)
        >>> src, tgt = fiamma.randn(10, 3, 32), fiamma.randn(7, 3, 32)
        >>> mask = nn.Transformer.generate_square_subsequent_mask(7)
        >>> model(src, tgt, tgt_mask=mask).shape
        fiamma.Size([7, 3, 32])
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        f = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **f)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              _make_layer_norm(d_model, layer_norm_eps, bias,
                                                               f))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **f)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              _make_layer_norm(d_model, layer_norm_eps, bias,
                                                               f))
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.dim() == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and is_batched:
            raise RuntimeError("Transformer: the batch number of src and tgt must be equal, "
                               f"got src {tuple(src.shape)} and tgt {tuple(tgt.shape)}")
        if self.batch_first and src.shape[0] != tgt.shape[0] and is_batched:
            raise RuntimeError("Transformer: the batch number of src and tgt must be equal, "
                               f"got src {tuple(src.shape)} and tgt {tuple(tgt.shape)}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("Transformer: the feature number of src and tgt must be equal "
                               f"to d_model={self.d_model}, got src {tuple(src.shape)} and "
                               f"tgt {tuple(tgt.shape)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A float (sz, sz) mask: ``-inf`` above the diagonal, 0 elsewhere."""
        dtype = dtype if dtype is not None else fiamma.get_default_dtype()
        return fiamma.full((sz, sz), float("-inf"), dtype=dtype).triu(1)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)
