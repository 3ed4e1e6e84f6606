"""Int8 modules (``torch.ao.nn.quantized``): what ``convert`` swaps the observed float modules
for. Their state dicts have PyTorch's keys and values (``weight`` a qint8 tensor, ``bias``
float, ``scale``/``zero_point`` tensors; ``Linear`` keeps ``_packed_params._packed_params``
= ``(weight, bias)``), so torch-saved quantized checkpoints load.

    >>> import fiamma
    >>> from fiamma.ao.nn.quantized import Quantize, DeQuantize
    >>> q = Quantize(0.1, 0, fiamma.quint8)(fiamma.tensor([0.5, 1.0]))
    >>> q.int_repr(), DeQuantize()(q)
    (tensor([ 5, 10], dtype=fiamma.uint8), tensor([0.5000, 1.0000]))
"""
import fiamma
from fiamma import nn
from fiamma.ao.nn.quantized import functional as qF
from fiamma.nn import _qtensor as Q

__all__ = ["Quantize", "DeQuantize", "Conv2d", "Linear", "LinearPackedParams", "QFunctional",
           "ReLU6", "Hardswish", "Dropout"]


def _act_qparams(mod):
    """(scale, zero_point) from the observer ``prepare`` attached to ``mod``."""
    obs = getattr(mod, "activation_post_process", None)
    if obs is None or not hasattr(obs, "calculate_qparams"):
        raise RuntimeError(f"convert: {type(mod).__name__} has no activation observer "
                           "(activation_post_process): was the model prepared and given a "
                           "qconfig?")
    scale, zp = obs.calculate_qparams()
    return float(scale.reshape(-1)[0]), int(zp.reshape(-1)[0]), obs.dtype


def _quantize_weight(w, observer):
    observer(w)
    scale, zp = observer.calculate_qparams()
    if observer.dtype is not Q.qint8:
        raise NotImplementedError(f"quantized weights: only qint8 is supported, the qconfig's "
                                  f"weight observer gives {observer.dtype!r}")
    if observer.qscheme in (Q.per_channel_affine, Q.per_channel_symmetric):
        return fiamma.quantize_per_channel(w, scale.to(fiamma.float64), zp, observer.ch_axis,
                                           Q.qint8)
    if observer.qscheme in (Q.per_tensor_affine, Q.per_tensor_symmetric):
        return fiamma.quantize_per_tensor(w, float(scale.reshape(-1)[0]),
                                          int(zp.reshape(-1)[0]), Q.qint8)
    raise NotImplementedError(f"quantized weights: qscheme {observer.qscheme!r} is not "
                              "supported")


class _StateMixin:
    """Saves ``_q_keys`` (name -> getter) and loads them with ``_q_load``."""

    def _save_q(self, destination, prefix):
        destination[prefix + "scale"] = fiamma.tensor(self.scale)
        destination[prefix + "zero_point"] = fiamma.tensor(self.zero_point)

    def _take(self, state_dict, prefix, names, missing_keys, strict):
        got = {}
        for n in names:
            if prefix + n in state_dict:
                got[n] = state_dict[prefix + n]
            elif strict:
                missing_keys.append(prefix + n)
        return got, {k: v for k, v in state_dict.items()
                     if not (k.startswith(prefix) and k[len(prefix):] in names)}


class _QParamsState(_StateMixin):
    """A module whose state is its output ``scale`` and ``zero_point`` (plus what nn.Module
    keeps): Linear's packed parameters are a submodule, QFunctional has nothing else."""

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self._save_q(destination, prefix)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        got, rest = self._take(state_dict, prefix, ("scale", "zero_point"), missing_keys,
                               strict)
        if "scale" in got:
            self.scale = float(got["scale"])
        if "zero_point" in got:
            self.zero_point = int(got["zero_point"])
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class Quantize(nn.Module):
    """Float to quantized with fixed ``scale``/``zero_point`` (``QuantStub`` after convert)."""

    def __init__(self, scale, zero_point, dtype, factory_kwargs=None):
        super().__init__()
        self.register_buffer("scale", fiamma.tensor([float(scale)]))
        self.register_buffer("zero_point", fiamma.tensor([int(zero_point)]))
        self.dtype = dtype

    def forward(self, X):
        return fiamma.quantize_per_tensor(X, float(self.scale[0]), int(self.zero_point[0]),
                                          self.dtype)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zp, dtype = _act_qparams(mod)
        return cls(scale, zp, dtype)

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(nn.Module):
    """Quantized to float32 (``DeQuantStub`` after convert)."""

    def forward(self, Xq):
        return Xq.dequantize() if isinstance(Xq, Q.QTensor) else Xq

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls()


