"""``fiamma.ao.nn.intrinsic.quantized.dynamic`` (``torch.ao.nn.intrinsic.quantized.dynamic``):
``LinearReLU``, the dynamic quantized ``Linear`` followed by a ReLU on its float output (what
``quantize_dynamic`` makes of a fused ``nn.intrinsic.LinearReLU`` given a qconfig; as in
PyTorch, the default ``qconfig_spec`` does not name the fused type, so name it).

    >>> import fiamma
    >>> from fiamma import nn
    >>> import fiamma.ao.nn.intrinsic as nni
    >>> import fiamma.ao.quantization as tq
    >>> m = nn.Sequential(nni.LinearReLU(nn.Linear(3, 2), nn.ReLU()))
    >>> q = tq.quantize_dynamic(m, {nni.LinearReLU})
    >>> q[0]._get_name(), bool((q[0](fiamma.randn(4, 3)) >= 0).all())
    ('DynamicQuantizedLinearReLU', True)
"""
from fiamma.ao.nn import intrinsic as nni
from fiamma.ao.nn.quantized.dynamic import linear as _dl

__all__ = ["LinearReLU"]


class LinearReLU(_dl.Linear):
    """Dynamic quantized Linear + ReLU: float in, float out, int8 (or float16) weight."""

    _FLOAT_MODULE = nni.LinearReLU
    _relu = True

    def _get_name(self):
        return "DynamicQuantizedLinearReLU"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(mod, use_precomputed_fake_quant)
