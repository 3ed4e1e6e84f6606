"""Weight-only quantized embeddings (``torch.ao.nn.quantized.Embedding`` / ``EmbeddingBag``).

The weight is a ``quint8`` or ``quint4x2`` tensor quantized per row with a float scale and
zero point (``per_channel_affine_float_qparams``); lookups return float32. The arithmetic is
fbgemm's (what PyTorch's ``quantized::embedding_bag_byte`` / ``_4bit`` compute): each row stores
``scale`` and ``bias = -zero_point * scale`` (rounded to float16 for 4-bit rows), a looked-up
value is ``fma(scale, q, bias)``, a bag accumulates ``acc = fma(w * scale, q, acc + w * bias)``
row by row (``w`` the per-sample weight, 1 without) and ``mean`` multiplies by ``1 / length``.

PyTorch 2.13's quantized ``EmbeddingBag`` always sums (it passes mode 0 to its kernel whatever
``mode`` says); fiamma honours ``mode``: ``sum``, ``mean`` (fbgemm's normalisation by length)
and ``max`` (elementwise maximum of the looked-up values).

    >>> import fiamma
    >>> from fiamma import nn
    >>> import fiamma.ao.nn.quantized as nnq
    >>> import fiamma.ao.quantization as tq
    >>> emb = nn.Embedding(10, 4)
    >>> emb.qconfig = tq.float_qparams_weight_only_qconfig
    >>> q = nnq.Embedding.from_float(emb)
    >>> q.weight().qscheme()
    fiamma.per_channel_affine_float_qparams
    >>> bool((q(fiamma.tensor([3])) - emb.weight[3]).abs().max() < 0.02)
    True
"""
import numpy as np

import fiamma
from fiamma import nn
from fiamma.nn import _qtensor as Q

__all__ = ["EmbeddingPackedParams", "Embedding", "EmbeddingBag"]

_F32 = np.float32
_DTYPES = (Q.quint8, Q.quint4x2)


def _check_dtype(op, dtype):
    if dtype not in _DTYPES:
        raise NotImplementedError(f"{op}: unsupported dtype {dtype!r} for a quantized "
                                  "embedding (supported: fiamma.quint8, fiamma.quint4x2)")


def _empty_weight(num_embeddings, embedding_dim, dtype):
    return Q.QTensor._from_np(np.zeros((num_embeddings, embedding_dim), np.uint8), dtype,
                              Q.per_channel_affine_float_qparams,
                              fiamma.ones(num_embeddings), fiamma.zeros(num_embeddings), 0)


def _row_params(weight):
    """fbgemm's per-row float32 ``scale`` and ``bias`` (float16-rounded for 4-bit rows)."""
    scale = np.asarray(weight._scale.numpy(), dtype=_F32)
    bias = (-(np.asarray(weight._zero_point.numpy(), dtype=_F32) * scale)).astype(_F32)
    if weight._dtype is Q.quint4x2:
        scale = scale.astype(np.float16).astype(_F32)
        bias = bias.astype(np.float16).astype(_F32)
    return scale, bias


def _fma(a, b, c):
    """float32 ``fma(a, b, c)``: the product of a float32 and a small integer is exact in
    float64, so one float64 add and one rounding to float32 give the fused result (up to a
    double rounding that needs a sum with > 53 significant bits)."""
    return (a.astype(np.float64) * b + c.astype(np.float64)).astype(_F32)


def _indices(op, indices, num_embeddings):
    if not isinstance(indices, fiamma.Tensor) or indices.is_floating_point() or \
            indices.dtype is fiamma.bool:
        raise TypeError(f"{op}: expected an integer tensor of indices, got "
                        f"{getattr(indices, 'dtype', type(indices).__name__)}")
    idx = np.asarray(indices.numpy(), dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= num_embeddings):
        bad = idx[(idx < 0) | (idx >= num_embeddings)][0]
        raise IndexError(f"{op}: index {bad} is out of range for {num_embeddings} embeddings")
    return idx


def embedding(weight, indices):
    """Float32 rows of the weight-only quantized ``weight`` at ``indices`` (any shape)."""
    op = "quantized embedding"
    idx = _indices(op, indices, weight.shape[0])
    scale, bias = _row_params(weight)
    q = np.asarray(weight._int.numpy())
    flat = idx.reshape(-1)
    out = _fma(scale[flat, None], q[flat], bias[flat, None])
    return fiamma.from_numpy(out.reshape(idx.shape + (weight.shape[1],)))


