"""``fiamma.ao.nn`` (``torch.ao.nn``): ``intrinsic`` (fused float modules, their int8 and QAT
versions), ``qat`` (quantization-aware-training modules) and ``quantized`` (``FloatFunctional``
and the int8 modules)."""
from fiamma.ao.nn import intrinsic, qat, quantized  # noqa: F401

__all__ = ["intrinsic", "qat", "quantized"]
