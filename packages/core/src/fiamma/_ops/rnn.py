"""The LSTM cell's arithmetic fused (csrc/lstm.c on the CPU): one time step's gate
nonlinearities and cell update in one pass each way, as PyTorch's ``_thnn_fused_lstm_cell``;
and a whole layer's recurrence (:func:`fused_lstm_layer`: every time step's hidden product and
cell in one call, the recurrent weight packed once); the same for a GRU layer
(:func:`fused_gru_layer`, csrc/gru.c on rnn_seq.c's shared time loop). Not recorded for
autograd: ``nn.LSTM`` and ``nn.GRU`` wrap them in their own graph nodes, whose backwards call
the ``*_backward`` functions.

>>> import fiamma
>>> hy, cy, ws = fiamma.fused_lstm_cell(fiamma.zeros(1, 8), fiamma.ones(1, 2))
>>> cy.tolist()
[[0.5, 0.5]]
"""

from fiamma import _dtype as D, _grad_hook as G
from fiamma._backend import check
from fiamma._ops._common import cast
from fiamma._tensor import Tensor, new_empty

__all__ = ["fused_lstm_cell", "fused_lstm_cell_backward", "fused_lstm_layer",
           "fused_lstm_layer_backward", "fused_gru_layer", "fused_gru_layer_backward"]


def _check(op, gates, cx):
    for name, t in (("gates", gates), ("cx", cx)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
    if cx.dim() != 2 or gates.dim() != 2 or tuple(gates._shape) != (cx._shape[0],
                                                                     4 * cx._shape[1]):
        raise RuntimeError(f"{op}: expected gates (B, 4H) and cx (B, H), got "
                           f"{tuple(gates._shape)} and {tuple(cx._shape)}")
    if gates._dtype is not cx._dtype or gates._dtype._kind != 2:
        raise RuntimeError(f"{op}: expected gates and cx of one floating dtype, got "
                           f"{gates._dtype} and {cx._dtype}")
    if gates._storage.device != cx._storage.device:
        raise RuntimeError(f"{op}: expected all tensors on one device, got gates on "
                           f"{gates.device} and cx on {cx.device}")
    return D.float64 if cx._dtype is D.float64 else D.float32


def fused_lstm_cell(gates, cx):
    """``(hy, cy, workspace)`` of one LSTM step from the pre-activation gates (B, 4H: the
    input and hidden products plus biases, gate order i, f, g, o as PyTorch's) and the cell
    state cx (B, H): ``cy = sigmoid(f) * cx + sigmoid(i) * tanh(g)``, ``hy = sigmoid(o) *
    tanh(cy)``; the workspace (B, 4H, the activated gates) is for the backward.
    float16/bfloat16 compute in float32. Not differentiable (an error if an input requires
    grad in grad mode).

    >>> import fiamma
    >>> hy, cy, _ = fiamma.fused_lstm_cell(fiamma.zeros(2, 12), fiamma.zeros(2, 3))
    >>> hy.shape
    fiamma.Size([2, 3])
    """
    op = "fused_lstm_cell"
    cd = _check(op, gates, cx)
    if G.state.enabled and (gates.requires_grad or cx.requires_grad):
        raise RuntimeError(f"{op}: not differentiable itself (nn.LSTM records its own node); "
                           "call it under fiamma.no_grad()")
    B, H = cx._shape
    g = cast(gates, cd)
    if g._stride[1] != 1 or (B > 1 and g._stride[0] < 4 * H):
        g = g.contiguous()
    c = cast(cx, cd).contiguous()
    dev = cx._storage.device
    hy, cy, ws = (new_empty((B, H), cd, dev), new_empty((B, H), cd, dev),
                  new_empty((B, 4 * H), cd, dev))
    check(c._storage.backend.lstm_cell_fwd(B, H, g, g._stride[0] if B > 1 else 4 * H, c, hy,
                                           cy, ws), op)
    return cast(hy, cx._dtype), cast(cy, cx._dtype), ws


def fused_lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace):
    """``(grad_gates, grad_cx)`` of :func:`fused_lstm_cell` for the incoming gradients of hy
    and cy (either may be None: zero), from its cx, cy and workspace; one pass.

    >>> import fiamma
    >>> hy, cy, ws = fiamma.fused_lstm_cell(fiamma.zeros(1, 4), fiamma.ones(1, 1))
    >>> gg, gc = fiamma.fused_lstm_cell_backward(None, fiamma.ones(1, 1), fiamma.ones(1, 1),
    ...                                          cy, ws)
    >>> gc.tolist()
    [[0.5]]
    """
    op = "fused_lstm_cell_backward"
    if not isinstance(workspace, Tensor) or not isinstance(cx, Tensor):
        raise TypeError(f"{op}: expected workspace and cx to be Tensors")
    cd = D.float64 if cx._dtype is D.float64 else D.float32
    if cx.dim() != 2 or cx._dtype._kind != 2 or tuple(workspace._shape) != (
            cx._shape[0], 4 * cx._shape[1]):
        raise RuntimeError(f"{op}: expected a floating cx (B, H) and workspace (B, 4H), got "
                           f"{tuple(cx._shape)} ({cx._dtype}) and {tuple(workspace._shape)}")
    B, H = cx._shape
    for name, t in (("grad_hy", grad_hy), ("grad_cy", grad_cy), ("cy", cy)):
        if t is not None and (not isinstance(t, Tensor) or tuple(t._shape) != (B, H)):
            raise RuntimeError(f"{op}: expected {name} of shape {(B, H)}, got "
                               f"{tuple(getattr(t, 'shape', ()))}")
    if cy is None:
        raise TypeError(f"{op}: cy is required")
    dev = cx._storage.device

    def prep(t):
        return None if t is None else cast(t.detach(), cd).contiguous()

    gg, gc = new_empty((B, 4 * H), cd, dev), new_empty((B, H), cd, dev)
    check(cx._storage.backend.lstm_cell_bwd(B, H, prep(grad_hy), prep(grad_cy), prep(cx),
                                            prep(cy), prep(workspace), gg, gc), op)
    return cast(gg, cx._dtype), cast(gc, cx._dtype)


