"""Recurrent layers: RNN, LSTM, GRU and their single-step cells (``torch.nn`` API).

Parameter names, shapes, gate order and initialisation are PyTorch's, so its checkpoints load
by key. A layer is computed per (layer, direction) as one matrix product projecting the inputs
of every time step at once, then a loop over time that only does the hidden-state product and
the gate arithmetic. Everything is composed of differentiable core ops; a few small
``autograd.Function`` s (in ``_rnn_autograd.py``; their backwards are differentiable ops too,
so higher derivatives work) only regroup the graph: the gate arithmetic of a step is one node,
the per-step split of the projection has a single ``cat`` backward, and the recurrent weight's
gradient is one product over the whole sequence. Packed sequences run step ``t`` on its first
``batch_sizes[t]`` rows. LSTMs without projections and GRUs over sequences of one length
(float32/64, CPU) skip the Python loop: each layer and direction is one call into core's fused
layer (``fiamma.fused_lstm_layer`` / ``fused_gru_layer``) and one graph node.

>>> import fiamma
>>> from fiamma import nn
>>> lstm = nn.LSTM(4, 8, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(fiamma.randn(3, 5, 4))
>>> out.shape, h.shape, c.shape
(fiamma.Size([3, 5, 8]), fiamma.Size([2, 3, 8]), fiamma.Size([2, 3, 8]))
"""

import math
import numbers
import warnings

import fiamma
from fiamma.nn import functional as F, init
from fiamma.nn.modules.module import Module
from fiamma.nn.parameter import Parameter
from fiamma.nn.utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


_ag = None  # fiamma.nn.modules._rnn_autograd, imported by the first forward


def _load_autograd():
    global _ag
    if _ag is None:
        from fiamma.nn.modules import _rnn_autograd

        _ag = _rnn_autograd
    return _ag


def _split(x, sizes, dim):
    if len(sizes) == 1:
        return (x,)
    return _ag.Split.apply(x, list(sizes), dim)


def _linear(x, w, b):
    return fiamma.mm(x, w.t()) if b is None else fiamma.addmm(b, x, w.t())


# ---- one time step: ``mm(carry, h, w_t)`` is the hidden product (``_ag.StepMM.apply`` when
# recording, else ``fiamma.addmm``); xw is the projected input (with b_ih, and for LSTM and
# RNN also b_hh, which then is the carry). --------------------------------------------------------

def _rnn_tanh_step(xw, carry, state, w_t, w_hr_t, mm):
    return fiamma.tanh(mm(carry, state, w_t))


def _rnn_relu_step(xw, carry, state, w_t, w_hr_t, mm):
    return fiamma.relu(mm(carry, state, w_t))


def _lstm_step(xw, carry, state, w_t, w_hr_t, mm):
    h, c = state
    if not fiamma.is_grad_enabled():  # not recording: core's fused cell without the node
        h, c, _ = fiamma.fused_lstm_cell(mm(carry, h, w_t), c)
    else:
        h, c = _ag.LSTMPointwise.apply(mm(carry, h, w_t), c)
    if w_hr_t is not None:
        h = fiamma.mm(h, w_hr_t)
    return h, c


def _gru_step(xw, carry, h, w_t, w_hr_t, mm):
    return _ag.GRUPointwise.apply(xw, mm(carry, h, w_t), h)


_STEPS = {"LSTM": _lstm_step, "GRU": _gru_step, "RNN_TANH": _rnn_tanh_step,
          "RNN_RELU": _rnn_relu_step}


def _rows(state, lo, hi):
    if isinstance(state, tuple):
        return tuple(s[lo:hi] for s in state)
    return state[lo:hi]


def _cat_rows(parts):
    if isinstance(parts[0], tuple):
        return tuple(fiamma.cat([p[k] for p in parts], 0) for k in range(len(parts[0])))
    return fiamma.cat(parts, 0)


