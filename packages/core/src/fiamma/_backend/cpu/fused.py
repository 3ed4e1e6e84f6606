"""CPU primitives of the fused kernels: convolution (forward, both backwards, im2col/col2im),
batch and row normalisation, pooling, resampling (interpolate, grid_sample) and optimizer steps
(contract.Backend documents each). Every operand is contiguous unless strides are passed; they
compute in the dtype of their first tensor operand; optional operands are None."""

from fiamma._backend.codes import ERR_INDEX
from fiamma._lib import ffi, lib

__all__ = ["conv", "batch_norm_fwd", "batch_norm_bwd", "row_norm_fwd", "row_norm_bwd",
           "pool_max", "pool_avg", "pool_avg_backward", "pool_scatter", "upsample",
           "upsample_backward", "grid_sample", "grid_sample_backward", "adam_step", "sgd_step",
           "gelu_fwd", "gelu_bwd", "nms", "xent_fwd", "xent_bwd", "attn_fwd", "attn_bwd",
           "lstm_cell_fwd", "lstm_cell_bwd", "lstm_seq_fwd", "lstm_seq_bwd", "gru_seq_fwd",
           "gru_seq_bwd", "gelu_fwd_grad", "relu_bwd", "qgemm_packed_bytes", "qgemm_pack_b",
           "qgemm_u8s8", "act_fwd", "act_bwd", "loss_fwd", "loss_bwd"]


def _p(t):
    return 0 if t is None else t._ptr


def conv(mode, nd, n, cb, cs, groups, big, small, k, stride, pad, dil, a, b, bias, out):
    return lib.fm_conv(mode, a._dtype.code, nd, n, cb, cs, groups, big, small, k, stride, pad, dil,
                       a._ptr, _p(b), _p(bias), out._ptr)


def batch_norm_fwd(N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm, rvar, srv, training,
                   momentum, eps):
    return lib.fm_batch_norm_fwd(x._dtype.code, N, C, S, x._ptr, xs, y._ptr, _p(w), _p(b),
                                 mean._ptr, invstd._ptr, _p(rmean), srm, _p(rvar), srv, training,
                                 momentum, eps)


def batch_norm_bwd(N, C, S, g, gs, x, xs, w, mean, invstd, training, gx, gw, gb):
    return lib.fm_batch_norm_bwd(x._dtype.code, N, C, S, g._ptr, gs, x._ptr, xs, _p(w),
                                 mean._ptr, invstd._ptr, training, _p(gx), _p(gw), _p(gb))


def row_norm_fwd(rms, M, K, x, sx, y, w, b, G, P, Sp, mean, rstd, eps):
    return lib.fm_row_norm_fwd(x._dtype.code, rms, M, K, x._ptr, sx, y._ptr, _p(w), _p(b), G, P,
                               Sp, _p(mean), rstd._ptr, eps)


def row_norm_bwd(rms, M, K, g, sg, x, sx, w, G, P, Sp, mean, rstd, gx, gw, gb):
    return lib.fm_row_norm_bwd(x._dtype.code, rms, M, K, g._ptr, sg, x._ptr, sx, _p(w), G, P, Sp,
                               _p(mean), rstd._ptr, _p(gx), _p(gw), _p(gb))


def pool_max(adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx):
    return lib.fm_pool_max(x._dtype.code, adaptive, nplanes, isz, osz, k, s, p, d, x._ptr,
                           out._ptr, _p(idx))


def pool_avg(adaptive, nplanes, isz, osz, k, s, p, count_include_pad, divisor_override, x, out):
    return lib.fm_pool_avg(x._dtype.code, adaptive, nplanes, isz, osz, k, s, p, count_include_pad,
                           divisor_override, x._ptr, out._ptr)


def pool_avg_backward(adaptive, nplanes, isz, osz, k, s, p, count_include_pad, divisor_override,
                      gout, gin):
    return lib.fm_pool_avg_backward(gout._dtype.code, adaptive, nplanes, isz, osz, k, s, p,
                                    count_include_pad, divisor_override, gout._ptr, gin._ptr)


def pool_scatter(accumulate, nplanes, ssize, dsize, src, idx, dst, bad):
    buf = ffi.new("int64_t[1]")
    rc = lib.fm_pool_scatter(src._dtype.code, accumulate, nplanes, ssize, dsize, src._ptr,
                             idx._ptr, dst._ptr, buf)
    if rc == ERR_INDEX and bad is not None:
        bad[:] = [buf[0]]
    return rc


def upsample(mode, align_corners, nsp, n, c, isize, osize, scales, x, xs, y):
    return lib.fm_upsample(x._dtype.code, mode, align_corners, nsp, n, c, isize, osize, scales,
                           x._ptr, xs, y._ptr)


def upsample_backward(mode, align_corners, nsp, n, c, isize, osize, scales, gy, gx):
    return lib.fm_upsample_backward(gy._dtype.code, mode, align_corners, nsp, n, c, isize, osize,
                                    scales, gy._ptr, gx._ptr)