def _layer_check(op, xw, w_hh, h0, c0, ng=4, bias=None, module="nn.LSTM"):
    """(T, B, H) of a layer call: xw (T*B, ng*H), w_hh (ng*H, H), h0 (B, H), c0 like h0 (LSTM;
    None for GRU, whose optional hidden bias is ``bias`` (ng*H))."""
    named = [("xw", xw), ("w_hh", w_hh), ("h0", h0)] + ([("c0", c0)] if ng == 4 else [])
    for name, t in named:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
    if bias is not None:
        named.append(("b_hh", bias))
    if ng == 4 and (h0.dim() != 2 or tuple(c0._shape) != tuple(h0._shape)):
        raise RuntimeError(f"{op}: expected h0 and c0 of one shape (B, H), got "
                           f"{tuple(h0._shape)} and {tuple(c0._shape)}")
    if h0.dim() != 2:
        raise RuntimeError(f"{op}: expected h0 of shape (B, H), got {tuple(h0._shape)}")
    B, H = h0._shape
    if w_hh.dim() != 2 or tuple(w_hh._shape) != (ng * H, H):
        raise RuntimeError(f"{op}: expected w_hh of shape {(ng * H, H)}, got "
                           f"{tuple(w_hh._shape)}")
    if xw.dim() != 2 or xw._shape[1] != ng * H or (B and xw._shape[0] % B) or \
            (not B and xw._shape[0]):
        raise RuntimeError(f"{op}: expected xw of shape (T * {B}, {ng * H}), got "
                           f"{tuple(xw._shape)}")
    if bias is not None and (not isinstance(bias, Tensor) or tuple(bias._shape) != (ng * H,)):
        raise RuntimeError(f"{op}: expected b_hh of shape {(ng * H,)} or None, got "
                           f"{tuple(getattr(bias, 'shape', ()))}")
    ts = [t for _, t in named]
    names = ", ".join(n for n, _ in named)
    if len({t._dtype for t in ts}) != 1 or xw._dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{op}: expected {names} of one dtype, float32 or float64, got "
                           f"{', '.join(str(t._dtype) for t in ts)}")
    if len({t._storage.device for t in ts}) != 1:
        raise RuntimeError(f"{op}: expected all tensors on one device, got "
                           f"{', '.join(str(t.device) for t in ts)}")
    if G.state.enabled and any(t.requires_grad for t in ts):
        raise RuntimeError(f"{op}: not differentiable itself ({module} records its own node); "
                           "call it under fiamma.no_grad()")
    T = xw._shape[0] // B if B else 0
    return T, B, H


def _slots(t, T, B, H, reverse, which):
    """The (T*B, H) rows of the state slots ``t`` ((T+1)*B, H) read by (``which`` = "prev")
    or written by ("next") the T steps, in time order."""
    lo = 0 if (which == "prev") != bool(reverse) else B
    return t[lo:lo + T * B]


