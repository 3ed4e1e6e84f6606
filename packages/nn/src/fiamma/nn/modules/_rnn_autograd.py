"""The autograd nodes of the recurrent layers (``fiamma.nn.modules.rnn``), in their own module
so that ``import fiamma.nn`` does not import ``fiamma.autograd`` (the layers load this on their
first forward). They only regroup the graph of core ops; every backward is written in
differentiable ops, so higher derivatives work."""

import fiamma
from fiamma.autograd import Function, _fwd_state


def forward_ad_active():
    """Whether a forward-AD level is entered. Inside one, ``Function.apply`` computes each
    output's tangent when the node is made, so the layers record plain products instead of
    ``StepMM``/``RecurrentWeight`` (whose backward reads states filled in later, and whose
    recurrent-weight gradient comes from the other node)."""
    return _fwd_state.level is not None


class Split(Function):
    """``x.split(sizes, dim)`` whose backward is one ``cat`` (the generic view backward would
    write each piece's gradient into its own zero buffer the size of ``x``, which makes the
    per-time-step split of the input projection quadratic in the sequence length)."""

    @staticmethod
    def forward(ctx, x, sizes, dim):
        ctx.dim = dim
        return tuple(x.split(sizes, dim))

    @staticmethod
    def backward(ctx, *grads):
        return fiamma.cat(grads, ctx.dim), None, None


# ---- the recurrent weight's gradient in one product ---------------------------------------------
#
# Step t computes ``carry_t + h_{t-1} W_hh^T`` (``carry`` is the projected input for LSTM and
# RNN, the hidden bias for GRU). Left to autograd, every step would add its own
# ``h_{t-1}^T d_t`` (a product with inner size = batch, then a full-size sum) into W_hh's
# gradient. Instead the steps pass no gradient to W_hh (``StepMM``) and ``RecurrentWeight``,
# an identity on the whole carry tensor placed before the per-step split, receives all the
# ``d_t`` at once and returns ``H_prev^T D`` (inner size = every row of the sequence), one
# efficient product. Both backwards are differentiable ops on tensors with history, so
# create_graph still gives exact higher derivatives.

class StepMM(Function):
    """``addmm(carry, h, w_t)`` passing gradients to ``carry`` and ``h`` only."""

    @staticmethod
    def forward(ctx, carry, h, w_t):
        ctx.save_for_backward(w_t)
        return fiamma.addmm(carry, h, w_t)

    @staticmethod
    def backward(ctx, g):
        (w_t,) = ctx.saved_tensors
        return g, (fiamma.mm(g, w_t.t()) if ctx.needs_input_grad[1] else None), None


class RecurrentWeight(Function):
    """The identity on ``carry`` (rows of all steps); its backward also returns ``w_t``'s
    gradient ``cat(prevs)^T grad``, ``prevs[t]`` being the hidden state fed to step t (filled
    in during the forward loop)."""

    @staticmethod
    def forward(ctx, carry, w_t, prevs):
        ctx.prevs = prevs
        return carry

    @staticmethod
    def backward(ctx, g):
        gw = None
        if ctx.needs_input_grad[1]:
            prevs = ctx.prevs
            hp = fiamma.cat(prevs, 0) if len(prevs) != 1 else prevs[0]
            gw = fiamma.mm(hp.t(), g)
        return g, gw, None


