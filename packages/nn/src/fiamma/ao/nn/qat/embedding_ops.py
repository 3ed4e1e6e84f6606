"""Quantization-aware-training embeddings (``torch.ao.nn.qat.Embedding`` / ``EmbeddingBag``).

The weight goes through ``weight_fake_quant`` on every forward; the qconfig's weight must use
``per_channel_affine_float_qparams`` (a float scale and zero point per row, as
:data:`~fiamma.ao.quantization.default_embedding_qat_qconfig`), the scheme the weight-only
quantized :class:`fiamma.ao.nn.quantized.Embedding` stores. ``prepare_qat`` swaps them in with
:func:`~fiamma.ao.quantization.get_embedding_qat_module_mappings`.

    >>> import fiamma
    >>> import fiamma.ao.nn.qat as nnqat
    >>> import fiamma.ao.quantization as tq
    >>> emb = nnqat.Embedding(10, 4, qconfig=tq.default_embedding_qat_qconfig)
    >>> emb(fiamma.tensor([[1, 2], [3, 9]])).shape
    fiamma.Size([2, 2, 4])
"""
from fiamma import nn
from fiamma.nn import _qtensor as Q, functional as F
from fiamma.nn.utils.parametrize import type_before_parametrizations

__all__ = ["Embedding", "EmbeddingBag"]


def _weight_fake_quant(cls, qconfig):
    """The weight fake-quantizer of ``qconfig``, which must be float-qparams per row."""
    if not qconfig:
        raise AssertionError(f"qat.{cls.__name__}: qconfig must be provided for QAT module")
    fq = qconfig.weight()
    if fq.qscheme is not Q.per_channel_affine_float_qparams:
        raise AssertionError(f"qat.{cls.__name__}: embedding weights require a qscheme of "
                             f"fiamma.per_channel_affine_float_qparams, got {fq.qscheme!r}")
    return fq


def _check_float(cls, mod):
    if type_before_parametrizations(mod) is not cls._FLOAT_MODULE:
        raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                             f"{cls._FLOAT_MODULE.__name__}, got {type(mod).__name__}")
    if not getattr(mod, "qconfig", None):
        raise AssertionError("Input float module must have a valid qconfig")


class Embedding(nn.Embedding):
    """``nn.Embedding`` whose weight is fake-quantized per row (QAT)."""

    _FLOAT_MODULE = nn.Embedding

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 device=None, dtype=None, qconfig=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight)
        self.weight_fake_quant = _weight_fake_quant(type(self), qconfig)
        self.qconfig = qconfig

    def forward(self, input):
        return F.embedding(input, self.weight_fake_quant(self.weight), self.padding_idx,
                           self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT embedding sharing ``mod``'s weight parameter."""
        _check_float(cls, mod)
        q = cls(mod.num_embeddings, mod.embedding_dim, mod.padding_idx, mod.max_norm,
                mod.norm_type, mod.scale_grad_by_freq, mod.sparse, qconfig=mod.qconfig)
        q.weight = mod.weight
        return q

    def to_float(self):
        """The float ``nn.Embedding`` with this module's weight."""
        emb = nn.Embedding(self.num_embeddings, self.embedding_dim, self.padding_idx,
                           self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse)
        emb.weight = nn.Parameter(self.weight.detach())
        emb.train(self.training)
        return emb


class EmbeddingBag(nn.EmbeddingBag):
    """``nn.EmbeddingBag`` whose weight is fake-quantized per row (QAT)."""

    _FLOAT_MODULE = nn.EmbeddingBag

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, qconfig=None, device=None,
                 dtype=None):
        super().__init__(num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq,
                         mode, sparse, _weight, include_last_offset, padding_idx)
        self.weight_fake_quant = _weight_fake_quant(type(self), qconfig)
        self.qconfig = qconfig

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight_fake_quant(self.weight), offsets,
                               self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights,
                               self.include_last_offset, self.padding_idx)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """The QAT embedding bag sharing ``mod``'s weight parameter."""
        _check_float(cls, mod)
        q = cls(mod.num_embeddings, mod.embedding_dim, mod.max_norm, mod.norm_type,
                mod.scale_grad_by_freq, mod.mode, mod.sparse, None, mod.include_last_offset,
                mod.padding_idx, qconfig=mod.qconfig)
        q.weight = mod.weight
        return q

    def to_float(self):
        """The float ``nn.EmbeddingBag`` with this module's weight."""
        bag = nn.EmbeddingBag(self.num_embeddings, self.embedding_dim, self.max_norm,
                              self.norm_type, self.scale_grad_by_freq, self.mode, self.sparse,
                              None, self.include_last_offset, self.padding_idx)
        bag.weight = nn.Parameter(self.weight.detach())
        bag.train(self.training)
        return bag
