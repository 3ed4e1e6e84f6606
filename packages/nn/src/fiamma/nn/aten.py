"""PyTorch's ATen-level functional bindings that ``torch`` exposes at its top level
(``torch.dropout(input, p, train)``, ``torch.kl_div(input, target, reduction=1)``,
``torch.lstm_cell(...)``, ...), with their signatures: positional ``train`` flags, integer
``reduction`` codes (0 none, 1 mean, 2 sum) and integer grid-sampler modes. They compute with
``fiamma.nn.functional``; ``fiamma.<name>`` resolves here (core itself does not depend on
fiamma-nn).

>>> import fiamma
>>> fiamma.constant_pad_nd(fiamma.ones(1, 2), [1, 1], 0.5).tolist()
[[0.5, 1.0, 1.0, 0.5]]
>>> round(fiamma.kl_div(fiamma.zeros(2), fiamma.tensor([0.5, 0.5]), 2).item(), 4)
-0.6931
"""

import warnings

import fiamma
from fiamma.nn import functional as F

__all__ = [
    "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_dropout",
    "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "native_dropout",
    "bilinear", "prelu", "binary_cross_entropy_with_logits", "constant_pad_nd",
    "cosine_embedding_loss", "hinge_embedding_loss", "kl_div", "margin_ranking_loss",
    "poisson_nll_loss", "triplet_margin_loss", "ctc_loss", "grid_sampler_2d", "grid_sampler_3d",
    "affine_grid_generator", "native_channel_shuffle", "norm_except_dim", "conv_tbc",
    "rnn_tanh_cell", "rnn_relu_cell", "gru_cell", "lstm_cell", "rnn_tanh", "rnn_relu", "gru",
    "lstm",
]

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
_INTERP = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _reduction(code, op):
    if isinstance(code, str) and code in _REDUCTIONS.values():
        return code
    try:
        return _REDUCTIONS[code]
    except (KeyError, TypeError):
        raise ValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got "
                         f"{code!r}") from None


# ---- dropout family -----------------------------------------------------------------------

def dropout(input, p, train):
    """``F.dropout(input, p, train)``."""
    return F.dropout(input, p, train)


def dropout_(input, p, train):
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    return F.alpha_dropout(input, p, train, inplace=True)


def _channel_mask(input, p, op):
    if input.dim() < 2:
        raise RuntimeError(f"{op}: expected an input of at least 2 dimensions (N, C, ...), got "
                           f"{input.dim()}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    return fiamma.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(1 - p)


def feature_dropout(input, p, train):
    """Dropout of whole channels (dim 1) of an ``(N, C, ...)`` input, scaled by ``1/(1-p)``:
    what ``F.dropout1d/2d/3d`` compute."""
    if not train or p == 0:
        return input.clone() if train else input
    mask = _channel_mask(input, p, "feature_dropout")
    return input * mask.div_(1 - p) if p < 1 else input * mask


def feature_dropout_(input, p, train):
    return input.copy_(feature_dropout(input, p, train)) if train else input


def feature_alpha_dropout(input, p, train):
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def native_dropout(input, p, train):
    """``(output, mask)``: dropout and the bool mask of the kept elements (``train=None`` means
    training, as in PyTorch; not training: the input and an all-True mask)."""
    if train is False:
        return input.clone(), fiamma.ones(input.shape, dtype=fiamma.bool, device=input.device)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"native_dropout: probability has to be between 0 and 1, but got {p}")
    keep = fiamma.empty(input.shape, dtype=input.dtype, device=input.device).bernoulli_(1 - p)
    scale = 0.0 if p == 1 else 1.0 / (1 - p)
    return input * keep * scale, keep.bool()


# ---- layers and losses with ATen signatures -------------------------------------------------

def bilinear(input1, input2, weight, bias=None):
    return F.bilinear(input1, input2, weight, bias)


def prelu(input, weight):
    return F.prelu(input, weight)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    return F.binary_cross_entropy_with_logits(
        input, target, weight, pos_weight=pos_weight,
        reduction=_reduction(reduction, "binary_cross_entropy_with_logits"))


def constant_pad_nd(input, pad, value=0):
    """``F.pad(input, pad, 'constant', value)`` (negative pads crop)."""
    return F.pad(input, list(pad), "constant", value)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction(reduction, "cosine_embedding_loss"))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return F.hinge_embedding_loss(input, target, margin,
                                  reduction=_reduction(reduction, "hinge_embedding_loss"))


def kl_div(input, target, reduction=1, *, log_target=False):
    """``F.kl_div`` with an integer reduction; 1 is the element mean (without F.kl_div's
    warning about 'batchmean', as ATen's)."""
    red = _reduction(reduction, "kl_div")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return F.kl_div(input, target, reduction=red, log_target=log_target)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction(reduction, "margin_ranking_loss"))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction, "poisson_nll_loss"))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                        reduction=1):
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction, "triplet_margin_loss"))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1,
             zero_infinity=False):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction(reduction, "ctc_loss"), zero_infinity)