class LSTMPointwise(Function):
    """The LSTM gate arithmetic of one step, ``(gates, c) -> (h, c')`` (h before any
    projection), as one graph node computed by core's fused cell (``fiamma.fused_lstm_cell``:
    one pass each way instead of a dozen elementwise ops, whose per-call cost dominates at the
    sizes recurrent layers run at). Under ``create_graph`` the backward is written in
    differentiable ops, recomputing the activations from the saved inputs, so that higher
    derivatives are right."""

    @staticmethod
    def forward(ctx, gates, c):
        h, c2, ws = fiamma.fused_lstm_cell(gates, c)
        ctx.save_for_backward(gates, c, c2, ws)
        return h, c2

    @staticmethod
    def backward(ctx, dh, dc):
        gates, c, c2, ws = ctx.saved_tensors
        if not fiamma.is_grad_enabled():
            return fiamma.fused_lstm_cell_backward(dh, dc, c, c2, ws)
        n = c.shape[1]  # create_graph: activations with history
        sif = fiamma.sigmoid(gates[:, :2 * n])
        tg = fiamma.tanh(gates[:, 2 * n:3 * n])
        so = fiamma.sigmoid(gates[:, 3 * n:])
        tc = fiamma.tanh(sif[:, n:] * c + sif[:, :n] * tg)
        si, sf = sif[:, :n], sif[:, n:]
        if dh is None:
            dh = fiamma.zeros_like(c)
        if dc is None:
            dc = fiamma.zeros_like(c)
        dso = dh * so
        dc = dc + dso * (1 - tc * tc)
        dsi = dc * si
        d = fiamma.cat([dsi * tg * (1 - si), dc * c * sf * (1 - sf), dsi * (1 - tg * tg),
                        dso * tc * (1 - so)], 1)
        return d, dc * sf


class LSTMLayer(Function):
    """A whole LSTM layer (one direction, every sequence as long) as one graph node: core's
    ``fused_lstm_layer`` runs every time step's hidden product and cell in C, and its backward
    the whole reverse loop; the recurrent weight's gradient is one product of the gate
    gradients with the saved states. Under ``create_graph`` the backward recomputes the layer
    from its saved inputs in differentiable ops and differentiates that, so higher derivatives
    are exact."""

    @staticmethod
    def forward(ctx, xw, h0, c0, w_hh, reverse):
        out, hn, cn, saved = fiamma.fused_lstm_layer(xw, w_hh, h0, c0, reverse)
        ctx.reverse = reverse
        # the layer's states and gates are saved like the inputs, so that the engine frees
        # them after the backward (and saved-tensor hooks see them)
        ctx.save_for_backward(xw, h0, c0, w_hh, *saved[:3])
        return out, hn, cn

    @staticmethod
    def backward(ctx, gout, ghn, gcn):
        xw, h0, c0, w_hh, prev, call, ws = ctx.saved_tensors
        need = ctx.needs_input_grad
        if fiamma.is_grad_enabled():
            grads = _layer_recompute(_lstm_layer_run, (xw, h0, c0, w_hh), ctx.reverse,
                                     (gout, ghn, gcn), need[:4])
            return (*grads, None)
        gx, gh0, gc0 = fiamma.fused_lstm_layer_backward(gout, ghn, gcn, w_hh,
                                                        (prev, call, ws, ctx.reverse))
        gw = fiamma.mm(gx.t(), prev) if need[3] else None
        return gx, (gh0 if need[1] else None), (gc0 if need[2] else None), gw, None


def _lstm_layer_run(xw, h0, c0, w_hh, reverse):
    """The LSTM layer in differentiable ops: (out, hn, cn)."""
    B, H = h0.shape
    T = xw.shape[0] // B if B else 0
    h, c = h0, c0
    outs = [None] * T
    wt = w_hh.t()
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        g = xw[t * B:(t + 1) * B] + fiamma.mm(h, wt)
        i, f = fiamma.sigmoid(g[:, :H]), fiamma.sigmoid(g[:, H:2 * H])
        gg, o = fiamma.tanh(g[:, 2 * H:3 * H]), fiamma.sigmoid(g[:, 3 * H:])
        c = f * c + i * gg
        h = o * fiamma.tanh(c)
        outs[t] = h
    return fiamma.cat(outs, 0), h, c


def _gru_layer_run(xw, h0, w_hh, b_hh, reverse):
    """The GRU layer in differentiable ops: (out, hn)."""
    B, H = h0.shape
    T = xw.shape[0] // B if B else 0
    h = h0
    outs = [None] * T
    wt = w_hh.t()
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        x = xw[t * B:(t + 1) * B]
        gh = fiamma.mm(h, wt) if b_hh is None else fiamma.addmm(b_hh, h, wt)
        rz = fiamma.sigmoid(x[:, :2 * H] + gh[:, :2 * H])
        n = fiamma.tanh(x[:, 2 * H:] + rz[:, :H] * gh[:, 2 * H:])
        h = n + rz[:, H:] * (h - n)
        outs[t] = h
    return fiamma.cat(outs, 0), h


