"""``torch.nn.attention.flex_attention``'s names. fiamma has no FlexAttention kernel yet.

Libraries import this module to name :class:`BlockMask` in annotations and ``isinstance``
checks (no fiamma object is a BlockMask) and to read ``_DEFAULT_SPARSE_BLOCK_SIZE``
(PyTorch's 128); building a block mask (:func:`create_block_mask`, ``BlockMask(...)``) or
running :func:`flex_attention` raises :class:`NotImplementedError`. Use
``F.scaled_dot_product_attention`` with a boolean or additive ``attn_mask`` instead.

>>> from fiamma.nn.attention.flex_attention import BlockMask, _DEFAULT_SPARSE_BLOCK_SIZE
>>> import fiamma
>>> isinstance(fiamma.ones(2), BlockMask), _DEFAULT_SPARSE_BLOCK_SIZE
(False, 128)
"""

__all__ = ["BlockMask", "create_block_mask", "create_mask", "flex_attention", "and_masks",
           "or_masks", "noop_mask"]

# PyTorch's default block size (rows and columns) of a BlockMask
_DEFAULT_SPARSE_BLOCK_SIZE = 128

_GAP = ("fiamma has no FlexAttention (torch.nn.attention.flex_attention): {what} is not "
        "supported; use F.scaled_dot_product_attention with an attn_mask")


class BlockMask:
    """PyTorch's block-sparse attention mask: here only a name to test against; making one
    raises NotImplementedError."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_GAP.format(what="BlockMask(...)"))

    @classmethod
    def from_kv_blocks(cls, *args, **kwargs):
        raise NotImplementedError(_GAP.format(what="BlockMask.from_kv_blocks"))


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cpu", BLOCK_SIZE=128,
                      _compile=False):
    """Not supported: fiamma has no FlexAttention (raises NotImplementedError)."""
    raise NotImplementedError(_GAP.format(what="create_block_mask"))


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device="cpu"):
    """Not supported: fiamma has no FlexAttention (raises NotImplementedError)."""
    raise NotImplementedError(_GAP.format(what="create_mask"))


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, kernel_options=None, **kwargs):
    """Not supported: fiamma has no FlexAttention (raises NotImplementedError)."""
    raise NotImplementedError(_GAP.format(what="flex_attention"))


def noop_mask(batch, head, token_q, token_kv):
    """The mask_mod that keeps every position (returns a true boolean tensor)."""
    import fiamma

    return fiamma.ones((), dtype=fiamma.bool)


def and_masks(*mask_mods):
    """The mask_mod that keeps a position only where every one of ``mask_mods`` keeps it."""
    def mask(b, h, q, kv):
        out = noop_mask(b, h, q, kv)
        for m in mask_mods:
            out = out & m(b, h, q, kv)
        return out
    return mask


def or_masks(*mask_mods):
    """The mask_mod that keeps a position where any one of ``mask_mods`` keeps it."""
    def mask(b, h, q, kv):
        import fiamma

        out = fiamma.zeros((), dtype=fiamma.bool)
        for m in mask_mods:
            out = out | m(b, h, q, kv)
        return out
    return mask