def _grid_sampler(op, nd, input, grid, interpolation_mode, padding_mode, align_corners):
    if input.dim() != nd + 2:
        raise RuntimeError(f"{op}: expected a {nd + 2}-d input, got {input.dim()}-d")
    try:
        mode, pad = _INTERP[interpolation_mode], _PADDING[padding_mode]
    except KeyError:
        raise ValueError(f"{op}: interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 "
                         f"(bicubic) and padding_mode 0 (zeros), 1 (border) or 2 (reflection),"
                         f" got {interpolation_mode} and {padding_mode}") from None
    return F.grid_sample(input, grid, mode, pad, align_corners)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """``F.grid_sample`` of a 4-d input with integer modes (interpolation 0 bilinear,
    1 nearest, 2 bicubic; padding 0 zeros, 1 border, 2 reflection)."""
    return _grid_sampler("grid_sampler_2d", 2, input, grid, interpolation_mode, padding_mode,
                         align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """``F.grid_sample`` of a 5-d input with integer modes."""
    return _grid_sampler("grid_sampler_3d", 3, input, grid, interpolation_mode, padding_mode,
                         align_corners)


def affine_grid_generator(theta, size, align_corners):
    return F.affine_grid(theta, list(size), align_corners)


def native_channel_shuffle(input, groups):
    return F.channel_shuffle(input, groups)


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm of ``v`` over every dim but ``dim``, keeping them as size 1 (what
    weight normalisation divides by); ``dim=-1``: the norm of all of ``v`` (0-d)."""
    if dim == -1:
        return fiamma.linalg.vector_norm(v, pow)
    d = dim % v.dim()
    others = tuple(i for i in range(v.dim()) if i != d)
    return fiamma.linalg.vector_norm(v, pow, others, keepdim=True)


def conv_tbc(input, weight, bias, pad=0):
    """A 1-d convolution in time-batch-channel layout: ``input`` ``(T, B, C_in)``, ``weight``
    ``(K, C_in, C_out)``, ``bias`` ``(C_out)``, zero padding ``pad`` on both ends of time;
    result ``(T + 2 pad - K + 1, B, C_out)``."""
    if input.dim() != 3 or weight.dim() != 3 or bias.dim() != 1:
        raise RuntimeError(f"conv_tbc: expected a 3-d input and weight and a 1-d bias, got "
                           f"{input.dim()}, {weight.dim()} and {bias.dim()}")
    if input.shape[2] != weight.shape[1] or bias.shape[0] != weight.shape[2]:
        raise RuntimeError(f"conv_tbc: input channels {input.shape[2]} / weight "
                           f"{tuple(weight.shape)} / bias {tuple(bias.shape)} do not match")
    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


# ---- recurrent cells ----------------------------------------------------------------------

def _lin(x, w, b):
    y = x @ w.T
    return y if b is None else y + b


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return fiamma.tanh(_lin(input, w_ih, b_ih) + _lin(hx, w_hh, b_hh))


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``relu(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return fiamma.relu(_lin(input, w_ih, b_ih) + _lin(hx, w_hh, b_hh))


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step (gates r, z, n in PyTorch's order; ``n = tanh(W_in x + b_in + r *
    (W_hn h + b_hn))``, ``h' = (1 - z) n + z h``)."""
    gi = _lin(input, w_ih, b_ih).chunk(3, -1)
    gh = _lin(hx, w_hh, b_hh).chunk(3, -1)
    r = fiamma.sigmoid(gi[0] + gh[0])
    z = fiamma.sigmoid(gi[1] + gh[1])
    n = fiamma.tanh(gi[2] + r * gh[2])
    return n + z * (hx - n)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: ``hx = (h, c)``; gates i, f, g, o in PyTorch's order; returns
    ``(h', c')``."""
    h, c = hx
    gates = _lin(input, w_ih, b_ih) + _lin(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c2 = fiamma.sigmoid(f) * c + fiamma.sigmoid(i) * fiamma.tanh(g)
    return fiamma.sigmoid(o) * fiamma.tanh(c2), c2


# ---- whole recurrent layers (ATen's flat-parameter forms) ------------------------------------

def _rnn(kind, args, kwargs):
    """The two ATen overloads: (input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first) and, over packed data, (data, batch_sizes, hx, params,
    has_biases, num_layers, dropout, train, bidirectional)."""
    names_in = ("input", "hx", "params", "has_biases", "num_layers", "dropout", "train",
                "bidirectional", "batch_first")
    names_packed = ("data", "batch_sizes", "hx", "params", "has_biases", "num_layers",
                    "dropout", "train", "bidirectional")
    packed = ("batch_sizes" in kwargs or "data" in kwargs
              or (len(args) > 3 and isinstance(args[3], (list, tuple))))
    names = names_packed if packed else names_in
    if len(args) > len(names):
        raise TypeError(f"{kind}: expected at most {len(names)} arguments, got {len(args)}")
    a = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in a:
            raise TypeError(f"{kind}: unexpected or repeated argument {k!r}")
        a[k] = v
    missing = [n for n in names if n not in a]
    if missing:
        raise TypeError(f"{kind}: missing arguments {missing}")
    lstm = kind == "lstm"
    hx = a["hx"]
    if lstm and (not isinstance(hx, (list, tuple)) or len(hx) != 2):
        raise RuntimeError("lstm: hx must be a list of two tensors (h_0, c_0)")
    layers, dirs = int(a["num_layers"]), 2 if a["bidirectional"] else 1
    params = list(a["params"])
    base = 4 if a["has_biases"] else 2
    if len(params) == layers * dirs * base:
        proj = False
    elif lstm and len(params) == layers * dirs * (base + 1):
        proj = True
    else:
        raise RuntimeError(f"{kind}: got {len(params)} parameters for {layers} layer(s) x "
                           f"{dirs} direction(s) with has_biases={a['has_biases']}")
    per = base + proj
    cell = {"rnn_tanh": rnn_tanh_cell, "rnn_relu": rnn_relu_cell, "gru": gru_cell,
            "lstm": lstm_cell}[kind]
    if packed:
        x, sizes = a["data"], [int(b) for b in a["batch_sizes"].tolist()]
        starts = [0]
        for b in sizes:
            starts.append(starts[-1] + b)
        steps = [x[starts[t]:starts[t + 1]] for t in range(len(sizes))]
    else:
        x = a["input"]
        if x.dim() != 3:
            raise RuntimeError(f"{kind}: expected a 3-d input (seq, batch, feature), got "
                               f"{x.dim()}-d")
        if a["batch_first"]:
            x = x.transpose(0, 1)
        steps = list(x.unbind(0))
        sizes = [x.shape[1]] * len(steps)
    h_n, c_n = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            idx = layer * dirs + d
            p = params[idx * per:(idx + 1) * per]
            w_ih, w_hh = p[0], p[1]
            b_ih, b_hh = (p[2], p[3]) if a["has_biases"] else (None, None)
            h = hx[0][idx] if lstm else hx[idx]
            c = hx[1][idx] if lstm else None
            ys = [None] * len(steps)
            order = range(len(steps)) if d == 0 else range(len(steps) - 1, -1, -1)
            for t in order:
                bs = sizes[t]
                if lstm:
                    h2, c2 = cell(steps[t], (h[:bs], c[:bs]), w_ih, w_hh, b_ih, b_hh)
                    if proj:
                        h2 = h2 @ p[-1].T
                    c = c2 if bs == c.shape[0] else fiamma.cat([c2, c[bs:]], 0)
                else:
                    h2 = cell(steps[t], h[:bs], w_ih, w_hh, b_ih, b_hh)
                h = h2 if bs == h.shape[0] else fiamma.cat([h2, h[bs:]], 0)
                ys[t] = h2
            outs.append(ys)
            h_n.append(h)
            if lstm:
                c_n.append(c)
        steps = [fiamma.cat([o[t] for o in outs], -1) if dirs == 2 else outs[0][t]
                 for t in range(len(steps))]
        if a["dropout"] and a["train"] and layer < layers - 1:
            steps = [F.dropout(s, a["dropout"], True) for s in steps]
    out = fiamma.cat(steps, 0) if packed else fiamma.stack(steps, 0)
    if not packed and a["batch_first"]:
        out = out.transpose(0, 1)
    if lstm:
        return out, fiamma.stack(h_n, 0), fiamma.stack(c_n, 0)
    return out, fiamma.stack(h_n, 0)


def rnn_tanh(*args, **kwargs):
    """An Elman RNN with tanh over a sequence with ATen's flat parameter list
    ``[w_ih, w_hh, b_ih, b_hh]`` per layer and direction: ``(output, h_n)``."""
    return _rnn("rnn_tanh", args, kwargs)


def rnn_relu(*args, **kwargs):
    """As :func:`rnn_tanh` with relu."""
    return _rnn("rnn_relu", args, kwargs)


def gru(*args, **kwargs):
    """A GRU over a sequence with ATen's flat parameter list: ``(output, h_n)``."""
    return _rnn("gru", args, kwargs)


def lstm(*args, **kwargs):
    """An LSTM over a sequence with ATen's flat parameter list (``w_hr`` last per layer and
    direction with projections); ``hx = [h_0, c_0]``: ``(output, h_n, c_n)``."""
    return _rnn("lstm", args, kwargs)