def grid_sample(nsp, mode, padding, align_corners, n, c, isize, osize, x, xs, grid, y):
    return lib.fm_grid_sample(x._dtype.code, nsp, mode, padding, align_corners, n, c, isize,
                              osize, x._ptr, xs, grid._ptr, y._ptr)


def grid_sample_backward(nsp, mode, padding, align_corners, n, c, isize, osize, gy, x, xs, grid,
                         gx, ggrid):
    return lib.fm_grid_sample_backward(x._dtype.code, nsp, mode, padding, align_corners, n, c,
                                       isize, osize, gy._ptr, x._ptr, xs, grid._ptr, _p(gx),
                                       _p(ggrid))


def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, lr, beta1, beta2, eps,
              weight_decay, flags):
    """One Adam/AdamW step over lists of contiguous same-dtype tensors (max_sqs None without
    amsgrad; steps: each tensor's step count after this one)."""
    return lib.fm_adam_step(len(params), params[0]._dtype.code, [t._ptr for t in params],
                            [t._ptr for t in grads], [t._ptr for t in exp_avgs],
                            [t._ptr for t in exp_avg_sqs],
                            ffi.NULL if max_sqs is None else [t._ptr for t in max_sqs],
                            [t._numel for t in params], steps, lr, beta1, beta2, eps,
                            weight_decay, flags)


def sgd_step(params, grads, bufs, lr, momentum, dampening, weight_decay, flags):
    """One SGD step over lists of contiguous same-dtype tensors (bufs None without momentum)."""
    return lib.fm_sgd_step(len(params), params[0]._dtype.code, [t._ptr for t in params],
                           [t._ptr for t in grads],
                           ffi.NULL if bufs is None else [t._ptr for t in bufs],
                           [t._numel for t in params], lr, momentum, dampening, weight_decay,
                           flags)


def gelu_fwd(approximate, x, y):
    return lib.fm_gelu_fwd(x._dtype.code, approximate, x._numel, x._ptr, y._ptr)


def gelu_bwd(approximate, g, x, out):
    return lib.fm_gelu_bwd(x._dtype.code, approximate, x._numel, g._ptr, x._ptr, out._ptr)


def relu_bwd(g, y, out):
    # optional (probed by core's relu_backward): out = where(y > 0, g, 0) in one pass,
    # float32/float64 contiguous (codes.ERR_DTYPE otherwise: the op composes)
    return lib.fm_relu_bwd(y._dtype.code, y._numel, g._ptr, y._ptr, out._ptr)


def act_fwd(kind, x, y, p0, p1, p2):
    # optional (probed by core's activations): y = act(x) for codes.ACT_* kinds,
    # float32/float64 contiguous (codes.ERR_DTYPE otherwise: the op widens or composes)
    return lib.fm_act_fwd(x._dtype.code, kind, x._numel, x._ptr, y._ptr, p0, p1, p2)


def act_bwd(kind, g, x, out, p0, p1, p2):
    # optional: out = g * act'(x) (codes.ACT_SIGMOID: x is the forward's output)
    return lib.fm_act_bwd(x._dtype.code, kind, x._numel, g._ptr, x._ptr, out._ptr, p0, p1, p2)


def gelu_fwd_grad(approximate, x, y, d):
    # optional (probed by the op; not in the contract): y = gelu(x) and d = gelu'(x) in one
    # pass, float32 exact form (codes.ERR_OP otherwise)
    return lib.fm_gelu_fwd_grad(x._dtype.code, approximate, x._numel, x._ptr, y._ptr, d._ptr)


def nms(boxes, scores, iou_threshold, keep, count):
    return lib.fm_nms(boxes._dtype.code, boxes._shape[0], boxes._ptr, scores._ptr,
                      float(iou_threshold), keep._ptr, ffi.cast("int64_t *", count._ptr))


def xent_fwd(n, c, x, target, weight, ignore_index, smoothing, loss, wt):
    return lib.fm_xent_fwd(x._dtype.code, n, c, x._ptr, target._ptr, _p(weight), ignore_index,
                           smoothing, loss._ptr, wt._ptr)


def xent_bwd(n, c, x, target, weight, ignore_index, smoothing, g, gs, scale, gx):
    return lib.fm_xent_bwd(x._dtype.code, n, c, x._ptr, target._ptr, _p(weight), ignore_index,
                           smoothing, g._ptr, gs, scale, gx._ptr)


def attn_fwd(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms, drop, out, os,
             lse):
    return lib.fm_attn_fwd(q._dtype.code, B, H, Hk, L, S, E, Ev, scale, q._ptr, qs, k._ptr, ks,
                           v._ptr, vs, mkind, _p(mask), ms if mask is not None else ffi.NULL,
                           _p(drop), out._ptr, os, lse._ptr)


def attn_bwd(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms, drop, g, gs, lse,
             gq, gk, gv):
    return lib.fm_attn_bwd(q._dtype.code, B, H, Hk, L, S, E, Ev, scale, q._ptr, qs, k._ptr, ks,
                           v._ptr, vs, mkind, _p(mask), ms if mask is not None else ffi.NULL,
                           _p(drop), g._ptr, gs, lse._ptr, _p(gq), _p(gk), _p(gv))


