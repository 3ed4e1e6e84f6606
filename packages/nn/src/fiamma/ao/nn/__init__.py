"""``fiamma.ao.nn`` (``torch.ao.nn``): ``intrinsic`` (fused float modules) and ``quantized``
(``FloatFunctional`` only: the int8 modules need quantized tensors fiamma does not have)."""
from fiamma.ao.nn import intrinsic, quantized  # noqa: F401

__all__ = ["intrinsic", "quantized"]
