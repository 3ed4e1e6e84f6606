"""Dynamic quantized ``Linear`` (``torch.ao.nn.quantized.dynamic.Linear``): float in, float
out, int8 weight; each input batch is quantized with its own range (see
:mod:`fiamma.ao.nn.quantized.dynamic._ops`).

    >>> import fiamma
    >>> from fiamma.ao.nn.quantized.dynamic import Linear
    >>> m = Linear(4, 3)
    >>> m(fiamma.randn(2, 4)).shape
    fiamma.Size([2, 3])
"""
import numpy as np

import fiamma
from fiamma import nn
from fiamma.ao.nn.quantized import modules as _qm
from fiamma.ao.nn.quantized.dynamic._ops import PackedLinear
from fiamma.nn import _qtensor as Q

__all__ = ["Linear"]


def _weight_observer(mod):
    qconfig = getattr(mod, "qconfig", None)
    if qconfig is not None and qconfig.weight is not None:
        return qconfig.weight
    from fiamma.ao.quantization.qconfig import default_dynamic_qconfig
    return default_dynamic_qconfig.weight


def _quantize(w, observer_factory, what):
    """The weight ``w`` (float) as the dynamic modules keep it: qint8 (per tensor or per
    channel, from the observer) or float32 (for a float16 observer)."""
    obs = observer_factory()
    dtype = obs.dtype
    if dtype not in (Q.qint8, fiamma.float16):
        raise RuntimeError(f"{what}: the only supported weight dtypes for dynamic quantization "
                           f"are qint8 and float16, got {dtype!r}")
    w = w.detach().float()
    if dtype is Q.qint8:
        return _qm._quantize_weight(w, obs)
    obs(w)
    return w.clone()


def _to_np(x, op):
    if isinstance(x, Q.QTensor):
        raise TypeError(f"{op}: expected a float tensor, got a quantized tensor "
                        f"({x.dtype!r}); dynamic quantized modules take float inputs")
    if not isinstance(x, fiamma.Tensor):
        raise TypeError(f"{op}: expected a fiamma.Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype}")
    return np.asarray(x.detach().float().numpy(), dtype=np.float32)


class Linear(_qm.Linear):
    """A linear layer with an int8 (``qint8``, per tensor or per channel) or float16 weight
    and float activations: each call quantizes the input to quint8 with the range of that
    batch (7-bit, ``reduce_range``, as PyTorch's x86/fbgemm module), accumulates exactly in
    integers and returns float32 (cast to the input's dtype)."""

    _FLOAT_MODULE = nn.Linear
    _version = 4

    def __init__(self, in_features, out_features, bias_=True, dtype=Q.qint8):
        if dtype not in (Q.qint8, fiamma.float16):
            raise RuntimeError(f"dynamic quantized Linear: unsupported dtype {dtype!r} "
                               "(qint8 or float16)")
        super().__init__(in_features, out_features, bias_, dtype=dtype)
        if dtype is fiamma.float16:
            self._packed_params.set_weight_bias(fiamma.zeros(out_features, in_features),
                                                self._packed_params._bias)
        self.version = 4
        self.__dict__["_packed_cache"] = None

    def set_weight_bias(self, w, b):
        super().set_weight_bias(w, b)
        self.__dict__["_packed_cache"] = None

    def _packed(self):
        w, b = self._packed_params._weight_bias()
        cache = self.__dict__.get("_packed_cache")
        if cache is None or cache.weight is not w or cache.bias is not b:
            cache = PackedLinear(w, b)
            self.__dict__["_packed_cache"] = cache
        return cache

    def forward(self, x):
        op = "dynamic quantized Linear"
        a = _to_np(x, op)
        dtype = self._packed_params.dtype
        if dtype not in (Q.qint8, fiamma.float16):
            raise RuntimeError(f"{op}: unsupported dtype {dtype!r}")
        reduce_range = self.version is not None and self.version >= 4
        y = self._packed()(a, reduce_range=reduce_range, op=op)
        out = fiamma.from_numpy(np.ascontiguousarray(y))
        if self._relu:
            out = fiamma.relu(out)
        return out.to(x.dtype)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        self.version = (local_metadata or {}).get("version", self.version)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)
        self.__dict__["_packed_cache"] = None

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        from fiamma.ao.nn import intrinsic as nni
        from fiamma.nn.modules.transformer import NonDynamicallyQuantizableLinear
        floats = (nn.Linear, NonDynamicallyQuantizableLinear, nni.LinearReLU)
        if type(mod) not in floats:
            raise AssertionError("nn.quantized.dynamic.Linear.from_float only works for one of "
                                 f"{[f.__name__ for f in floats]}, got {type(mod)}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        lin = mod[0] if isinstance(mod, nni.LinearReLU) else mod
        qw = _quantize(lin.weight, _weight_observer(mod), "dynamic quantized Linear")
        dtype = Q.qint8 if isinstance(qw, Q.QTensor) else fiamma.float16
        q = cls(lin.in_features, lin.out_features, dtype=dtype)
        q.set_weight_bias(qw, None if lin.bias is None else lin.bias.detach().float().clone())
        return q

    def _get_name(self):
        return "DynamicQuantizedLinear"

    def extra_repr(self):
        s = (f"in_features={self.in_features}, out_features={self.out_features}, "
             f"dtype={self._packed_params.dtype}")
        if self._packed_params.dtype is Q.qint8:
            s += f", qscheme={self.weight().qscheme()}"
        return s

    def __repr__(self):  # the packed parameters are not shown (as in PyTorch)
        return f"{self._get_name()}({self.extra_repr()})"