def _bags(op, idx, offsets, include_last_offset):
    """(flat indices, bag starts, bag ends)."""
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None for 2-d input, got offsets")
        n, k = idx.shape
        starts = np.arange(n, dtype=np.int64) * k
        return idx.reshape(-1), starts, starts + k
    if idx.ndim != 1:
        raise ValueError(f"{op}: expected a 1-d or 2-d input, got {idx.ndim}-d")
    if offsets is None:
        raise ValueError(f"{op}: offsets has to be a 1-d tensor for 1-d input, got None")
    off = np.asarray(offsets.numpy(), dtype=np.int64).reshape(-1)
    if off.size == 0 or off[0] != 0:
        raise ValueError(f"{op}: offsets must start with 0, got {off[:1].tolist()}")
    if (np.diff(off) < 0).any() or off[-1] > idx.size:
        raise ValueError(f"{op}: offsets must be non-decreasing and at most the number of "
                         f"indices ({idx.size})")
    if include_last_offset:
        return idx, off[:-1], off[1:]
    return idx, off, np.append(off[1:], idx.size)


def embedding_bag(weight, indices, offsets=None, mode="sum", per_sample_weights=None,
                  include_last_offset=False):
    """Bags of the weight-only quantized ``weight``'s rows reduced by ``mode`` (float32
    ``(bags, embedding_dim)``), in fbgemm's arithmetic."""
    op = "quantized embedding_bag"
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    idx = _indices(op, indices, weight.shape[0])
    flat, starts, ends = _bags(op, idx, offsets, include_last_offset)
    psw = None
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"{op}: per_sample_weights is only supported for "
                                      f"mode='sum', got mode={mode!r}")
        psw = np.asarray(per_sample_weights.detach().numpy(), dtype=_F32).reshape(-1)
        if psw.size != flat.size:
            raise ValueError(f"{op}: per_sample_weights must have one weight per index "
                             f"({flat.size}), got {psw.size}")
    scale, bias = _row_params(weight)
    q = np.asarray(weight._int.numpy())
    lengths = ends - starts
    out = np.zeros((starts.size, weight.shape[1]), _F32)
    if mode == "max":
        out[lengths > 0] = -np.inf
    # one step per position in the bags, all bags at once: the order of fbgemm's sums
    for j in range(int(lengths.max()) if lengths.size else 0):
        live = lengths > j
        pos = starts[live] + j
        rows = flat[pos]
        s, b = scale[rows, None], bias[rows, None]
        if mode == "max":
            out[live] = np.maximum(out[live], _fma(s, q[rows], b))
            continue
        if psw is not None:
            s = (s * psw[pos, None]).astype(_F32)
            b = (b * psw[pos, None]).astype(_F32)
        out[live] = _fma(s, q[rows], (out[live] + b).astype(_F32))
    if mode == "mean":
        nz = lengths > 0
        inv = (_F32(1.0) / lengths[nz].astype(_F32)).astype(_F32)
        out[nz] = (out[nz] * inv[:, None]).astype(_F32)
    return fiamma.from_numpy(out)


class EmbeddingPackedParams(nn.Module):
    """Holds a quantized embedding's weight (PyTorch packs it for fbgemm; the state dict has
    ``dtype`` and ``_packed_weight``, the quantized weight)."""

    def __init__(self, num_embeddings, embedding_dim, dtype=Q.quint8):
        super().__init__()
        _check_dtype("EmbeddingPackedParams", dtype)
        self.dtype = dtype
        self.set_weight(_empty_weight(num_embeddings, embedding_dim, dtype))

    def set_weight(self, weight):
        if not isinstance(weight, Q.QTensor) or weight._dtype not in _DTYPES or \
                weight._scheme is not Q.per_channel_affine_float_qparams or weight._axis != 0 \
                or weight.ndim != 2:
            got = (f"{weight.dtype!r} {weight.qscheme()!r} axis {weight._axis}"
                   if isinstance(weight, Q.QTensor) else type(weight).__name__)
            raise TypeError("quantized embedding: expected a 2-d quint8/quint4x2 weight "
                            "quantized per row (axis 0) with float qparams "
                            f"(per_channel_affine_float_qparams), got {got}")
        self.__dict__["_packed_weight"] = weight

    def _weight(self):
        return self._packed_weight

    def forward(self, x):
        return x

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_weight"] = self._packed_weight

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        keys = (prefix + "dtype", prefix + "_packed_weight")
        if keys[0] in state_dict:
            self.dtype = state_dict[keys[0]]
        if keys[1] in state_dict:
            self.set_weight(state_dict[keys[1]])
        elif strict:
            missing_keys.append(keys[1])
        rest = {k: v for k, v in state_dict.items() if k not in keys}
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def __repr__(self):
        return repr(self._packed_weight)