def _run_direction(step, xws, carries, sizes, state, weights, prevs, reverse):
    """Run ``step`` over the per-time-step projected inputs ``xws`` and carries (step t has
    ``sizes[t]`` rows, non-increasing); returns the list of outputs in time order and the
    final state (every sequence's state after its own last step). ``weights`` = (w_hh^T,
    w_hr^T or None, mm); ``prevs[t]`` gets the hidden state fed to step t."""
    w_t, w_hr, mm = weights
    T = len(xws)
    outs = [None] * T
    full = sizes[0] if T else 0
    if not reverse:
        done = []  # states of the sequences that ended early: highest rows (ended first) first
        cur = full
        for t in range(T):
            bs = sizes[t]
            if bs != cur:
                done.append(_rows(state, bs, cur))
                state = _rows(state, 0, bs)
                cur = bs
            prevs[t] = state[0] if isinstance(state, tuple) else state
            state = step(xws[t], carries[t], state, w_t, w_hr, mm)
            outs[t] = state[0] if isinstance(state, tuple) else state
        if done:
            state = _cat_rows([state] + done[::-1])
    else:
        init_state = state
        cur = sizes[-1] if T else 0
        if cur != full:
            state = _rows(state, 0, cur)
        for t in range(T - 1, -1, -1):
            bs = sizes[t]
            if bs != cur:  # sequences starting (from their end) at this step join
                state = _cat_rows([state, _rows(init_state, cur, bs)])
                cur = bs
            prevs[t] = state[0] if isinstance(state, tuple) else state
            state = step(xws[t], carries[t], state, w_t, w_hr, mm)
            outs[t] = state[0] if isinstance(state, tuple) else state
    return outs, state


def rnn_extra_repr(m):
    """PyTorch's repr arguments of a recurrent layer (the non-default ones after the sizes);
    the dynamically quantized layers print theirs the same way."""
    s = f"{m.input_size}, {m.hidden_size}"
    if getattr(m, "proj_size", 0) != 0:
        s += f", proj_size={m.proj_size}"
    if m.num_layers != 1:
        s += f", num_layers={m.num_layers}"
    if m.bias is not True:
        s += f", bias={m.bias}"
    if m.batch_first is not False:
        s += f", batch_first={m.batch_first}"
    if m.dropout != 0:
        s += f", dropout={m.dropout}"
    if m.bidirectional is not False:
        s += f", bidirectional={m.bidirectional}"
    return s


