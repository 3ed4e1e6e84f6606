"""``fiamma.nn.attention.bias``: causal attention biases that ``scaled_dot_product_attention``
understands without a materialised mask (PyTorch's ``torch.nn.attention.bias``).

``causal_upper_left(L, S)`` is the mask of ``is_causal=True`` (query ``i`` sees keys
``0..i``); ``causal_lower_right(L, S)`` aligns the triangle to the bottom-right corner
(query ``i`` sees keys ``0..i + S - L``: the last query sees every key, as when decoding
with a cache). The two are the same when ``L == S``. A :class:`CausalBias` is a
:class:`fiamma.Tensor` (an empty one: it stores no mask) that prints as its mask; passed as
``attn_mask`` it runs attention with ``is_causal=True`` where that is the same mask, and with
the materialised bool mask otherwise.

>>> import fiamma
>>> import fiamma.nn.functional as F
>>> from fiamma.nn.attention.bias import causal_lower_right
>>> b = causal_lower_right(2, 3)
>>> b
tensor([[ True,  True, False],
        [ True,  True,  True]])
>>> q, k = fiamma.randn(1, 2, 4), fiamma.randn(1, 3, 4)
>>> F.scaled_dot_product_attention(q, k, k, b).shape
fiamma.Size([1, 2, 4])
"""

import enum
import warnings

import fiamma
from fiamma.overrides import disabled_torch_function_impl as _disabled

__all__ = ["causal_upper_left", "causal_lower_right", "CausalVariant", "CausalBias"]


class CausalVariant(enum.IntEnum):
    """Where the causal triangle is anchored: ``UPPER_LEFT`` (``tril(ones(L, S))``, the mask
    of ``is_causal=True``) or ``LOWER_RIGHT`` (``tril(ones(L, S), diagonal=S - L)``)."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


def _check_len(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError(f"CausalBias: {name} must be a non-negative int, got {v!r}")


class CausalBias(fiamma.Tensor):
    """A causal attention bias of a query length ``seq_len_q`` and a key/value length
    ``seq_len_kv``; ``variant`` is a :class:`CausalVariant`. Build it with
    :func:`causal_upper_left` or :func:`causal_lower_right`. It holds no data (PyTorch's is
    an uninitialised tensor too): ``repr``/``str`` show the mask, and
    ``scaled_dot_product_attention`` applies it."""

    # fiamma's scaled_dot_product_attention reads it itself: outside the protocol
    __torch_function__ = _disabled

    def __new__(cls, variant, seq_len_q, seq_len_kv):
        return fiamma.empty(0).as_subclass(cls)

    def __init__(self, variant, seq_len_q, seq_len_kv):
        if not isinstance(variant, CausalVariant):
            raise TypeError("CausalBias: variant must be a CausalVariant, got "
                            f"{type(variant).__name__}")
        _check_len("seq_len_q", seq_len_q)
        _check_len("seq_len_kv", seq_len_kv)
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            # PyTorch's warning; fiamma's attention gives zeros for the fully masked rows
            warnings.warn("Lower right causal bias will produce NaNs in the output when "
                          "seq_len_q > seq_len_kv!", stacklevel=2)

    def _materialize(self, device=None):
        """The (seq_len_q, seq_len_kv) bool mask, True where a query may attend a key."""
        ones = fiamma.ones(self.seq_len_q, self.seq_len_kv, dtype=fiamma.bool,
                           device=device if device is not None else "cpu")
        if self.variant == CausalVariant.UPPER_LEFT:
            return fiamma.tril(ones)
        return fiamma.tril(ones, diagonal=self.seq_len_kv - self.seq_len_q)

    def _sdpa_with_bias(self, query, key, value, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
        """``scaled_dot_product_attention`` with this bias as ``attn_mask``."""
        from fiamma.nn.functional import scaled_dot_product_attention as sdpa

        if is_causal:
            raise ValueError("CausalBias should not be used with causal=True")
        L, S = query.shape[-2], key.shape[-2]
        if (L, S) != (self.seq_len_q, self.seq_len_kv):
            raise RuntimeError(
                "scaled_dot_product_attention: the CausalBias is for query length "
                f"{self.seq_len_q} and key length {self.seq_len_kv}, got a query of length {L} "
                f"and a key of length {S}")
        if self.seq_len_q == self.seq_len_kv or self.variant == CausalVariant.UPPER_LEFT:
            return sdpa(query, key, value, None, dropout_p, True, scale, enable_gqa=enable_gqa)
        return sdpa(query, key, value, self._materialize(query.device), dropout_p, False, scale,
                    enable_gqa=enable_gqa)

    def __repr__(self):
        return repr(self._materialize())

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (CausalBias, (self.variant, self.seq_len_q, self.seq_len_kv))

    def __deepcopy__(self, memo):
        return CausalBias(self.variant, self.seq_len_q, self.seq_len_kv)


def _size2(name, size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, fiamma.Size)):
        size = tuple(size[0])
    if len(size) != 2:
        raise ValueError(f"{name}: expected 2 sizes (seq_len_q, seq_len_kv), got {len(size)}")
    return size


def causal_upper_left(*size):
    """The causal bias whose triangle starts at the top-left corner (the mask of
    ``is_causal=True``): ``causal_upper_left(seq_len_q, seq_len_kv)``."""
    L, S = _size2("causal_upper_left", size)
    return CausalBias(CausalVariant.UPPER_LEFT, L, S)


def causal_lower_right(*size):
    """The causal bias whose triangle ends at the bottom-right corner (query ``i`` sees keys
    up to ``i + seq_len_kv - seq_len_q``): ``causal_lower_right(seq_len_q, seq_len_kv)``."""
    L, S = _size2("causal_lower_right", size)
    return CausalBias(CausalVariant.LOWER_RIGHT, L, S)