def fused_lstm_layer(xw, w_hh, h0, c0, reverse=False):
    """One LSTM layer (one direction) over a whole sequence, in one call: ``xw`` (T*B, 4H)
    holds each time step's ``x_t W_ih^T + b_ih + b_hh`` (time-major rows, gate order i, f, g,
    o), ``w_hh`` (4H, H) the recurrent weight, ``h0``, ``c0`` (B, H) the initial state;
    ``reverse`` runs the steps from T-1 down to 0. Returns ``(out, hn, cn, saved)``: out (T*B,
    H) the hidden states in time order, hn, cn (B, H) the final state, and ``saved`` (the
    states and activated gates) for :func:`fused_lstm_layer_backward`; ``saved[0]`` (T*B, H)
    holds the hidden state each step read (for the recurrent weight's gradient,
    ``grad_xw^T @ saved[0]``). float32/float64; not differentiable.

    >>> import fiamma
    >>> out, hn, cn, _ = fiamma.fused_lstm_layer(fiamma.zeros(3, 8), fiamma.zeros(8, 2),
    ...                                          fiamma.zeros(1, 2), fiamma.ones(1, 2))
    >>> out.shape, cn.tolist()
    (fiamma.Size([3, 2]), [[0.125, 0.125]])
    """
    op = "fused_lstm_layer"
    T, B, H = _layer_check(op, xw, w_hh, h0, c0)
    dt, dev = xw._dtype, xw._storage.device
    xw, w, h0c, c0c = (t.contiguous() for t in (xw, w_hh, h0, c0))
    out, hn, cn = new_empty((T * B, H), dt, dev), new_empty((B, H), dt, dev), \
        new_empty((B, H), dt, dev)
    hall, call = new_empty(((T + 1) * B, H), dt, dev), new_empty(((T + 1) * B, H), dt, dev)
    ws = new_empty((T * B, 4 * H), dt, dev)
    f = getattr(xw._storage.backend, "lstm_seq_fwd", None)
    if f is not None:
        check(f(T, B, H, int(bool(reverse)), xw, w, h0c, c0c, out, hn, cn, hall, call, ws), op)
    else:  # any backend: a product and the fused cell per time step
        from fiamma._ops.matmul import addmm
        init = T * B if reverse else 0
        hall[init:init + B] = h0c
        call[init:init + B] = c0c
        wt = w.t()
        for s in range(T):
            t = T - 1 - s if reverse else s
            p, q = (t + 1, t) if reverse else (t, t + 1)
            g = addmm(xw[t * B:(t + 1) * B], hall[p * B:(p + 1) * B], wt)
            hy, cy, w_s = fused_lstm_cell(g, call[p * B:(p + 1) * B])
            hall[q * B:(q + 1) * B] = hy
            call[q * B:(q + 1) * B] = cy
            ws[t * B:(t + 1) * B] = w_s
            out[t * B:(t + 1) * B] = hy
        last = 0 if reverse else T * B
        hn.copy_(hall[last:last + B])
        cn.copy_(call[last:last + B])
    return out, hn, cn, (_slots(hall, T, B, H, reverse, "prev"), call, ws, bool(reverse))


def fused_lstm_layer_backward(grad_out, grad_hn, grad_cn, w_hh, saved):
    """``(grad_xw, grad_h0, grad_c0)`` of :func:`fused_lstm_layer` for the incoming gradients
    of out, hn and cn (each may be None: zero), from its ``w_hh`` and ``saved``. The recurrent
    weight's gradient is ``grad_xw.t() @ saved[0]`` (left to the caller: one product).

    >>> import fiamma
    >>> xw, w = fiamma.zeros(2, 4), fiamma.zeros(4, 1)
    >>> out, hn, cn, saved = fiamma.fused_lstm_layer(xw, w, fiamma.zeros(1, 1),
    ...                                              fiamma.zeros(1, 1))
    >>> gx, gh, gc = fiamma.fused_lstm_layer_backward(fiamma.ones(2, 1), None, None, w, saved)
    >>> gx.shape
    fiamma.Size([2, 4])
    """
    op = "fused_lstm_layer_backward"
    prev, call, ws, reverse, T, B, H = _unpack_saved(op, saved, w_hh, 4, "fused_lstm_layer")
    dt, dev = call._dtype, call._storage.device
    go, ghn, gcn, w = _grads_in(op, dt, ("grad_out", grad_out, (T * B, H)),
                                ("grad_hn", grad_hn, (B, H)), ("grad_cn", grad_cn, (B, H)),
                                ("w_hh", w_hh, (4 * H, H)))
    gg, gh0, gc0 = new_empty((T * B, 4 * H), dt, dev), new_empty((B, H), dt, dev), \
        new_empty((B, H), dt, dev)
    f = getattr(call._storage.backend, "lstm_seq_bwd", None)
    if f is not None:
        check(f(T, B, H, int(reverse), w, call, ws, go, ghn, gcn, gg, gh0, gc0), op)
        return gg, gh0, gc0
    from fiamma._ops.matmul import mm
    dh = ghn.clone() if ghn is not None else _zeros(B, H, dt, dev)
    dc = gcn.clone() if gcn is not None else _zeros(B, H, dt, dev)
    for s in range(T):
        t = s if reverse else T - 1 - s
        p, q = (t + 1, t) if reverse else (t, t + 1)
        if go is not None:
            dh = dh + go[t * B:(t + 1) * B]
        g_t, dc = fused_lstm_cell_backward(dh, dc, call[p * B:(p + 1) * B],
                                           call[q * B:(q + 1) * B], ws[t * B:(t + 1) * B])
        gg[t * B:(t + 1) * B] = g_t
        dh = mm(g_t, w)
    gh0.copy_(dh)
    gc0.copy_(dc)
    return gg, gh0, gc0