class RNNBase(Module):
    """The layers' common machinery (``mode`` is "LSTM", "GRU", "RNN_TANH" or "RNN_RELU")."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"{name}: unrecognized RNN mode: {mode}")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        for arg, v in (("input_size", input_size), ("hidden_size", hidden_size),
                       ("num_layers", num_layers), ("proj_size", proj_size)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{arg} should be of type int, got: {type(v).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.bias = num_layers, bias
        self.batch_first, self.dropout = batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        f = {"device": device, "dtype": dtype}
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        real = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for d in range(dirs):
                isz = input_size if layer == 0 else real * dirs
                sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")
                params = [("weight_ih" + sfx, (gate, isz)), ("weight_hh" + sfx, (gate, real))]
                if bias:
                    params += [("bias_ih" + sfx, (gate,)), ("bias_hh" + sfx, (gate,))]
                if proj_size > 0:
                    params.append(("weight_hr" + sfx, (proj_size, hidden_size)))
                for pname, shape in params:
                    setattr(self, pname, Parameter(fiamma.empty(*shape, **f)))
                names = [p for p, _ in params]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters, one list per (layer, direction)."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """Kept for PyTorch compatibility; parameters need no flattening here."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        return rnn_extra_repr(self)

    # ---- forward ---------------------------------------------------------------------------

    def _layer_weights(self, layer, d, dt=None):
        sfx = f"_l{layer}" + ("_reverse" if d == 1 else "")

        def g(n):
            w = getattr(self, n + sfx, None)
            return w.to(dt) if dt is not None and w is not None and w.dtype != dt else w
        return g("weight_ih"), g("weight_hh"), g("bias_ih"), g("bias_hh"), g("weight_hr")

    def _check_hidden(self, h, expected, what):
        if tuple(h.shape) != tuple(expected):
            raise RuntimeError(f"{type(self).__name__}: Expected {what} size "
                               f"{tuple(expected)}, got {list(h.shape)}")

    def _prepare(self, input, wdt=None):
        """(data (N, input_size), batch sizes per step, hx, batched, packed, sort/unsort)."""
        name = type(self).__name__
        packed = isinstance(input, PackedSequence)
        w0 = self.weight_ih_l0
        if packed:
            data, bsz, sorted_idx, unsorted_idx = input
            sizes = [int(n) for n in bsz.tolist()]
            B = sizes[0] if sizes else 0
            batched = True
            x = data
        else:
            if not isinstance(input, fiamma.Tensor):
                raise TypeError(f"{name}: input must be a Tensor or a PackedSequence, got "
                                f"{type(input).__name__}")
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                                 "tensor instead")
            batched = input.dim() == 3
            sorted_idx = unsorted_idx = None
            x = input if batched else input.unsqueeze(1)
            if batched and self.batch_first:
                x = x.transpose(0, 1)
            T, B = x.shape[0], x.shape[1]
            if T == 0:
                raise RuntimeError(f"{name}: Expected sequence length to be larger than 0 in "
                                   "RNN")
            sizes = [B] * T
        if x.dim() != 2 + (not packed) or x.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        if x.dtype != (w0.dtype if wdt is None else wdt):
            raise RuntimeError(f"{name}: input must have the type {w0.dtype}, got type "
                               f"{x.dtype}")
        if not packed:
            x = x.reshape(-1, self.input_size)
        return x, sizes, B, batched, packed, sorted_idx, unsorted_idx

    def _hidden(self, hx, B, batched, sorted_idx, dt, dev):
        name = type(self).__name__
        dirs = 2 if self.bidirectional else 1
        real = self.proj_size if self.proj_size > 0 else self.hidden_size
        shapes = [(self.num_layers * dirs, B, real)]
        if self.mode == "LSTM":
            shapes.append((self.num_layers * dirs, B, self.hidden_size))
        if hx is None:
            return [fiamma.zeros(s, dtype=dt, device=dev) for s in shapes]
        hs = list(hx) if self.mode == "LSTM" else [hx]
        if self.mode == "LSTM" and (not isinstance(hx, (tuple, list)) or len(hs) != 2):
            raise RuntimeError(f"{name}: hx must be a tuple (h_0, c_0)")
        out = []
        for k, (h, s) in enumerate(zip(hs, shapes)):
            if not isinstance(h, fiamma.Tensor):
                raise TypeError(f"{name}: hx must be a Tensor, got {type(h).__name__}")
            if batched and h.dim() != 3:
                raise RuntimeError(f"{name}: For batched 3-D input, hx should also be 3-D but "
                                   f"got {h.dim()}-D tensor")
            if not batched:
                if h.dim() != 2:
                    raise RuntimeError(f"{name}: For unbatched 2-D input, hx should also be "
                                       f"2-D but got {h.dim()}-D tensor")
                h = h.unsqueeze(1)
            what = "hidden" if self.mode != "LSTM" else f"hidden[{k}]"
            self._check_hidden(h, s, what)
            if h.dtype != dt:
                raise RuntimeError(f"{name}: hx must have the type {dt}, got type {h.dtype}")
            if sorted_idx is not None:
                h = h.index_select(1, sorted_idx)
            out.append(h)
        return out

    def forward(self, input, hx=None):
        ac = self._autocast_dtype(input)
        if ac is None:
            return self._forward(input, hx)
        if ac is False:  # not on the list: the whole layer in its own dtype
            with fiamma.autocast(self.weight_ih_l0.device.type, enabled=False):
                return self._forward(input, hx)
        return self._forward_autocast(input, hx, ac)

    def _autocast_dtype(self, input):
        """None outside autocast; inside, the dtype the layer runs in, or False to run it with
        autocast off. PyTorch's CPU autocast lists the fused RNN layer (LSTM without
        projections, Elman RNN): inputs, states and weights run in the lower precision, and so
        do all the results. GRU and projected LSTMs are not on the list: they run in their own
        dtype (float32 results), never half-cast."""
        data = input.data if isinstance(input, PackedSequence) else input
        if not isinstance(data, fiamma.Tensor):
            return None
        dev = data.device.type
        if dev not in ("cpu", "cuda") or not fiamma.is_autocast_enabled(dev):
            return None
        if self.mode == "GRU" or (self.mode == "LSTM" and self.proj_size > 0):
            return False
        dt = fiamma.get_autocast_dtype(dev)
        if data.dtype not in (fiamma.float32, fiamma.float16, fiamma.bfloat16) or \
                data.dtype == dt and self.weight_ih_l0.dtype == dt:
            return None
        return dt

    def _forward_autocast(self, input, hx, dt):
        cast = lambda t: t.to(dt) if t is not None and t.dtype != dt else t  # noqa: E731
        if isinstance(input, PackedSequence):
            input = input._with_data(cast(input.data))
        else:
            input = cast(input)
        if hx is not None:
            hx = tuple(cast(h) for h in hx) if isinstance(hx, (tuple, list)) else cast(hx)
        with fiamma.autocast(input.data.device.type if isinstance(input, PackedSequence)
                             else input.device.type, enabled=False):
            return self._forward(input, hx, dt)

    def _forward(self, input, hx, wdt=None):
        # wdt: the dtype the weights are cast to for this call (autocast), None as they are
        x, sizes, B, batched, packed, sorted_idx, unsorted_idx = self._prepare(input, wdt)
        _load_autograd()
        hidden = self._hidden(hx, B, batched, sorted_idx, x.dtype, x.device)
        dirs = 2 if self.bidirectional else 1
        step = _STEPS[self.mode]
        lstm = self.mode == "LSTM"
        recording = fiamma.is_grad_enabled()
        # one gradient product for the recurrent weight (StepMM + RecurrentWeight), except
        # under forward AD (see _rnn_autograd.forward_ad_active)
        trick = recording and not _ag.forward_ad_active()
        mm = _ag.StepMM.apply if trick else fiamma.addmm
        h_n, c_n = [], []
        # LSTM without projections, and GRU, over sequences of one length, float32/64 on the
        # CPU: core's fused layer (csrc/lstm.c, gru.c) instead of a product and a cell node per
        # time step
        fast = (self.mode == "GRU" or lstm and not self.proj_size) and \
            x.device.type == "cpu" and x.dtype in (fiamma.float32, fiamma.float64) and \
            min(sizes, default=0) == max(sizes, default=-1) > 0
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                x = F.dropout(x, self.dropout, True)
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(layer, d, wdt)
                gru = self.mode == "GRU"
                bias = b_ih + b_hh if b_ih is not None and not gru else b_ih
                xw = _linear(x, w_ih, bias)
                k = layer * dirs + d
                if fast and gru:  # the whole layer in one call (and one graph node)
                    if recording:
                        out, hn = _ag.GRULayer.apply(xw, hidden[0][k], w_hh, b_hh, d == 1)
                    else:
                        out, hn, _ = fiamma.fused_gru_layer(xw, w_hh, b_hh, hidden[0][k], d == 1)
                    outs.append(out)
                    h_n.append(hn)
                    continue
                if fast:
                    h0, c0 = hidden[0][k], hidden[1][k]
                    if recording:
                        out, hn, cn = _ag.LSTMLayer.apply(xw, h0, c0, w_hh, d == 1)
                    else:
                        out, hn, cn, _ = fiamma.fused_lstm_layer(xw, w_hh, h0, c0, d == 1)
                    outs.append(out)
                    h_n.append(hn)
                    c_n.append(cn)
                    continue
                w_t = w_hh.t()
                if not gru:
                    carry = xw
                elif b_hh is not None:
                    carry = b_hh.expand(xw.shape[0], b_hh.shape[0])
                else:
                    carry = fiamma.zeros(xw.shape, dtype=xw.dtype, device=xw.device)
                prevs = [None] * len(sizes)
                if trick:
                    carry = _ag.RecurrentWeight.apply(carry, w_t, prevs)
                carries = _split(carry, sizes, 0)
                xws = _split(xw, sizes, 0) if gru else carries
                state = (hidden[0][k], hidden[1][k]) if lstm else hidden[0][k]
                weights = (w_t, None if w_hr is None else w_hr.t(), mm)
                seq, state = _run_direction(step, xws, carries, sizes, state, weights, prevs,
                                            d == 1)
                outs.append(fiamma.cat(seq, 0) if len(seq) != 1 else seq[0])
                if lstm:
                    h_n.append(state[0])
                    c_n.append(state[1])
                else:
                    h_n.append(state)
            x = outs[0] if dirs == 1 else fiamma.cat(outs, 1)
        h_n = fiamma.stack(h_n, 0)
        c_n = fiamma.stack(c_n, 0) if lstm else None
        if packed:
            if unsorted_idx is not None:
                h_n = h_n.index_select(1, unsorted_idx)
                c_n = c_n.index_select(1, unsorted_idx) if lstm else None
            output = input._with_data(x)
        else:
            output = x.reshape(len(sizes), B, x.shape[-1])
            if not batched:
                output = output.squeeze(1)
                h_n = h_n.squeeze(1)
                c_n = c_n.squeeze(1) if lstm else None
            elif self.batch_first:
                output = output.transpose(0, 1)
        return output, ((h_n, c_n) if lstm else h_n)


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` with ``act`` tanh or
    relu, stacked ``num_layers`` deep (optionally bidirectional). Returns ``(output, h_n)``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> out, h = nn.RNN(3, 5, nonlinearity="relu")(fiamma.randn(7, 2, 3))
    >>> out.shape, h.shape
    (fiamma.Size([7, 2, 5]), fiamma.Size([1, 2, 5]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o in that order in the weights); with
    ``proj_size > 0`` the hidden state is projected by ``weight_hr``. Returns
    ``(output, (h_n, c_n))``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> out, (h, c) = nn.LSTM(3, 6, proj_size=2)(fiamma.randn(4, 3))   # unbatched
    >>> out.shape, h.shape, c.shape
    (fiamma.Size([4, 2]), fiamma.Size([1, 2]), fiamma.Size([1, 6]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n in that order in the weights;
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``).
    Returns ``(output, h_n)``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> out, h = nn.GRU(3, 5, bidirectional=True)(fiamma.randn(7, 2, 3))
    >>> out.shape, h.shape
    (fiamma.Size([7, 2, 10]), fiamma.Size([2, 2, 5]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


# ---- cells -------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """The cells' common parameters: ``weight_ih`` (G*hidden, input), ``weight_hh``
    (G*hidden, hidden), ``bias_ih`` and ``bias_hh`` (G*hidden)."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        f = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(fiamma.empty(num_chunks * hidden_size, input_size, **f))
        self.weight_hh = Parameter(fiamma.empty(num_chunks * hidden_size, hidden_size, **f))
        if bias:
            self.bias_ih = Parameter(fiamma.empty(num_chunks * hidden_size, **f))
            self.bias_hh = Parameter(fiamma.empty(num_chunks * hidden_size, **f))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nl = getattr(self, "nonlinearity", "tanh")
        if nl != "tanh":
            s += f", nonlinearity={nl}"
        return s

    def _check(self, input, hx, n_states):
        """(input as 2-D, states as 2-D (zeros when hx is None), whether input was 1-D)."""
        name = type(self).__name__
        if not isinstance(input, fiamma.Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             "instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got "
                               f"{input.shape[-1]} expected {self.input_size}")
        if input.dtype != self.weight_ih.dtype:
            raise RuntimeError(f"{name}: input must have the type {self.weight_ih.dtype}, got "
                               f"type {input.dtype}")
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        B = x.shape[0]
        if hx is None:
            states = [fiamma.zeros(B, self.hidden_size, dtype=x.dtype, device=x.device)
                      for _ in range(n_states)]
        else:
            states = list(hx) if n_states == 2 else [hx]
            if n_states == 2 and (not isinstance(hx, (tuple, list)) or len(states) != 2):
                raise RuntimeError(f"{name}: hx must be a tuple (h_0, c_0)")
            for k, h in enumerate(states):
                if h.dim() != input.dim():
                    raise RuntimeError(f"{name}: Expected hidden state to be {input.dim()}D "
                                       f"(like the input), got {h.dim()}D")
                h2 = h.unsqueeze(0) if unbatched else h
                if tuple(h2.shape) != (B, self.hidden_size):
                    want = (self.hidden_size,) if unbatched else (B, self.hidden_size)
                    raise RuntimeError(f"{name}: Expected hidden[{k}] size {want}, got "
                                       f"{list(h.shape)}")
                states[k] = h2
        return x, states, unbatched


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.RNNCell(3, 4)(fiamma.randn(2, 3)).shape
    fiamma.Size([2, 4])
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._check(input, hx, 1)
        pre = _linear(x, self.weight_ih, self.bias_ih)
        pre = fiamma.addmm(pre, h, self.weight_hh.t())
        if self.bias_hh is not None:
            pre = pre + self.bias_hh
        h = fiamma.tanh(pre) if self.nonlinearity == "tanh" else fiamma.relu(pre)
        return h.squeeze(0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``.

    >>> import fiamma
    >>> from fiamma import nn
    >>> h, c = nn.LSTMCell(3, 4)(fiamma.randn(2, 3))
    >>> h.shape, c.shape
    (fiamma.Size([2, 4]), fiamma.Size([2, 4]))
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, (h, c), unbatched = self._check(input, hx, 2)
        _load_autograd()
        xw = _linear(x, self.weight_ih, self.bias_ih)
        if self.bias_hh is not None:
            xw = xw + self.bias_hh
        h, c = _lstm_step(xw, xw, (h, c), self.weight_hh.t(), None, fiamma.addmm)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(RNNCellBase):
    """One GRU step.

    >>> import fiamma
    >>> from fiamma import nn
    >>> nn.GRUCell(3, 4)(fiamma.randn(3)).shape
    fiamma.Size([4])
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), unbatched = self._check(input, hx, 1)
        _load_autograd()
        xw = _linear(x, self.weight_ih, self.bias_ih)
        gh = _linear(h, self.weight_hh, self.bias_hh)
        h = _ag.GRUPointwise.apply(xw, gh, h)
        return h.squeeze(0) if unbatched else h
