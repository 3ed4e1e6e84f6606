"""ONNX converters for the network ops: convolution, normalisation, pooling, resampling,
padding and the recurrent layers (PyTorch's gate order i,f,g,o (LSTM) and r,z,n (GRU) become
ONNX's i,o,f,c and z,r,h)."""

import numpy as np

from fiamma.jit import Value

from ._converters import _kw, _operand, _out_dtype, converter
from ._reduce import _reduce_mean
from ._shape import sym_sizes


@converter("convolution")
def _conv(ctx, node, outs):
    x, w, b = node.args[:3]
    kw = node.kwargs
    pad = list(kw["padding"])
    if isinstance(kw["padding"], str):
        ctx.unsupported(f"convolution with padding={kw['padding']!r} has no converter")
    attrs = dict(strides=list(kw["stride"]), pads=pad + pad, dilations=list(kw["dilation"]),
                 group=int(kw["groups"]))
    ins = [x, w] + ([b] if b is not None else [])
    if kw["transposed"]:
        return ctx.add("ConvTranspose", ins, outs, output_padding=list(kw["output_padding"]),
                       **attrs)
    return ctx.add("Conv", ins, outs, **attrs)


def _per_channel(ctx, arr, nd):
    return arr.reshape((-1,) + (1,) * (nd - 2))


@converter("batch_norm")
def _batch_norm(ctx, node, outs):
    x, w, b = node.args[:3]
    if node.kwargs.get("training"):
        return _batch_norm_train(ctx, x, w, b, float(node.kwargs["eps"]), outs)
    mean, invstd = node.kwargs["mean"], node.kwargs["invstd"]
    nd = ctx.rank(x)
    dt = ctx.np_dtype(x)
    vals = [ctx.value(t) if isinstance(t, Value) and ctx.is_const(t) else None
            for t in (w, b, mean, invstd)]
    if all(v is not None or t is None for v, t in zip(vals, (w, b, mean, invstd))):
        wv, bv, mv, iv = (None if v is None else v.astype(np.float64) for v in vals)
        scale = iv * (wv if wv is not None else 1.0)
        shift = (bv if bv is not None else 0.0) - mv * scale
        y = ctx.add("Mul", [x, ctx.const(_per_channel(ctx, scale, nd).astype(dt), "bn_scale")])
        return ctx.add("Add", [y, ctx.const(_per_channel(ctx, shift, nd).astype(dt),
                                            "bn_shift")], outs)
    shp = ctx.ints([-1] + [1] * (nd - 2))
    y = ctx.add("Sub", [x, ctx.add("Reshape", [mean, shp])])
    s = ctx.name(invstd) if w is None else ctx.add("Mul", [invstd, w])
    y = ctx.add("Mul", [y, ctx.add("Reshape", [s, shp])])
    if b is None:
        return ctx.add("Identity", [y], outs)
    return ctx.add("Add", [y, ctx.add("Reshape", [b, shp])], outs)


def _batch_norm_train(ctx, x, w, b, eps, outs):
    """Normalised by the batch's own statistics (biased variance), as in training mode."""
    nd = ctx.rank(x)
    y = _normalize(ctx, ctx.name(x), [0] + list(range(2, nd)), eps, ctx.np_dtype(x))
    shp = ctx.ints([-1] + [1] * (nd - 2))
    if w is not None:
        y = ctx.add("Mul", [y, ctx.add("Reshape", [w, shp])])
    if b is not None:
        y = ctx.add("Add", [y, ctx.add("Reshape", [b, shp])])
    return ctx.add("Identity", [y], outs)


