"""Dynamic quantized recurrent layers and cells (``torch.ao.nn.quantized.dynamic``: ``LSTM``,
``GRU``, ``RNNCell``, ``LSTMCell``, ``GRUCell``).

Each gate projection (input-hidden and hidden-hidden) is a dynamic quantized linear product
(int8 weight with its bias, the activation quantized with its own range on every call, see
:mod:`fiamma.ao.nn.quantized.dynamic._ops`); the gate nonlinearities and state updates are
float32, as in PyTorch's ``quantized_lstm``/``quantized_gru``. As PyTorch does on the CPU,
each layer and direction projects the whole input sequence at once (one activation range for
the sequence) and the hidden state step by step (one range per step).

The state dict holds the weights as the float module names them (``weight_ih_l0`` a qint8
tensor, or float32 for ``dtype=float16``; ``bias_ih_l0`` float), not PyTorch's TorchScript
cell-parameter objects (``_all_weight_values.0.param``), which only PyTorch can read.

    >>> import fiamma
    >>> from fiamma import nn
    >>> from fiamma.ao.nn.quantized.dynamic import LSTM
    >>> from fiamma.ao.quantization import default_dynamic_qconfig
    >>> f = nn.LSTM(4, 3)
    >>> f.qconfig = default_dynamic_qconfig
    >>> q = LSTM.from_float(f)
    >>> out, (h, c) = q(fiamma.randn(5, 2, 4))
    >>> q, out.shape
    (DynamicQuantizedLSTM(4, 3), fiamma.Size([5, 2, 3]))
"""
import math

import numpy as np

import fiamma
from fiamma import nn
from fiamma.ao.nn.quantized.dynamic._ops import PackedLinear
from fiamma.ao.nn.quantized.dynamic.linear import _quantize, _to_np, _weight_observer
from fiamma.nn import _qtensor as Q
from fiamma.nn.modules.rnn import rnn_extra_repr