class _ConvNd(_StateMixin, nn.Module):
    """Int8 ``_nd``-d convolution: quint8 in, qint8 weight (per channel or per tensor), float
    bias, quint8 out with ``scale``/``zero_point``."""

    _FLOAT_MODULE = None
    _relu = False
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__()
        def pair(v):
            return (v,) * self._nd if isinstance(v, int) else tuple(v)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = pair(kernel_size), pair(stride)
        self.padding, self.dilation = pair(padding), pair(dilation)
        self.groups, self.padding_mode = groups, padding_mode
        w = fiamma.zeros(out_channels, in_channels // groups, *self.kernel_size)
        self.set_weight_bias(fiamma.quantize_per_tensor(w, 1.0, 0, Q.qint8),
                             fiamma.zeros(out_channels) if bias else None)
        self.scale, self.zero_point = 1.0, 0

    def set_weight_bias(self, w, b):
        # plain attributes, not parameters: the state dict is written by _save_to_state_dict
        self.__dict__["_weight"], self.__dict__["_bias"] = w, b

    def weight(self):
        return self._weight

    def bias(self):
        return self._bias

    def forward(self, input):
        return qF._conv(self._nd, input, self._weight, self._bias, self.stride, self.padding,
                        self.dilation, self.groups, self.padding_mode, self.scale,
                        self.zero_point, _relu=self._relu)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self._weight
        destination[prefix + "bias"] = self._bias
        self._save_q(destination, prefix)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        got, rest = self._take(state_dict, prefix, ("weight", "bias", "scale", "zero_point"),
                               missing_keys, strict)
        if "weight" in got:
            self.set_weight_bias(got["weight"], got.get("bias", self._bias))
        if "scale" in got:
            self.scale = float(got["scale"])
        if "zero_point" in got:
            self.zero_point = int(got["zero_point"])
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        conv = mod[0] if isinstance(mod, nn.Sequential) else mod
        if conv.padding_mode != "zeros":
            raise NotImplementedError(f"quantized {cls.__name__}: padding_mode "
                                      f"{conv.padding_mode!r} is not supported")
        scale, zp, _ = _act_qparams(mod)
        if hasattr(mod, "weight_fake_quant"):  # a QAT module: its fake-quantizer's qparams
            bn = getattr(mod, "bn", None)
            if bn is not None:  # QAT conv + bn: fold the batch norm's statistics first
                mod.weight, mod.bias = nn.utils.fuse_conv_bn_weights(
                    mod.weight, mod.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight,
                    bn.bias)
            qw = _quantize_weight(conv.weight.detach(), mod.weight_fake_quant)
        else:
            qw = _quantize_weight(conv.weight.detach(), mod.qconfig.weight())
        q = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                conv.padding, conv.dilation, conv.groups, conv.bias is not None)
        q.set_weight_bias(qw, None if conv.bias is None else conv.bias.detach().clone())
        q.scale, q.zero_point = scale, zp
        return q

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, scale={self.scale}, zero_point={self.zero_point}, "
                f"padding={self.padding}")

    def _get_name(self):
        return "Quantized" + type(self).__name__


class Conv2d(_ConvNd):
    """Int8 2-d convolution: quint8 in, qint8 weight (per channel or per tensor), float bias,
    quint8 out with ``scale``/``zero_point``."""

    _FLOAT_MODULE = nn.Conv2d
    _nd = 2


class LinearPackedParams(nn.Module):
    """Holds a quantized linear layer's ``(weight, bias)`` (PyTorch keeps them packed for
    fbgemm; the state dict has ``dtype`` and ``_packed_params`` = the tuple)."""

    def __init__(self, dtype=Q.qint8):
        super().__init__()
        self.dtype = dtype
        self.set_weight_bias(None, None)

    def set_weight_bias(self, w, b):
        self.__dict__["_weight"], self.__dict__["_bias"] = w, b

    def _weight_bias(self):
        return self._weight, self._bias

    def forward(self, x):
        return x

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_params"] = self._weight_bias()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        if prefix + "dtype" in state_dict:
            self.dtype = state_dict[prefix + "dtype"]
        key = prefix + "_packed_params"
        if key in state_dict:
            w, b = state_dict[key]
            self.set_weight_bias(w, b)
        elif strict:
            missing_keys.append(key)
        rest = {k: v for k, v in state_dict.items()
                if k not in (prefix + "dtype", key)}
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def __repr__(self):
        return "LinearPackedParams()"