def _weight_observer(cls, mod, float_type, qat_type):
    t = type(mod)
    if hasattr(mod, "weight_fake_quant"):
        if t is not qat_type:
            raise AssertionError(f"nnq.{cls.__name__}.from_float with fake quant only works "
                                 f"for qat.{qat_type.__name__}, got {t.__name__}")
        return mod.weight_fake_quant
    if t is not float_type:
        raise AssertionError(f"nnq.{cls.__name__}.from_float only works for "
                             f"{float_type.__name__}, got {t.__name__}")
    if not hasattr(mod, "qconfig"):
        raise AssertionError(f"{cls.__name__} input float module must have qconfig defined")
    if mod.qconfig is not None and mod.qconfig.weight is not None:
        return mod.qconfig.weight()
    from fiamma.ao.quantization.qconfig import float_qparams_weight_only_qconfig
    return float_qparams_weight_only_qconfig.weight()


def _quantized_weight(cls, mod, observer):
    if observer.qscheme is not Q.per_channel_affine_float_qparams:
        raise AssertionError(f"{cls.__name__} quantization is only supported with "
                             "float_qparams_weight_only_qconfig (qscheme "
                             f"per_channel_affine_float_qparams), got {observer.qscheme!r}")
    _check_dtype(f"nnq.{cls.__name__}.from_float", observer.dtype)
    w = mod.weight.detach().float()
    observer(w)
    scale, zp = observer.calculate_qparams()
    return fiamma.quantize_per_channel(w, scale.float(), zp.float(), 0, observer.dtype)


class Embedding(nn.Module):
    """Weight-only quantized ``nn.Embedding``: float32 rows of a quint8 / quint4x2 weight."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 dtype=Q.quint8):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.dtype = dtype
        self._packed_params = EmbeddingPackedParams(num_embeddings, embedding_dim, dtype)
        if _weight is not None:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     f"embedding_dim: expected {[num_embeddings, embedding_dim]}"
                                     f", got {list(_weight.shape)}")
            self._packed_params.set_weight(_weight)

    def forward(self, indices):
        return embedding(self._packed_params._packed_weight, indices)

    def set_weight(self, w):
        self._packed_params.set_weight(w)
        self.dtype = self._packed_params.dtype = w.dtype

    def weight(self):
        return self._packed_params._weight()

    def _get_name(self):
        return "Quantized" + type(self).__name__

    def extra_repr(self):
        return (f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, "
                f"dtype={self._packed_params.dtype}, qscheme={self.weight().qscheme()}")

    def __repr__(self):  # the packed weight is not a child worth printing (as PyTorch's)
        return f"{self._get_name()}({self.extra_repr()})"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The quantized embedding of a float ``nn.Embedding`` (its qconfig's weight
        observer, default :data:`float_qparams_weight_only_qconfig`) or of a QAT
        ``nn.qat.Embedding`` (its ``weight_fake_quant``)."""
        from fiamma.ao.nn.qat import embedding_ops as qat
        obs = _weight_observer(cls, mod, nn.Embedding, qat.Embedding)
        qw = _quantized_weight(cls, mod, obs)
        q = cls(mod.num_embeddings, mod.embedding_dim, dtype=obs.dtype)
        q.set_weight(qw)
        return q


class EmbeddingBag(Embedding):
    """Weight-only quantized ``nn.EmbeddingBag`` (``mode`` 'sum' by default, as PyTorch's)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="sum", sparse=False, _weight=None,
                 include_last_offset=False, dtype=Q.quint8):
        super().__init__(num_embeddings, embedding_dim, _weight=_weight, dtype=dtype)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        self.mode = mode
        self.pruned_weights = False
        self.include_last_offset = include_last_offset

    def forward(self, indices, offsets=None, per_sample_weights=None,
                compressed_indices_mapping=None):
        if compressed_indices_mapping is not None:
            raise NotImplementedError("quantized EmbeddingBag: compressed_indices_mapping "
                                      "(pruned weights) is not supported")
        return embedding_bag(self._packed_params._packed_weight, indices, offsets, self.mode,
                             per_sample_weights, self.include_last_offset)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The quantized embedding bag of a float ``nn.EmbeddingBag`` or a QAT
        ``nn.qat.EmbeddingBag``."""
        from fiamma.ao.nn.qat import embedding_ops as qat
        obs = _weight_observer(cls, mod, nn.EmbeddingBag, qat.EmbeddingBag)
        qw = _quantized_weight(cls, mod, obs)
        q = cls(mod.num_embeddings, mod.embedding_dim, mod.max_norm, mod.norm_type,
                mod.scale_grad_by_freq, mod.mode, mod.sparse,
                include_last_offset=mod.include_last_offset, dtype=obs.dtype)
        q.set_weight(qw)
        return q