def lstm_cell_fwd(B, H, gates, sg, cx, hy, cy, ws):
    return lib.fm_lstm_cell_fwd(gates._dtype.code, B, H, gates._ptr, sg, cx._ptr, hy._ptr,
                                cy._ptr, ws._ptr)


def lstm_cell_bwd(B, H, ghy, gcy, cx, cy, ws, ggates, gcx):
    return lib.fm_lstm_cell_bwd(cx._dtype.code, B, H, _p(ghy), _p(gcy), cx._ptr, cy._ptr,
                                ws._ptr, ggates._ptr, _p(gcx))


# Optional primitives: not in the contract; the op layer probes for them with getattr and
# otherwise composes contract primitives. Listed so that the xp backend standing in for the
# CPU (xp/host.py) does not borrow them from here.
OPTIONAL = ("lstm_seq_fwd", "lstm_seq_bwd", "gru_seq_fwd", "gru_seq_bwd", "gelu_fwd_grad",
            "relu_bwd", "qgemm_packed_bytes", "qgemm_pack_b", "qgemm_u8s8", "act_fwd", "act_bwd")


# a whole LSTM layer in one call (csrc/api_lstm.h); without it the op loops over
# lstm_cell_fwd/bwd and mm per time step
def lstm_seq_fwd(T, B, H, reverse, xw, w, h0, c0, out, hn, cn, hall, call, ws):
    return lib.fm_lstm_seq_fwd(xw._dtype.code, T, B, H, reverse, xw._ptr, w._ptr, h0._ptr,
                               c0._ptr, out._ptr, hn._ptr, cn._ptr, hall._ptr, call._ptr, ws._ptr)


def lstm_seq_bwd(T, B, H, reverse, w, call, ws, gout, ghn, gcn, ggates, gh0, gc0):
    return lib.fm_lstm_seq_bwd(w._dtype.code, T, B, H, reverse, w._ptr, call._ptr, ws._ptr,
                               _p(gout), _p(ghn), _p(gcn), ggates._ptr, gh0._ptr, gc0._ptr)


# a whole GRU layer in one call (csrc/api_gru.h); without it the op loops over mm and
# elementwise ops per time step
def gru_seq_fwd(T, B, H, reverse, xw, w, bhh, h0, out, hn, hall, ws):
    return lib.fm_gru_seq_fwd(xw._dtype.code, T, B, H, reverse, xw._ptr, w._ptr, _p(bhh),
                              h0._ptr, out._ptr, hn._ptr, hall._ptr, ws._ptr)


def gru_seq_bwd(T, B, H, reverse, w, hall, ws, gout, ghn, gxw, ggh, gh0):
    return lib.fm_gru_seq_bwd(w._dtype.code, T, B, H, reverse, w._ptr, hall._ptr, ws._ptr,
                              _p(gout), _p(ghn), gxw._ptr, ggh._ptr, gh0._ptr)


# int8 products for dynamic quantization (csrc/api_qgemm.h): the weight (n x k int8) packed
# once, then c (m x n int32) = a (m x k uint8, rows padded to 4*ceil(k/4)) times it, exactly.
# fiamma-nn's dynamic quantized modules probe for them (an older _C has none). The operands
# are tensors or raw addresses (ints: a recurrent layer calls this on every step, where
# wrapping NumPy buffers as tensors would cost more than the product).
def _addr(t):
    return t if isinstance(t, int) else t._ptr


def qgemm_packed_bytes(n, k):
    return lib.fm_qgemm_packed_bytes(n, k)


def qgemm_pack_b(n, k, b, bp):
    return lib.fm_qgemm_pack_b(n, k, _addr(b), _addr(bp))


def qgemm_u8s8(m, n, k, a, lda, bp, c, a7):
    return lib.fm_qgemm_u8s8(m, n, k, _addr(a), lda, _addr(bp), _addr(c), a7)


def loss_fwd(kind, reduction, x, t, w, wn, pw, pn, p0, y):
    # optional (probed by core's losses): the elementwise loss codes.LOSS_* of contiguous
    # float32/float64 x, t (w, pw: weights of period wn, pn, or None) into y, or its mean/sum
    # into the 0-d y (codes.ERR_DTYPE otherwise: the op widens or composes)
    return lib.fm_loss_fwd(x._dtype.code, kind, reduction, x._numel, x._ptr, t._ptr, _p(w), wn,
                           _p(pw), pn, p0, y._ptr)


def loss_bwd(kind, g, gstep, scale, x, t, w, wn, pw, pn, p0, gx, gt):
    # optional: gx = c dloss/dx, gt = c dloss/dt (either None), c = g[i * gstep] * scale * w
    return lib.fm_loss_bwd(x._dtype.code, kind, x._numel, g._ptr, gstep, scale, x._ptr, t._ptr,
                           _p(w), wn, _p(pw), pn, p0, _p(gx), _p(gt))