__all__ = ["RNNBase", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_F32 = np.float32
_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _sigmoid(a):
    return (_F32(1.0) / (_F32(1.0) + np.exp(-a))).astype(_F32, copy=False)


def _lstm_cell(gi, gh, h, c):
    g = gh + gi
    H = g.shape[-1] // 4
    s = _sigmoid(g)  # the input, forget and output gates (the cell gate's slice unused)
    c = s[:, H:2 * H] * c + s[:, :H] * np.tanh(g[:, 2 * H:3 * H])
    return s[:, 3 * H:] * np.tanh(c), c


def _gru_cell(gi, gh, h):
    ir, iz, in_ = np.split(gi, 3, axis=-1)
    hr, hz, hn = np.split(gh, 3, axis=-1)
    r = _sigmoid(hr + ir)
    z = _sigmoid(hz + iz)
    n = np.tanh(in_ + hn * r)
    return (h - n) * z + n


def _rnn_cell(gi, gh, relu):
    a = gh + gi
    return np.maximum(a, _F32(0)) if relu else np.tanh(a)


def _random_weight(rows, cols, dtype, stdv):
    w = fiamma.empty(rows, cols).uniform_(-stdv, stdv)
    if dtype is Q.qint8:
        return fiamma.quantize_per_tensor(w, 0.1, 0, Q.qint8)
    return w


def _check_dtype(dtype, what):
    if dtype not in (Q.qint8, fiamma.float16):
        raise RuntimeError(f"{what}: unsupported dtype {dtype!r} for dynamic quantization "
                           "(qint8 or float16)")


class _WeightsState:
    """Saves and loads the plain-attribute weights named in ``self._weight_names``."""

    def _weight_names(self):
        raise NotImplementedError

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for n in self._weight_names():
            destination[prefix + n] = self._w[n]

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        names = self._weight_names()
        for n in names:
            if prefix + n in state_dict:
                v = state_dict[prefix + n]
                self._w[n] = v if v is None or isinstance(v, Q.QTensor) else v.detach()
            elif strict:
                missing_keys.append(prefix + n)
        self.__dict__["_packs"] = {}
        rest = {k: v for k, v in state_dict.items()
                if not (k.startswith(prefix) and k[len(prefix):] in names)}
        super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def _pack(self, w_name, b_name):
        key = (w_name, b_name)
        w, b = self._w[w_name], self._w.get(b_name)
        p = self._packs.get(key)
        if p is None or p.weight is not w or p.bias is not b:
            p = PackedLinear(w, b)
            self._packs[key] = p
        return p

    def get_weight(self):
        return self._weight_bias()["weight"]

    def get_bias(self):
        return self._weight_bias()["bias"]


class RNNBase(_WeightsState, nn.Module):
    """The dynamic quantized LSTM and GRU layers' common machinery."""

    _FLOAT_MODULE = nn.RNNBase
    _version = 2

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, dtype=Q.qint8):
        super().__init__()
        if mode not in ("LSTM", "GRU"):
            raise RuntimeError(f"dynamic quantized RNN: unsupported mode {mode!r} (LSTM or "
                               "GRU)")
        _check_dtype(dtype, f"dynamic quantized {mode}")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.dtype = float(dropout), bidirectional, dtype
        self.version = 2
        self.training = False
        self.__dict__["_w"] = {}
        self.__dict__["_packs"] = {}
        gate = _GATES[mode] * hidden_size
        stdv = 1.0 / math.sqrt(hidden_size)
        for layer in range(num_layers):
            for d in range(self._dirs):
                isz = input_size if layer == 0 else hidden_size * self._dirs
                sfx = self._suffix(layer, d)
                self._w["weight_ih" + sfx] = _random_weight(gate, isz, dtype, stdv)
                self._w["weight_hh" + sfx] = _random_weight(gate, hidden_size, dtype, stdv)
                self._w["bias_ih" + sfx] = fiamma.randn(gate) if bias else None
                self._w["bias_hh" + sfx] = fiamma.randn(gate) if bias else None

    @property
    def _dirs(self):
        return 2 if self.bidirectional else 1

    @staticmethod
    def _suffix(layer, d):
        return f"_l{layer}" + ("_reverse" if d == 1 else "")

    def _weight_names(self):
        names = []
        for layer in range(self.num_layers):
            for d in range(self._dirs):
                sfx = self._suffix(layer, d)
                names += ["weight_ih" + sfx, "weight_hh" + sfx]
                if self.bias:
                    names += ["bias_ih" + sfx, "bias_hh" + sfx]
        return names

    def _get_name(self):
        return "DynamicQuantized" + self.mode

    def extra_repr(self):
        return rnn_extra_repr(self)

    def _weight_bias(self):
        """``{"weight": {name: weight}, "bias": {name: bias}}`` (PyTorch's layout)."""
        out = {"weight": {}, "bias": {}}
        for n in self._weight_names():
            out["weight" if n.startswith("weight") else "bias"][n] = self._w[n]
        return out

    def set_weight_bias(self, weight_bias_dict):
        """Replace the weights and biases from a ``{"weight": {...}, "bias": {...}}`` dict."""
        for kind in ("weight", "bias"):
            for n, v in weight_bias_dict.get(kind, {}).items():
                if n not in self._w:
                    raise KeyError(f"{self._get_name()}.set_weight_bias: unknown name {n!r}")
                self._w[n] = v
        self.__dict__["_packs"] = {}

    def _states(self, hx, batch, unbatched, name):
        n = self.num_layers * self._dirs
        want = (n, batch, self.hidden_size)
        lstm = self.mode == "LSTM"
        if hx is None:
            z = np.zeros(want, dtype=_F32)
            return [z, z.copy()] if lstm else [z]
        hs = list(hx) if lstm else [hx]
        if lstm and (not isinstance(hx, (tuple, list)) or len(hs) != 2):
            raise RuntimeError(f"{name}: hx must be a tuple (h_0, c_0)")
        out = []
        for k, h in enumerate(hs):
            a = _to_np(h, name)
            if unbatched:
                if a.ndim != 2:
                    raise RuntimeError(f"{name}: for unbatched 2-D input, hx should also be "
                                       f"2-D but got {a.ndim}-D tensor")
                a = a[:, None]
            if a.shape != want:
                shown = (n, self.hidden_size) if unbatched else want
                raise RuntimeError(f"{name}: Expected hidden[{k}] size {shown}, got "
                                   f"{list(h.shape)}")
            out.append(a)
        return out

    def forward(self, input, hx=None):
        name = self._get_name()
        from fiamma.nn.utils.rnn import PackedSequence
        if isinstance(input, PackedSequence):
            raise NotImplementedError(f"{name}: PackedSequence inputs are not supported by "
                                      "fiamma's dynamic quantized RNNs; pad the batch")
        if self.training and self.dropout > 0 and self.num_layers > 1:
            raise NotImplementedError(f"{name}: dropout in training mode is not supported "
                                      "(call .eval())")
        x = _to_np(input, name)
        if x.ndim not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {x.ndim}D instead")
        unbatched = x.ndim == 2
        if unbatched:
            x = x[:, None]
        elif self.batch_first:
            x = x.transpose(1, 0, 2)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        T, B = x.shape[0], x.shape[1]
        states = self._states(hx, B, unbatched, name)
        lstm = self.mode == "LSTM"
        reduce_range = self.version is None or self.version >= 2
        h_n, c_n = [], []
        layer_in = np.ascontiguousarray(x)
        for layer in range(self.num_layers):
            outs = []
            for d in range(self._dirs):
                idx = layer * self._dirs + d
                sfx = self._suffix(layer, d)
                p_ih = self._pack("weight_ih" + sfx, "bias_ih" + sfx)
                p_hh = self._pack("weight_hh" + sfx, "bias_hh" + sfx)
                h = states[0][idx]
                c = states[1][idx] if lstm else None
                whole = p_ih(layer_in, reduce_range, name)  # the whole sequence at once
                out = np.empty((T, B, self.hidden_size), dtype=_F32)
                for t in (range(T - 1, -1, -1) if d == 1 else range(T)):
                    gi = whole[t]
                    gh = p_hh(h, reduce_range, name)
                    if lstm:
                        h, c = _lstm_cell(gi, gh, h, c)
                    else:
                        h = _gru_cell(gi, gh, h)
                    out[t] = h
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_in = outs[0] if len(outs) == 1 else np.concatenate(outs, axis=-1)
        out = layer_in
        if unbatched:
            out = out[:, 0]
        elif self.batch_first:
            out = out.transpose(1, 0, 2)

        def t(a):
            return fiamma.from_numpy(np.ascontiguousarray(a, dtype=_F32)).to(input.dtype)

        def stack(hs):
            s = np.stack(hs)
            return t(s[:, 0] if unbatched else s)
        if lstm:
            return t(out), (stack(h_n), stack(c_n))
        return t(out), stack(h_n)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if type(mod) not in (nn.LSTM, nn.GRU):
            raise AssertionError("nn.quantized.dynamic.RNNBase.from_float only works for "
                                 f"nn.LSTM and nn.GRU, got {type(mod)}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        if getattr(mod, "proj_size", 0):
            raise NotImplementedError("dynamic quantized LSTM: proj_size > 0 is not supported "
                                      "(as in PyTorch)")
        factory = _weight_observer(mod)
        dtype = factory().dtype
        if dtype not in (Q.qint8, fiamma.float16):
            raise RuntimeError(f"Unsupported dtype for dynamic RNN quantization: {dtype!r}")
        qcls = LSTM if mod.mode == "LSTM" else GRU
        q = qcls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first,
                 mod.dropout, mod.bidirectional, dtype=dtype)
        what = f"dynamic quantized {mod.mode}"
        for n in q._weight_names():
            p = getattr(mod, n)
            if n.startswith("weight"):
                q._w[n] = _quantize(p, factory, what)
            else:
                q._w[n] = p.detach().float().clone()
        return q