def _layer_recompute(run, inputs, reverse, grad_outs, need):
    """The gradients of a layer node (double backward): the layer rebuilt from its inputs by
    ``run`` in differentiable ops (those with history keep it), then differentiated with
    create_graph. ``inputs`` may hold None (an absent bias), never wanted."""
    results = run(*inputs, reverse)
    pairs = [(r, g) for r, g in zip(results, grad_outs) if g is not None]
    wanted = [t for t, n in zip(inputs, need) if n]
    if not pairs or not wanted:
        return [None] * len(inputs)
    got = iter(fiamma.autograd.grad([r for r, _ in pairs], wanted, [g for _, g in pairs],
                                    create_graph=True, allow_unused=True))
    out = []
    for t, n in zip(inputs, need):
        v = next(got) if n else None
        out.append(fiamma.zeros_like(t) if n and v is None else v)
    return out


class GRULayer(Function):
    """A whole GRU layer (one direction, every sequence as long) as one graph node, as
    :class:`LSTMLayer`: core's ``fused_gru_layer`` runs the time loop in C, its backward the
    reverse loop; the recurrent weight's gradient is one product of the hidden-product
    gradients with the saved states, the hidden bias's their column sums."""

    @staticmethod
    def forward(ctx, xw, h0, w_hh, b_hh, reverse):
        out, hn, saved = fiamma.fused_gru_layer(xw, w_hh, b_hh, h0, reverse)
        ctx.reverse = reverse
        ctx.has_bias = b_hh is not None
        ctx.save_for_backward(xw, h0, w_hh, b_hh, *saved[:3])
        return out, hn

    @staticmethod
    def backward(ctx, gout, ghn):
        xw, h0, w_hh, b_hh, prev, hall, ws = ctx.saved_tensors
        need = ctx.needs_input_grad
        if fiamma.is_grad_enabled():
            grads = _layer_recompute(_gru_layer_run, (xw, h0, w_hh, b_hh), ctx.reverse,
                                     (gout, ghn), need[:4])
            return (*grads, None)
        gx, gg, gh0 = fiamma.fused_gru_layer_backward(gout, ghn, w_hh,
                                                      (prev, hall, ws, ctx.reverse))
        gw = fiamma.mm(gg.t(), prev) if need[2] else None
        gb = gg.sum(0) if need[3] and ctx.has_bias else None
        return gx, (gh0 if need[1] else None), gw, gb, None


class GRUPointwise(Function):
    """The GRU gate arithmetic of one step, ``(x W_ih^T + b_ih, h W_hh^T + b_hh, h) -> h'``,
    as one graph node (see :class:`LSTMPointwise`)."""

    @staticmethod
    def forward(ctx, gx, gh, h):
        n = h.shape[1]
        rz = fiamma.sigmoid(gx[:, :2 * n] + gh[:, :2 * n])
        r, z = rz[:, :n], rz[:, n:]
        new = fiamma.tanh(gx[:, 2 * n:] + r * gh[:, 2 * n:])
        out = h - new
        out *= z
        out += new
        ctx.save_for_backward(gx, gh, h, rz, new)
        return out

    @staticmethod
    def backward(ctx, dout):
        gx, gh, h, rz, new = ctx.saved_tensors
        n = h.shape[1]
        ghn = gh[:, 2 * n:]
        if fiamma.is_grad_enabled():  # create_graph: activations with history
            rz = fiamma.sigmoid(gx[:, :2 * n] + gh[:, :2 * n])
            new = fiamma.tanh(gx[:, 2 * n:] + rz[:, :n] * ghn)
        r, z = rz[:, :n], rz[:, n:]
        dpn = dout * (1 - z) * (1 - new * new)
        drz = fiamma.cat([dpn * ghn * r * (1 - r), dout * (h - new) * z * (1 - z)], 1)
        return fiamma.cat([drz, dpn], 1), fiamma.cat([drz, dpn * r], 1), dout * z