class Linear(_QParamsState, nn.Module):
    """Int8 linear layer: quint8 in, qint8 weight, float bias, quint8 out."""

    _FLOAT_MODULE = nn.Linear
    _relu = False

    def __init__(self, in_features, out_features, bias_=True, dtype=Q.qint8):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._packed_params = LinearPackedParams(dtype)
        w = fiamma.quantize_per_tensor(fiamma.zeros(out_features, in_features), 1.0, 0,
                                       Q.qint8)
        self._packed_params.set_weight_bias(w, fiamma.zeros(out_features) if bias_ else None)
        self.scale, self.zero_point = 1.0, 0

    def weight(self):
        return self._packed_params._weight

    def bias(self):
        return self._packed_params._bias

    def set_weight_bias(self, w, b):
        self._packed_params.set_weight_bias(w, b)

    def forward(self, x):
        w, b = self._packed_params._weight_bias()
        return qF.linear(x, w, b, self.scale, self.zero_point, _relu=self._relu)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        lin = mod[0] if isinstance(mod, nn.Sequential) else mod
        scale, zp, _ = _act_qparams(mod)
        wpp = getattr(mod, "weight_fake_quant", None)  # a QAT module's fake-quantizer
        bn = getattr(mod, "bn", None) if wpp is not None else None
        if bn is not None:  # QAT linear + bn (LinearBn1d): fold the batch norm's statistics
            mod.weight, mod.bias = nn.utils.fuse_linear_bn_weights(
                mod.weight, mod.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight,
                bn.bias)
        qw = _quantize_weight(lin.weight.detach(), wpp or mod.qconfig.weight())
        q = cls(lin.in_features, lin.out_features)
        q.set_weight_bias(qw, None if lin.bias is None else lin.bias.detach().clone())
        q.scale, q.zero_point = scale, zp
        return q

    def extra_repr(self):
        w = self.weight()
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"scale={self.scale}, zero_point={self.zero_point}, qscheme={w.qscheme()}")

    def _get_name(self):
        return "Quantized" + type(self).__name__


class QFunctional(_QParamsState, nn.Module):
    """``FloatFunctional`` after convert: add / add_relu / mul / cat on quantized tensors,
    requantized to this module's ``scale``/``zero_point``."""

    def __init__(self):
        super().__init__()
        self.scale, self.zero_point = 1.0, 0
        self.activation_post_process = nn.Identity()

    def forward(self, x):
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the "
                           "underlying operation")

    def add(self, x, y):
        return qF.add(x, y, self.scale, self.zero_point)

    def add_relu(self, x, y):
        return qF.add_relu(x, y, self.scale, self.zero_point)

    def mul(self, x, y):
        return qF.mul(x, y, self.scale, self.zero_point)

    def cat(self, x, dim=0):
        return qF.cat(x, dim, self.scale, self.zero_point)

    def add_scalar(self, x, y):
        raise NotImplementedError("QFunctional.add_scalar is not supported in fiamma yet")

    def mul_scalar(self, x, y):
        raise NotImplementedError("QFunctional.mul_scalar is not supported in fiamma yet")

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        q = cls()
        q.scale, q.zero_point, _ = _act_qparams(mod)
        return q

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}"


class ReLU6(nn.ReLU6):
    """ReLU6 on quantized tensors (the input's qparams)."""

    def forward(self, input):
        return qF.relu6(input)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.inplace)


class Hardswish(nn.Hardswish):
    """Hardswish on quantized tensors, requantized to ``scale``/``zero_point``."""

    def __init__(self, scale, zero_point, device=None, dtype=None):
        super().__init__()
        self.scale, self.zero_point = scale, zero_point

    def forward(self, input):
        return qF.hardswish(input, self.scale, self.zero_point)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        scale, zp, _ = _act_qparams(mod)
        return cls(scale, zp)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "scale"] = fiamma.tensor(self.scale)
        destination[prefix + "zero_point"] = fiamma.tensor(self.zero_point)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "scale" in state_dict:
            self.scale = float(state_dict[prefix + "scale"])
            self.zero_point = int(state_dict[prefix + "zero_point"])
        rest = {k: v for k, v in state_dict.items()
                if k not in (prefix + "scale", prefix + "zero_point")}
        super()._load_from_state_dict(rest, prefix, *args, **kwargs)


class Dropout(nn.Dropout):
    """Dropout after convert: the identity (a converted model is for inference)."""

    def forward(self, input):
        return input

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls(mod.p, mod.inplace)