class LSTM(RNNBase):
    """Dynamic quantized ``nn.LSTM`` (no ``proj_size``): ``forward(input, (h_0, c_0))`` ->
    ``output, (h_n, c_n)``."""

    _FLOAT_MODULE = nn.LSTM

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(mod, use_precomputed_fake_quant)


class GRU(RNNBase):
    """Dynamic quantized ``nn.GRU``: ``forward(input, h_0)`` -> ``output, h_n``."""

    _FLOAT_MODULE = nn.GRU

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return super().from_float(mod, use_precomputed_fake_quant)


class RNNCellBase(_WeightsState, nn.Module):
    """The dynamic quantized cells' common machinery (``weight_ih``, ``weight_hh``,
    ``bias_ih``, ``bias_hh``)."""

    _num_chunks = 1

    def __init__(self, input_size, hidden_size, bias=True, num_chunks=1, dtype=Q.qint8):
        super().__init__()
        _check_dtype(dtype, f"dynamic quantized {type(self).__name__}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_dtype = dtype
        self.__dict__["_w"] = {}
        self.__dict__["_packs"] = {}
        stdv = 1.0 / math.sqrt(hidden_size)
        g = num_chunks * hidden_size
        self._w["weight_ih"] = _random_weight(g, input_size, dtype, stdv)
        self._w["weight_hh"] = _random_weight(g, hidden_size, dtype, stdv)
        self._w["bias_ih"] = fiamma.randn(g) if bias else None
        self._w["bias_hh"] = fiamma.randn(g) if bias else None

    def _weight_names(self):
        return ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if self.bias else [])

    @property
    def bias_ih(self):
        return self._w["bias_ih"]

    @property
    def bias_hh(self):
        return self._w["bias_hh"]

    def _get_name(self):
        return "DynamicQuantized" + type(self).__name__

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _weight_bias(self):
        return {"weight": {"weight_ih": self._w["weight_ih"], "weight_hh": self._w["weight_hh"]},
                "bias": {"bias_ih": self._w["bias_ih"], "bias_hh": self._w["bias_hh"]}}

    def set_weight_bias(self, weight_bias_dict):
        for kind in ("weight", "bias"):
            self._w.update(weight_bias_dict.get(kind, {}))
        self.__dict__["_packs"] = {}

    def _prepare(self, input, hx, n_states):
        name = self._get_name()
        x = _to_np(input, name)
        if x.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {x.ndim}D instead")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got "
                               f"{x.shape[-1]} expected {self.input_size}")
        unbatched = x.ndim == 1
        if unbatched:
            x = x[None]
        B = x.shape[0]
        if hx is None:
            return x, [np.zeros((B, self.hidden_size), dtype=_F32)
                       for _ in range(n_states)], unbatched
        hs = list(hx) if n_states == 2 else [hx]
        if n_states == 2 and (not isinstance(hx, (tuple, list)) or len(hs) != 2):
            raise RuntimeError(f"{name}: hx must be a tuple (h_0, c_0)")
        states = []
        for k, h in enumerate(hs):
            a = _to_np(h, name)
            a = a[None] if unbatched and a.ndim == 1 else a
            if a.shape != (B, self.hidden_size):
                raise RuntimeError(f"{name}: Expected hidden[{k}] size "
                                   f"{(B, self.hidden_size)}, got {list(h.shape)}")
            states.append(a)
        return x, states, unbatched

    def _gates(self, x, h):
        name = self._get_name()
        gi = self._pack("weight_ih", "bias_ih")(x, True, name)
        gh = self._pack("weight_hh", "bias_hh")(h, True, name)
        return gi, gh

    @staticmethod
    def _out(a, unbatched, like):
        a = a[0] if unbatched else a
        return fiamma.from_numpy(np.ascontiguousarray(a, dtype=_F32)).to(like.dtype)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        floats = {nn.LSTMCell: LSTMCell, nn.GRUCell: GRUCell, nn.RNNCell: RNNCell}
        if type(mod) not in floats:
            raise AssertionError("nn.quantized.dynamic.RNNCellBase.from_float only works for "
                                 f"nn.LSTMCell, nn.GRUCell and nn.RNNCell, got {type(mod)}")
        if not hasattr(mod, "qconfig"):
            raise AssertionError("Input float module must have qconfig defined")
        factory = _weight_observer(mod)
        dtype = factory().dtype
        if dtype not in (Q.qint8, fiamma.float16):
            raise RuntimeError("Unsupported dtype for dynamic quantized cell: "
                               f"{dtype!r}")
        qcls = floats[type(mod)]
        if qcls is RNNCell:
            q = RNNCell(mod.input_size, mod.hidden_size, mod.bias, mod.nonlinearity, dtype)
        else:
            q = qcls(mod.input_size, mod.hidden_size, mod.bias, dtype=dtype)
        what = f"dynamic quantized {qcls.__name__}"
        q._w["weight_ih"] = _quantize(mod.weight_ih, factory, what)
        q._w["weight_hh"] = _quantize(mod.weight_hh, factory, what)
        if mod.bias:
            q._w["bias_ih"] = mod.bias_ih.detach().float().clone()
            q._w["bias_hh"] = mod.bias_hh.detach().float().clone()
        return q


class RNNCell(RNNCellBase):
    """Dynamic quantized ``nn.RNNCell``: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or
    ``relu``)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh",
                 dtype=Q.qint8):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._prepare(input, hx, 1)
        gi, gh = self._gates(x, h)
        return self._out(_rnn_cell(gi, gh, self.nonlinearity == "relu"), unbatched, input)


class LSTMCell(RNNCellBase):
    """Dynamic quantized ``nn.LSTMCell``: returns ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, dtype=Q.qint8):
        super().__init__(input_size, hidden_size, bias, 4, dtype)

    def forward(self, input, hx=None):
        x, (h, c), unbatched = self._prepare(input, hx, 2)
        gi, gh = self._gates(x, h)
        h, c = _lstm_cell(gi, gh, h, c)
        return self._out(h, unbatched, input), self._out(c, unbatched, input)


class GRUCell(RNNCellBase):
    """Dynamic quantized ``nn.GRUCell``: returns ``h'``."""

    def __init__(self, input_size, hidden_size, bias=True, dtype=Q.qint8):
        super().__init__(input_size, hidden_size, bias, 3, dtype)

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._prepare(input, hx, 1)
        gi, gh = self._gates(x, h)
        return self._out(_gru_cell(gi, gh, h), unbatched, input)