def _unpack_saved(op, saved, w_hh, ng, fwd):
    """(prev, state slots, ws, reverse, T, B, H) from a layer's ``saved``, w_hh checked."""
    if not isinstance(saved, tuple) or len(saved) != 4:
        raise TypeError(f"{op}: expected the saved tuple of {fwd}")
    prev, slots, ws, reverse = saved
    B, H = slots._shape[0] - prev._shape[0], slots._shape[1]
    T = prev._shape[0] // B if B else 0
    if not isinstance(w_hh, Tensor) or tuple(w_hh._shape) != (ng * H, H) or \
            w_hh._dtype is not slots._dtype:
        raise RuntimeError(f"{op}: expected w_hh ({ng * H}, {H}) of dtype {slots._dtype}, got "
                           f"{tuple(getattr(w_hh, 'shape', ()))}")
    return prev, slots, ws, reverse, T, B, H


def _grads_in(op, dt, *items):
    """Each (name, tensor or None, shape) checked and made contiguous in ``dt`` (None kept)."""
    out = []
    for name, t, shape in items:
        if t is not None and (not isinstance(t, Tensor) or tuple(t._shape) != shape):
            raise RuntimeError(f"{op}: expected {name} of shape {shape}, got "
                               f"{tuple(getattr(t, 'shape', ()))}")
        out.append(None if t is None else cast(t.detach(), dt).contiguous())
    return out


def fused_gru_layer(xw, w_hh, b_hh, h0, reverse=False):
    """One GRU layer (one direction) over a whole sequence, in one call: ``xw`` (T*B, 3H)
    holds each time step's ``x_t W_ih^T + b_ih`` (time-major rows, gate order r, z, n),
    ``w_hh`` (3H, H) the recurrent weight, ``b_hh`` (3H) its bias or None, ``h0`` (B, H) the
    initial state; ``reverse`` runs the steps from T-1 down to 0. Per step, with ``gh = h
    W_hh^T + b_hh``: ``r, z = sigmoid(xw_rz + gh_rz)``, ``n = tanh(xw_n + r * gh_n)``, ``h' =
    (1 - z) * n + z * h``. Returns ``(out, hn, saved)``: out (T*B, H) the hidden states in
    time order, hn (B, H) the final one, and ``saved`` for :func:`fused_gru_layer_backward`;
    ``saved[0]`` (T*B, H) holds the hidden state each step read. float32/float64; not
    differentiable.

    >>> import fiamma
    >>> out, hn, _ = fiamma.fused_gru_layer(fiamma.zeros(3, 6), fiamma.zeros(6, 2), None,
    ...                                     fiamma.ones(1, 2))
    >>> out.shape, hn.tolist()
    (fiamma.Size([3, 2]), [[0.125, 0.125]])
    """
    op = "fused_gru_layer"
    T, B, H = _layer_check(op, xw, w_hh, h0, None, 3, b_hh, "nn.GRU")
    dt, dev = xw._dtype, xw._storage.device
    xw, w, h0c = (t.contiguous() for t in (xw, w_hh, h0))
    b = None if b_hh is None else b_hh.contiguous()
    out, hn = new_empty((T * B, H), dt, dev), new_empty((B, H), dt, dev)
    hall, ws = new_empty(((T + 1) * B, H), dt, dev), new_empty((T * B, 4 * H), dt, dev)
    f = getattr(xw._storage.backend, "gru_seq_fwd", None)
    if f is not None:
        check(f(T, B, H, int(bool(reverse)), xw, w, b, h0c, out, hn, hall, ws), op)
    else:  # any backend: a product and the gate arithmetic per time step
        from fiamma._ops.join import cat
        from fiamma._ops.matmul import addmm, mm
        init = T * B if reverse else 0
        hall[init:init + B] = h0c
        wt = w.t()
        for s in range(T):
            t = T - 1 - s if reverse else s
            p, q = (t + 1, t) if reverse else (t, t + 1)
            hp, x = hall[p * B:(p + 1) * B], xw[t * B:(t + 1) * B]
            gh = mm(hp, wt) if b is None else addmm(b, hp, wt)
            rz = (x[:, :2 * H] + gh[:, :2 * H]).sigmoid()
            n = (x[:, 2 * H:] + rz[:, :H] * gh[:, 2 * H:]).tanh()
            h = n + rz[:, H:] * (hp - n)
            hall[q * B:(q + 1) * B] = h
            out[t * B:(t + 1) * B] = h
            ws[t * B:(t + 1) * B] = cat([rz, n, gh[:, 2 * H:]], 1)
        last = 0 if reverse else T * B
        hn.copy_(hall[last:last + B])
    return out, hn, (_slots(hall, T, B, H, reverse, "prev"), hall, ws, bool(reverse))