@converter("im2col")
def _im2col(ctx, node, outs):
    """nn.Unfold as a grouped convolution with one-hot kernels: output channel c*K + k takes
    tap k of channel c (PyTorch's order)."""
    x = node.args[0]
    kw = node.kwargs
    kh, kw_ = kw["kernel_size"]
    C = ctx.shape(x)[1]
    K = kh * kw_
    w = np.zeros((C * K, 1, kh, kw_), ctx.np_dtype(x))
    for c in range(C):
        for k in range(K):
            w[c * K + k, 0, k // kw_, k % kw_] = 1
    p = list(kw["padding"])
    y = ctx.add("Conv", [ctx.name(x), ctx.const(w, "unfold")], group=C,
                strides=list(kw["stride"]), pads=p + p, dilations=list(kw["dilation"]),
                kernel_shape=[kh, kw_])
    return ctx.add("Reshape", [y, ctx.ints([0, C * K, -1])], outs)


@converter("layer_norm")
def _layer_norm(ctx, node, outs):
    x, w, b = node.args[:3]
    ns = list(node.kwargs["normalized_shape"])
    dt = ctx.np_dtype(x)
    wn = ctx.name(w) if w is not None else ctx.const(np.ones(ns, dt), "ln_w")
    ins = [ctx.name(x), wn] + ([ctx.name(b)] if b is not None else [])
    return ctx.add("LayerNormalization", ins, outs, axis=-len(ns),
                   epsilon=float(node.kwargs["eps"]))


def _normalize(ctx, x, axes, eps, dt):
    mu = _reduce_mean(ctx, x, axes)
    d = ctx.add("Sub", [x, mu])
    var = _reduce_mean(ctx, ctx.add("Mul", [d, d]), axes)
    sd = ctx.add("Sqrt", [ctx.add("Add", [var, ctx.const(np.asarray(eps, dt))])])
    return ctx.add("Div", [d, sd])


@converter("instance_norm")
def _instance_norm(ctx, node, outs):
    x, rm, rv, w, b = node.args[:5]
    eps = float(node.kwargs["eps"])
    dt = ctx.np_dtype(x)
    nd = ctx.rank(x)
    C = ctx.shape(x)[1]
    if not isinstance(C, int):
        ctx.unsupported("instance_norm over a dynamic number of channels")
    scale = ctx.name(w) if w is not None else ctx.const(np.ones(C, dt), "in_scale")
    shift = ctx.name(b) if b is not None else ctx.const(np.zeros(C, dt), "in_shift")
    if node.kwargs.get("use_input_stats", True):
        if nd < 3:
            ctx.unsupported("instance_norm of an input without spatial dims")
        return ctx.add("InstanceNormalization", [ctx.name(x), scale, shift], outs,
                       epsilon=eps)
    # normalised by the running statistics (eval mode with track_running_stats)
    return ctx.add("BatchNormalization", [ctx.name(x), scale, shift, ctx.name(rm),
                                          ctx.name(rv)], outs, epsilon=eps)


@converter("group_norm")
def _group_norm(ctx, node, outs):
    x, w, b = node.args[:3]
    G = int(node.kwargs["num_groups"])
    nd = ctx.rank(x)
    dt = ctx.np_dtype(x)
    y = ctx.add("Reshape", [x, ctx.ints([0, G, -1])])
    y = _normalize(ctx, y, [2], float(node.kwargs["eps"]), dt)
    shape = ctx.add("Shape", [x])
    y = ctx.add("Reshape", [y, shape])
    shp = ctx.ints([-1] + [1] * (nd - 2))
    if w is not None:
        y = ctx.add("Mul", [y, ctx.add("Reshape", [w, shp])])
    if b is not None:
        y = ctx.add("Add", [y, ctx.add("Reshape", [b, shp])])
    return ctx.add("Identity", [y], outs)


@converter("rms_norm")
def _rms_norm(ctx, node, outs):
    x, w = node.args[:2]
    ns = node.kwargs["normalized_shape"]
    dt = ctx.np_dtype(x)
    eps = node.kwargs.get("eps")
    if eps is None:
        eps = float(np.finfo(dt).eps)
    r = ctx.rank(x)
    ms = _reduce_mean(ctx, ctx.add("Mul", [x, x]), list(range(r - len(ns), r)))
    y = ctx.add("Mul", [x, ctx.add("Reciprocal", [ctx.add("Sqrt", [
        ctx.add("Add", [ms, ctx.const(np.asarray(eps, dt))])])])])
    if w is not None:
        y = ctx.add("Mul", [y, w])
    return ctx.add("Identity", [y], outs)


def _pool_pads(ctx, p):
    p = list(p)
    return p + p


@converter("max_pool1d", "max_pool2d", "max_pool3d")
def _max_pool(ctx, node, outs):
    kw = node.kwargs
    if _used(ctx, node.outputs[1]):
        ctx.unsupported(f"{node.op} with return_indices has no converter")
    return ctx.add("MaxPool", [node.args[0]], outs[:1], kernel_shape=list(kw["kernel_size"]),
                   strides=list(kw["stride"]), pads=_pool_pads(ctx, kw["padding"]),
                   dilations=list(kw["dilation"]), ceil_mode=int(kw["ceil_mode"]))


def _used(ctx, name):
    return any(name in n.inputs() for n in ctx.graph.nodes) or name in ctx.graph.outputs


@converter("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(ctx, node, outs):
    x = node.args[0]
    nd = int(node.op[-2])
    k = list(_kw(node, "kernel_size", 1, None))
    s = _kw(node, "stride", 2, None)
    s = list(s) if s else k
    p = list(_kw(node, "padding", 3, (0,) * nd))
    ceil = bool(_kw(node, "ceil_mode", 4, False))
    cip = bool(_kw(node, "count_include_pad", 5, True))
    if _kw(node, "divisor_override", 6, None) is not None:
        ctx.unsupported(f"{node.op} with divisor_override has no converter")
    k, s, p = [list(v) * nd if len(v) == 1 else v for v in (k, s, p)]
    return ctx.add("AveragePool", [x], outs, kernel_shape=k, strides=s, pads=p + p,
                   ceil_mode=int(ceil), count_include_pad=int(cip))


@converter("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d")
def _adaptive(ctx, node, outs):
    x = node.args[0]
    is_max = "max" in node.op
    if is_max and _used(ctx, node.outputs[1]):
        ctx.unsupported(f"{node.op} with return_indices has no converter")
    o = _kw(node, "output_size", 1, None)
    spatial = ctx.shape(x)[2:]
    o = [spatial[i] if v is None else v for i, v in enumerate(
        o if isinstance(o, (tuple, list)) else [o] * len(spatial))]
    if all(v == 1 for v in o):
        return ctx.add("GlobalMaxPool" if is_max else "GlobalAveragePool", [x], outs[:1])
    if any(n % m for n, m in zip(spatial, o)):
        return _adaptive_general(ctx, x, spatial, o, is_max, outs[0])
    k = [n // m for n, m in zip(spatial, o)]
    return ctx.add("MaxPool" if is_max else "AveragePool", [x], outs[:1], kernel_shape=k,
                   strides=k)


def _windows(n, m):
    """PyTorch's adaptive windows: [floor(i*n/m), ceil((i+1)*n/m)) for output i."""
    return [(i * n // m, -(-(i + 1) * n // m)) for i in range(m)]


def _adaptive_general(ctx, x, spatial, o, is_max, out):
    """Windows that do not tile evenly: averaging is linear, so each spatial dim is one MatMul
    with a constant (n_in x n_out) averaging matrix; max takes each window with Slice +
    ReduceMax and concatenates."""
    r = ctx.rank(x)
    dt = ctx.np_dtype(x)
    y = ctx.name(x)
    for d, (n, m) in enumerate(zip(spatial, o)):
        axis = 2 + d
        if is_max:
            parts = []
            for a, b in _windows(n, m):
                sl = ctx.add("Slice", [y, ctx.ints([a]), ctx.ints([b]), ctx.ints([axis])])
                parts.append(ctx.add("ReduceMax", [sl, ctx.ints([axis])], keepdims=1)
                             if ctx.opset >= 18 else
                             ctx.add("ReduceMax", [sl], axes=[axis], keepdims=1))
            y = ctx.add("Concat", parts, axis=axis)
            continue
        A = np.zeros((n, m), np.float64)
        for i, (a, b) in enumerate(_windows(n, m)):
            A[a:b, i] = 1.0 / (b - a)
        perm = list(range(r))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        if axis != r - 1:
            y = ctx.add("Transpose", [y], perm=perm)
        y = ctx.add("MatMul", [y, ctx.const(A.astype(dt), "adaptive")])
        if axis != r - 1:
            y = ctx.add("Transpose", [y], perm=perm)
    return ctx.add("Identity", [y], out)


@converter("upsample")
def _upsample(ctx, node, outs):
    x = node.args[0]
    kw = node.kwargs
    mode, ac, scales = kw["mode"], bool(kw.get("align_corners")), kw.get("scales")
    size = list(kw["size"])
    attrs = {}
    if mode == "nearest":
        attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor")
    elif mode == "nearest-exact":
        # floor((dst + 0.5) * in/out): half_pixel's (dst + 0.5) * in/out - 0.5, rounded half up
        attrs = dict(mode="nearest", coordinate_transformation_mode="half_pixel",
                     nearest_mode="round_prefer_ceil")
    elif mode in ("linear", "bilinear", "trilinear", "bicubic", "cubic"):
        cubic = mode in ("bicubic", "cubic")
        attrs = dict(mode="cubic" if cubic else "linear",
                     coordinate_transformation_mode="align_corners" if ac
                     else "pytorch_half_pixel")
        if cubic:
            attrs["cubic_coeff_a"] = -0.75
    else:
        ctx.unsupported(f"upsample mode {mode!r} has no converter")
    if scales is not None and all(s is not None for s in scales) and not ac:
        sc = ctx.const(np.asarray([1.0, 1.0] + [float(s) for s in scales], np.float32), "scales")
        # PyTorch computes source indices from the given scale factors: ONNX's scales input
        return ctx.add("Resize", [ctx.name(x), "", sc], outs, **attrs)
    lead = ctx.add("Slice", [ctx.add("Shape", [x]), ctx.ints([0]), ctx.ints([2])])
    syms = kw.get("symsize")
    own = sym_sizes(ctx, size, syms) if syms is not None and ctx.dynamic else ctx.ints(size)
    sizes = ctx.add("Concat", [lead, own], axis=0)
    return ctx.add("Resize", [ctx.name(x), "", "", sizes], outs, **attrs)


@converter("pad")
def _pad(ctx, node, outs):
    x = node.args[0]
    kw = node.kwargs
    p = list(kw["pad"])
    r = ctx.rank(x)
    begins, ends = [0] * r, [0] * r
    for i in range(len(p) // 2):
        d = r - 1 - i
        begins[d], ends[d] = p[2 * i], p[2 * i + 1]
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
            "circular": "wrap"}.get(kw.get("mode", "constant"))
    if mode is None or (mode == "wrap" and ctx.opset < 19):
        ctx.unsupported(f"pad mode {kw.get('mode')!r} has no converter at opset {ctx.opset}")
    if min(begins + ends) < 0:
        ctx.unsupported("pad with negative amounts has no converter")
    syms = kw.get("sympad")
    if syms is not None and ctx.dynamic and any(e is not None for e in syms):
        # amounts computed from the input's sizes: in ONNX's order (all begins, then all ends)
        sb, se = [None] * r, [None] * r
        for i in range(len(p) // 2):
            d = r - 1 - i
            sb[d], se[d] = syms[2 * i], syms[2 * i + 1]
        amounts = sym_sizes(ctx, begins + ends, sb + se)
    else:
        amounts = ctx.ints(begins + ends)
    ins = [ctx.name(x), amounts]
    if mode == "constant":
        v = kw.get("value")
        ins.append(_operand(ctx, 0.0 if v is None else v, _out_dtype(ctx, node)))
    return ctx.add("Pad", ins, outs, mode=mode)


# ---- recurrent layers -----------------------------------------------------------------------

_GATES = {"LSTM": (4, [0, 3, 1, 2]), "GRU": (3, [1, 0, 2]), "RNN_TANH": (1, [0]),
          "RNN_RELU": (1, [0])}


def _reorder(w, n, order):
    h = w.shape[0] // n
    return np.concatenate([w[g * h:(g + 1) * h] for g in order], axis=0)


@converter("rnn")
def _rnn(ctx, node, outs):
    kw = node.kwargs
    mode, H, L = kw["mode"], kw["hidden_size"], kw["num_layers"]
    bidir, bf = kw["bidirectional"], kw["batch_first"]
    nd = 2 if bidir else 1
    ngate, order = _GATES[mode]
    params = dict(zip(kw["param_names"], kw["params"]))
    for p in params.values():
        if not ctx.is_const(p):
            ctx.unsupported(f"{mode} whose weights are computed in the graph has no converter")
    x = node.args[0]
    dt = ctx.np_dtype(x)
    y = ctx.name(x)
    if bf:
        y = ctx.add("Transpose", [y], perm=[1, 0, 2])
    hx = node.args[1:] if kw["has_hx"] else []
    op = {"LSTM": "LSTM", "GRU": "GRU"}.get(mode, "RNN")
    hn, cn = [], []
    for layer in range(L):
        Ws, Rs, Bs = [], [], []
        for d in range(nd):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            Ws.append(_reorder(ctx.value(params["weight_ih" + sfx]), ngate, order))
            Rs.append(_reorder(ctx.value(params["weight_hh" + sfx]), ngate, order))
            if kw["bias"]:
                Bs.append(np.concatenate([
                    _reorder(ctx.value(params["bias_ih" + sfx]), ngate, order),
                    _reorder(ctx.value(params["bias_hh" + sfx]), ngate, order)]))
            else:
                Bs.append(np.zeros(2 * ngate * H, dt))
        ins = [y, ctx.const(np.stack(Ws).astype(dt), "W"), ctx.const(np.stack(Rs).astype(dt), "R"),
               ctx.const(np.stack(Bs).astype(dt), "B"), ""]
        sl = (ctx.ints([layer * nd]), ctx.ints([(layer + 1) * nd]), ctx.ints([0]))
        if hx:
            ins.append(ctx.add("Slice", [hx[0], *sl]))
            if op == "LSTM":
                ins.append(ctx.add("Slice", [hx[1], *sl]))
        attrs = dict(hidden_size=H, direction="bidirectional" if bidir else "forward")
        if op == "GRU":
            attrs["linear_before_reset"] = 1
        if op == "RNN":
            attrs["activations"] = ["Tanh" if mode == "RNN_TANH" else "Relu"] * nd
        n_out = 3 if op == "LSTM" else 2
        res = ctx.add(op, ins, [ctx.fresh(op + "_out") for _ in range(n_out)], **attrs)
        Y = res[0]
        hn.append(res[1])
        if op == "LSTM":
            cn.append(res[2])
        # Y: [seq, num_directions, batch, hidden] -> [seq, batch, num_directions * hidden]
        Y = ctx.add("Transpose", [Y], perm=[0, 2, 1, 3])
        y = ctx.add("Reshape", [Y, ctx.ints([0, 0, nd * H])])
    if bf:
        y = ctx.add("Transpose", [y], perm=[1, 0, 2])
    ctx.add("Identity", [y], outs[0])
    ctx.add("Concat", hn, outs[1], axis=0) if L > 1 else ctx.add("Identity", hn, outs[1])
    if op == "LSTM":
        ctx.add("Concat", cn, outs[2], axis=0) if L > 1 else ctx.add("Identity", cn, outs[2])