def fused_gru_layer_backward(grad_out, grad_hn, w_hh, saved):
    """``(grad_xw, grad_gh, grad_h0)`` of :func:`fused_gru_layer` for the incoming gradients
    of out and hn (each may be None: zero), from its ``w_hh`` and ``saved``; ``grad_gh``
    (T*B, 3H) is the gradient of each step's ``h W_hh^T + b_hh``, so the recurrent weight's
    gradient is ``grad_gh.t() @ saved[0]`` and the hidden bias's ``grad_gh.sum(0)`` (left to
    the caller).

    >>> import fiamma
    >>> xw, w = fiamma.zeros(2, 3), fiamma.zeros(3, 1)
    >>> out, hn, saved = fiamma.fused_gru_layer(xw, w, None, fiamma.zeros(1, 1))
    >>> gx, gg, gh = fiamma.fused_gru_layer_backward(fiamma.ones(2, 1), None, w, saved)
    >>> gx.shape, gg.shape
    (fiamma.Size([2, 3]), fiamma.Size([2, 3]))
    """
    op = "fused_gru_layer_backward"
    prev, hall, ws, reverse, T, B, H = _unpack_saved(op, saved, w_hh, 3, "fused_gru_layer")
    dt, dev = hall._dtype, hall._storage.device
    go, ghn, w = _grads_in(op, dt, ("grad_out", grad_out, (T * B, H)),
                           ("grad_hn", grad_hn, (B, H)), ("w_hh", w_hh, (3 * H, H)))
    gx, gg, gh0 = new_empty((T * B, 3 * H), dt, dev), new_empty((T * B, 3 * H), dt, dev), \
        new_empty((B, H), dt, dev)
    f = getattr(hall._storage.backend, "gru_seq_bwd", None)
    if f is not None:
        check(f(T, B, H, int(reverse), w, hall, ws, go, ghn, gx, gg, gh0), op)
        return gx, gg, gh0
    from fiamma._ops.join import cat
    from fiamma._ops.matmul import mm
    dh = ghn.clone() if ghn is not None else _zeros(B, H, dt, dev)
    for s in range(T):
        t = s if reverse else T - 1 - s
        p = t + 1 if reverse else t
        if go is not None:
            dh = dh + go[t * B:(t + 1) * B]
        wst, hp = ws[t * B:(t + 1) * B], hall[p * B:(p + 1) * B]
        r, z, n, ghn_t = (wst[:, k * H:(k + 1) * H] for k in range(4))
        dn = dh * (1 - z) * (1 - n * n)
        dr = dn * ghn_t * r * (1 - r)
        dz = dh * (hp - n) * z * (1 - z)
        gx[t * B:(t + 1) * B] = cat([dr, dz, dn], 1)
        g_t = cat([dr, dz, dn * r], 1)
        gg[t * B:(t + 1) * B] = g_t
        dh = dh * z + mm(g_t, w)
    gh0.copy_(dh)
    return gx, gg, gh0


def _zeros(B, H, dt, dev):
    t = new_empty((B, H), dt, dev)
    t.zero_()
    return t
