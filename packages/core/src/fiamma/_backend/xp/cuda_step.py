"""The cuda backend's one-pass kernels for the rest of a training step (``StepKernelsMixin``,
issue 21): the ops that cost several launches and temporaries per layer on the generic paths.

- ``fm_relu``: ReLU of float32/float64 from pointers (was a ufunc over two array views;
  cuda_lowp's ``fm_lp_relu`` serves 16-bit);
- ``fm_relu_bwd``: ReLU's backward ``where(y <= 0, 0, g)`` (core's ``relu_backward``, which
  autograd's ReLU formula calls) in one pass over g and y, float32/float64/bfloat16/float16
  (was a comparison into a bool temporary and a ``where``: two launches, an allocation);
- ``fm_gelu_fwd_s``/``fm_gelu_bwd_s``: GELU (erf and tanh forms) and its backward reading and
  writing bfloat16/float16 as they are (``gelu_native``; was a widening copy per operand, the
  float32 kernel and a rounding copy), the float32 kernel's arithmetic on the widened values
  and one rounding, so the bits equal the widened path's; float32 too (the same arithmetic as
  cuda_kernels.py's elementwise kernel, launched from pointers: no array views);
- ``fm_act_fwd_s``/``fm_act_bwd_s``: the parameterised activations of csrc/activations.c
  (SiLU, LeakyReLU, ELU/SELU/CELU, Hardswish, Hardsigmoid, Softplus, Mish, LogSigmoid,
  Hardtanh, Soft/Hardshrink, Threshold; sigmoid's and tanh's backward from the output) in one
  launch each, float32/float64 (was the formula op by op: two to six launches);
- ``fm_bias_rows``: a linear layer's bias (``addmm``'s ``mm_bias``) written into the result's
  rows by one launch from pointers (was a broadcast array copy with its array views), then the
  product accumulates onto it (cuBLAS, beta = 1), as before; any float dtype;
- ``fm_maxpool_bwd_s``: the max-pool backward of the pool's own indices as a gather (a thread
  per input element, its windows' gradients in output order: the CPU's sum, deterministic),
  any float dtype, where a zeroed accumulator, atomics and (16-bit) a rounding pass ran;
- ``fm_avgpool_s``/``fm_avgpool_bwd_s``: average pools forward/backward, any float dtype and
  strides; a global pool of planes of >= 256 elements takes ``fm_avgpool_glob_s`` (one block
  a plane, a double block sum);
- ``fm_loss_fwd`` + ``fm_loss_total``, ``fm_loss_bwd``: core's fused elementwise losses
  (``loss_fwd``/``loss_bwd``: csrc/losses.c's formulas), float32/float64, the reduction's sum
  deterministic (per-block double sums added in block order);
- ``fm_int_s32``/``fm_int_s64`` (``INT_S``, not per storage type): an int32/int64 tensor
  + - * a Python int (batch norm's ``num_batches_tracked += 1``).

The sources are compiled once per storage type: ``S`` the element as stored, ``T`` the type
computed in (float for the 16-bit types and float32, double for float64), ``fm_ld``/``fm_st``
the conversions (cuda_lowp's exact widening and round-to-nearest-even for 16-bit). Each path
is taken for contiguous operands of one dtype and shape (the op layer's condition); a kernel
that fails to build or launch is recorded in ``fast_path_errors`` and the generic code serves.
"""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as K
from fiamma._backend.xp.cuda_kernels import _BLOCK, _GELU_PRE
from fiamma._backend.xp.cuda_lowp import LP_CONV, _same_contig

__all__ = ["StepKernelsMixin", "STEP_SOURCE", "step_prelude", "STEP_KINDS", "INT_S"]

STEP_SOURCE = r"""
#define FM_LOOP(n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
    i < (n); i += (long long)gridDim.x * blockDim.x)
// (float32/float64 only: cuda_lowp's fm_lp_relu serves the 16-bit types)
extern "C" __global__ void fm_relu(const S* __restrict__ x, S* __restrict__ o, long long n) {
    FM_LOOP(n) {
        const S v = x[i];
        o[i] = v < (S)0 ? (S)0 : v;  // NaN and -0 pass through, as csrc's x < 0 test
    }
}
extern "C" __global__ void fm_relu_bwd(const S* __restrict__ g, const S* __restrict__ y,
        S* __restrict__ o, long long n) {
    FM_LOOP(n) o[i] = fm_ld(y[i]) <= (T)0 ? (S)0 : g[i];  // NaN passes (PyTorch)
}
// GELU in float arithmetic (cuda_kernels.py's float32 kernel; PyTorch's: double is slow)
__device__ __forceinline__ float fm_gelu_p(float v, int approx) {
    if (approx) {
        const float u = (float)TK * v * (1.0f + (float)TC * v * v);
        const float e = expf(-2.0f * fabsf(u));
        const float s = 1.0f / (1.0f + e);
        return u >= 0.0f ? 2.0f * s : 2.0f * e * s;
    }
    return erfcf(-v * (float)IS2);
}
__device__ __forceinline__ float fm_gelu_d(float v, int approx) {
    if (approx) {
        const float u = (float)TK * v * (1.0f + (float)TC * v * v);
        const float e = expf(-2.0f * fabsf(u));
        const float s = 1.0f / (1.0f + e);
        const float sech2 = 4.0f * e * s * s;
        const float p = u >= 0.0f ? 2.0f * s : 2.0f * e * s;
        return 0.5f * p + 0.5f * v * sech2 * (float)TK * (1.0f + 3.0f * (float)TC * v * v);
    }
    return 0.5f * erfcf(-v * (float)IS2) + v * expf(-0.5f * v * v) * (float)ISP;
}
extern "C" __global__ void fm_gelu_fwd_s(const S* __restrict__ x, S* __restrict__ y,
        long long n, float hi, float lo, int approx) {
    FM_LOOP(n) {
        const float v = (float)fm_ld(x[i]);
        float r;
        if (v > hi) r = v;
        else if (v < lo) r = -0.0f;
        else r = 0.5f * v * fm_gelu_p(v, approx);
        y[i] = fm_st(r);
    }
}
extern "C" __global__ void fm_gelu_bwd_s(const S* __restrict__ g, const S* __restrict__ x,
        S* __restrict__ o, long long n, float hi, float lo, int approx) {
    FM_LOOP(n) {
        const float v = (float)fm_ld(x[i]);
        float d;
        if (v > hi) d = 1.0f;
        else if (v < lo) d = 0.0f;
        else d = fm_gelu_d(v, approx);
        o[i] = fm_st((float)fm_ld(g[i]) * d);
    }
}
// parameterised activations (csrc/activations.c fm_act_fwd/_bwd, api_activations.h's kinds and
// formulas, PyTorch's branches), computed in T from the stored S; kind is uniform per launch
__device__ __forceinline__ T fm_act_f(int kind, T v, T p0, T p1, T p2) {
    switch (kind) {
    case 0: return v / ((T)1 + exp(-v));
    case 1: return v > (T)0 ? v : v * p0;
    case 2: return v <= (T)0 ? expm1(v * p2) * (p0 * p1) : v * p1;
    case 3: case 4: {
        T t = v + (T)3;
        t = t < (T)0 ? (T)0 : t;
        t = (T)6 < t ? (T)6 : t;
        return kind == 3 ? v * t / (T)6 : t / (T)6;
    }
    case 5: {
        const T bx = v * p0;
        return bx > p1 ? v : log1p(exp(bx)) / p0;
    }
    case 6: return v * tanh(log1p(exp(v)));
    case 8: return (v < (T)0 ? v : (T)0) - log1p(exp(-fabs(v)));
    case 9: {
        const T r = v < p0 ? p0 : v;
        return r > p1 ? p1 : r;
    }
    case 10: return v > p0 ? v - p0 : (v < -p0 ? v + p0 : v * (T)0);
    case 11: return (v >= -p0 && v <= p0) ? (T)0 : v;
    case 12: return v <= p0 ? p1 : v;
    }
    return v;
}
__device__ __forceinline__ T fm_act_b(int kind, T g, T v, T p0, T p1, T p2) {
    switch (kind) {
    case 0: {
        const T s = (T)1 / ((T)1 + exp(-v));
        return g * s * ((T)1 + v * ((T)1 - s));
    }
    case 1: return v > (T)0 ? g : g * p0;
    case 2: return v <= (T)0 ? g * (p2 * (p0 * p1)) * exp(v * p2) : g * p1;
    case 3: return v <= (T)-3 ? (T)0 : (v < (T)3 ? g * (v / (T)3 + (T)0.5) : g);
    case 4: return (v > (T)-3 && v < (T)3) ? g / (T)6 : (T)0;
    case 5: {
        const T bx = v * p0;
        const T z = exp(bx);
        return bx > p1 ? g : g * z / (z + (T)1);
    }
    case 6: {
        const T t = tanh(log1p(exp(v)));
        const T s = (T)1 / ((T)1 + exp(-v));
        return g * (t + v * s * ((T)1 - t * t));
    }
    case 7: return g * ((T)1 - v) * v;
    case 8: {
        const T z = exp(-fabs(v));
        const T q = z / ((T)1 + z);
        return g * (v < (T)0 ? (T)1 - q : q);
    }
    case 9: return (v <= p0 || v >= p1) ? (T)0 : g;
    case 10: case 11: return (v >= -p0 && v <= p0) ? (T)0 : g;
    case 12: return v <= p0 ? (T)0 : g;
    case 13: return g * ((T)1 - v * v);
    }
    return g;
}
extern "C" __global__ void fm_act_fwd_s(const S* __restrict__ x, S* __restrict__ y, long long n,
        int kind, double p0, double p1, double p2) {
    FM_LOOP(n) y[i] = fm_st(fm_act_f(kind, (T)fm_ld(x[i]), (T)p0, (T)p1, (T)p2));
}
extern "C" __global__ void fm_act_bwd_s(const S* __restrict__ g, const S* __restrict__ x,
        S* __restrict__ o, long long n, int kind, double p0, double p1, double p2) {
    FM_LOOP(n) o[i] = fm_st(fm_act_b(kind, (T)fm_ld(g[i]), (T)fm_ld(x[i]), (T)p0, (T)p1,
                                     (T)p2));
}
// c's m rows (row stride ldc) = bias: a linear layer's bias before the product with beta = 1
extern "C" __global__ void fm_bias_rows(S* __restrict__ c, const S* __restrict__ bias,
        long long n, long long ldc, long long total) {
    FM_LOOP(total) {
        const long long r = i / n;
        c[r * ldc + (i - r * n)] = bias[i - r * n];
    }
}
// average pools (fixed or adaptive windows, 1-3 spatial dims as (D, H, W)): csrc/pool.c's
// windows; the input read through its strides (planes (q0, q1), then d, h, w), the sums in T
__device__ __forceinline__ void fm_avg_win(long long o, long long in, long long n, int k, int s,
        int p, int adaptive, int cip, long long* st, long long* c, long long* f) {
    if (adaptive) {
        *st = (o * in) / n;
        *c = ((o + 1) * in + n - 1) / n - *st;
        *f = *c;
    } else {
        long long b = o * s - p, e = b + k;
        if (e > in + p) e = in + p;
        const long long pool = e - b;
        if (b < 0) b = 0;
        if (e > in) e = in;
        *st = b;
        *c = e > b ? e - b : 0;
        *f = cip ? pool : *c;
    }
}
// the arguments of fm_avgpool_s and fm_avgpool_bwd_s after their two arrays: the elements, the
// planes (P1 and their strides), the input's sizes and strides, the output's sizes, the
// windows (kernel, stride, padding per dimension), adaptive, count_include_pad, the divisor
#define FM_AVG_ARGS long long total, long long P1, long long sq0, long long sq1, long long D, \
        long long H, long long W, long long sd, long long sh, long long sw, long long oD, \
        long long oH, long long oW, int k0, int k1, int k2, int s0, int s1, int s2, int p0, \
        int p1, int p2, int adaptive, int cip, long long divo
extern "C" __global__ void fm_avgpool_s(const S* __restrict__ x, S* __restrict__ out,
        FM_AVG_ARGS) {
    FM_LOOP(total) {
        long long r = i;
        const long long ow = r % oW; r /= oW;
        const long long oh = r % oH; r /= oH;
        const long long od = r % oD; r /= oD;
        const S* xb = x + (r / P1) * sq0 + (r % P1) * sq1;
        long long a0, c0, f0, a1, c1, f1, a2, c2, f2;
        fm_avg_win(od, D, oD, k0, s0, p0, adaptive, cip, &a0, &c0, &f0);
        fm_avg_win(oh, H, oH, k1, s1, p1, adaptive, cip, &a1, &c1, &f1);
        fm_avg_win(ow, W, oW, k2, s2, p2, adaptive, cip, &a2, &c2, &f2);
        T acc = (T)0;
        for (long long a = a0; a < a0 + c0; ++a)
            for (long long b = a1; b < a1 + c1; ++b)
                for (long long c = a2; c < a2 + c2; ++c)
                    acc += (T)fm_ld(xb[a * sd + b * sh + c * sw]);
        const long long dv = divo > 0 ? divo : f0 * f1 * f2;
        out[i] = fm_st(acc / (T)dv);
    }
}
// the outputs whose window may hold input position i (checked against the window after)
__device__ __forceinline__ void fm_avg_outs(long long i, long long in, long long n, int k, int s,
        int p, int adaptive, long long* lo, long long* hi) {
    if (adaptive) {
        *lo = (i * n) / in;
        *hi = ((i + 1) * n) / in;
    } else {
        const long long l = i + p - k + 1;
        *lo = l <= 0 ? 0 : (l + s - 1) / s;
        *hi = (i + p) / s;
    }
    if (*hi > n - 1) *hi = n - 1;
}
// the backward: a thread per input element gathers its windows' g / divisor in output order
// (csrc/pool.c's order of additions), no atomics; g read through its strides
extern "C" __global__ void fm_avgpool_bwd_s(const S* __restrict__ g, S* __restrict__ gin,
        FM_AVG_ARGS) {
    FM_LOOP(total) {
        long long r = i;
        const long long iw = r % W; r /= W;
        const long long ih = r % H; r /= H;
        const long long id = r % D; r /= D;
        const S* gb = g + (r / P1) * sq0 + (r % P1) * sq1;
        long long l0, h0, l1, h1, l2, h2;
        fm_avg_outs(id, D, oD, k0, s0, p0, adaptive, &l0, &h0);
        fm_avg_outs(ih, H, oH, k1, s1, p1, adaptive, &l1, &h1);
        fm_avg_outs(iw, W, oW, k2, s2, p2, adaptive, &l2, &h2);
        T acc = (T)0;
        for (long long od = l0; od <= h0; ++od) {
            long long a0, c0, f0;
            fm_avg_win(od, D, oD, k0, s0, p0, adaptive, cip, &a0, &c0, &f0);
            if (id < a0 || id >= a0 + c0) continue;
            for (long long oh = l1; oh <= h1; ++oh) {
                long long a1, c1, f1;
                fm_avg_win(oh, H, oH, k1, s1, p1, adaptive, cip, &a1, &c1, &f1);
                if (ih < a1 || ih >= a1 + c1) continue;
                for (long long ow = l2; ow <= h2; ++ow) {
                    long long a2, c2, f2;
                    fm_avg_win(ow, W, oW, k2, s2, p2, adaptive, cip, &a2, &c2, &f2);
                    if (iw < a2 || iw >= a2 + c2) continue;
                    const long long dv = divo > 0 ? divo : f0 * f1 * f2;
                    acc += (T)fm_ld(gb[od * sd + oh * sh + ow * sw]) / (T)dv;
                }
            }
        }
        gin[i] = fm_st(acc);
    }
}
// the max-pool backward as a gather (fixed windows; no window empty, checked on the host): a
// thread per input element adds the gradients of the outputs whose index names it, over the
// windows that may hold it, in output order (the CPU scatter's order: the same sum), rounded
// once; no zeroed accumulator, no atomics, deterministic. g, idx: contiguous (planes x osz)
__device__ __forceinline__ void fm_max_outs(long long i, long long n, int k, int s, int p,
        int d, long long* lo, long long* hi) {
    const long long t = i + p - (long long)(k - 1) * d;
    *lo = t <= 0 ? 0 : (t + s - 1) / s;
    *hi = (i + p) / s;
    if (*hi > n - 1) *hi = n - 1;
}
extern "C" __global__ void fm_maxpool_bwd_s(const S* __restrict__ g,
        const long long* __restrict__ idx, S* __restrict__ gin, long long total, long long D,
        long long H, long long W, long long oD, long long oH, long long oW, int k0, int k1,
        int k2, int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1, int d2) {
    FM_LOOP(total) {
        long long r = i;
        const long long iw = r % W; r /= W;
        const long long ih = r % H; r /= H;
        const long long id = r % D; r /= D;
        const long long pos = (id * H + ih) * W + iw, on = oD * oH * oW;
        const S* gp = g + r * on;
        const long long* ip = idx + r * on;
        long long l0, h0, l1, h1, l2, h2;
        fm_max_outs(id, oD, k0, s0, p0, d0, &l0, &h0);
        fm_max_outs(ih, oH, k1, s1, p1, d1, &l1, &h1);
        fm_max_outs(iw, oW, k2, s2, p2, d2, &l2, &h2);
        T acc = (T)0;
        for (long long od = l0; od <= h0; ++od)
            for (long long oh = l1; oh <= h1; ++oh)
                for (long long ow = l2; ow <= h2; ++ow) {
                    const long long o = (od * oH + oh) * oW + ow;
                    if (ip[o] == pos) acc += (T)fm_ld(gp[o]);
                }
        gin[i] = fm_st(acc);
    }
}
// global average pooling over a large plane: one block a plane, each thread summing a strided
// share in double, then the block's shuffle/shared-memory sum (cuda_kernels.py's
// fm_block_sum); the plane's elements read through the input's strides (D, H, W of sizes
// and strides), the mean rounded once to S
extern "C" __global__ void fm_avgpool_glob_s(const S* __restrict__ x, S* __restrict__ out,
        long long P1, long long sq0, long long sq1, long long D, long long H, long long W,
        long long sd, long long sh, long long sw, long long dv) {
    __shared__ double shm[33];
    const long long r = blockIdx.x;
    const S* xb = x + (r / P1) * sq0 + (r % P1) * sq1;
    const long long n = D * H * W;
    double acc = 0.0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        const long long w = j % W, t = j / W;
        acc += (double)fm_ld(xb[(t / H) * sd + (t % H) * sh + w * sw]);
    }
    acc = fm_block_sum(acc, shm);
    if (threadIdx.x == 0) out[r] = fm_st((T)(acc / (double)dv));
}
// the fused elementwise losses of csrc/losses.c (api_losses.h has the formulas; T is the
// element type: float32 and float64 only are launched), kind codes FM_LOSS_*: 0 mse, 1 l1,
// 2 smooth_l1 (p0 beta), 3 huber (p0 delta), 4 bce, 5 bce_with_logits (pw: pos_weight), 6
// soft_margin, 7 kl_div, 8 kl_div with a log target; w / pw of periods wn / pn (null: none)
__device__ __forceinline__ float fm_lexp(float v) { return expf(v); }
__device__ __forceinline__ double fm_lexp(double v) { return exp(v); }
__device__ __forceinline__ float fm_llog(float v) { return logf(v); }
__device__ __forceinline__ double fm_llog(double v) { return log(v); }
__device__ __forceinline__ float fm_llog1p(float v) { return log1pf(v); }
__device__ __forceinline__ double fm_llog1p(double v) { return log1p(v); }
__device__ __forceinline__ T fm_labs(T v) { return v < (T)0 ? -v : (v == (T)0 ? (T)0 : v); }
__device__ __forceinline__ T fm_lsig(T v) {  // sigmoid without overflow
    const T e = fm_lexp(-fm_labs(v));
    return (v >= (T)0 ? (T)1 : e) / ((T)1 + e);
}
__device__ __forceinline__ T fm_lsp(T z) {  // softplus max(z, 0) + log1p(e^-|z|)
    return (z > (T)0 ? z : (T)0) + fm_llog1p(fm_lexp(-fm_labs(z)));
}
__device__ __forceinline__ T fm_loss_v(int kind, T x, T t, const T* pw, long long pn,
        long long i, T p0) {
    const T d = x - t;
    if (kind == 0) return d * d;
    if (kind == 1) return fm_labs(d);
    if (kind == 2) {
        const T a = fm_labs(d);
        return a < p0 ? a * a * ((T)0.5 / p0) : a - (T)0.5 * p0;
    }
    if (kind == 3) {
        const T a = fm_labs(d);
        return a <= p0 ? (T)0.5 * a * a : p0 * (a - (T)0.5 * p0);
    }
    if (kind == 4) {
        T lx = fm_llog(x), l1x = fm_llog1p(-x);
        lx = lx < (T)-100 ? (T)-100 : lx;
        l1x = l1x < (T)-100 ? (T)-100 : l1x;
        return (t - (T)1) * l1x - t * lx;
    }
    if (kind == 5) {
        const T sp = fm_lsp(-x);
        const T lw = pw ? (T)1 + (pw[i % pn] - (T)1) * t : (T)1;
        return ((T)1 - t) * x + lw * sp;
    }
    if (kind == 6) return fm_lsp(-t * x);
    if (kind == 7) { const T tl = t == (T)0 ? (T)0 : t * fm_llog(t); return tl - t * x; }
    return fm_lexp(t) * (t - x);
}
// red 0: y[i] = the weighted losses; else each block's double sum into part[blockIdx.x]; bad:
// set when a bce operand is outside [0, 1] or NaN
extern "C" __global__ void fm_loss_fwd(int kind, int red, long long n, const T* __restrict__ x,
        const T* __restrict__ t, const T* __restrict__ w, long long wn,
        const T* __restrict__ pw, long long pn, T p0, T* __restrict__ y,
        double* __restrict__ part, int* __restrict__ bad) {
    __shared__ double shm[33];
    double acc = 0.0;
    FM_LOOP(n) {
        const T xv = x[i], tv = t[i];
        if (kind == 4 && !(xv >= (T)0 && xv <= (T)1 && tv >= (T)0 && tv <= (T)1)) *bad = 1;
        T v = fm_loss_v(kind, xv, tv, pw, pn, i, p0);
        if (w) v *= w[i % wn];
        if (red) acc += (double)v;
        else y[i] = v;
    }
    if (red) {
        acc = fm_block_sum(acc, shm);
        if (threadIdx.x == 0) part[blockIdx.x] = acc;
    }
}
// y[0] = the sum of the nb block sums (in block order: deterministic), divided by n for the
// mean (0 / 0: NaN for no elements); one block
extern "C" __global__ void fm_loss_total(const double* __restrict__ part, long long nb,
        long long n, int mean, T* __restrict__ y) {
    __shared__ double shm[33];
    double acc = 0.0;
    for (long long j = threadIdx.x; j < nb; j += blockDim.x) acc += part[j];
    acc = fm_block_sum(acc, shm);
    if (threadIdx.x == 0) y[0] = (T)(mean ? acc / (double)n : acc);
}
// gx = c dl/dx, gt = c dl/dt (either null), c = g[gstep ? i : 0] * scale * w
extern "C" __global__ void fm_loss_bwd(int kind, long long n, const T* __restrict__ g,
        int gstep, T scale, const T* __restrict__ x, const T* __restrict__ t,
        const T* __restrict__ w, long long wn, const T* __restrict__ pw, long long pn, T p0,
        T* __restrict__ gx, T* __restrict__ gt) {
    FM_LOOP(n) {
        T c = g[gstep ? i : 0] * scale;
        if (w) c *= w[i % wn];
        const T xv = x[i], tv = t[i];
        T dx, dt;
        if (kind == 0) { dx = (T)2 * c * (xv - tv); dt = -dx; }
        else if (kind <= 3) {
            const T d = xv - tv;
            T sg;
            if (kind == 1) sg = d > (T)0 ? (T)1 : (d < (T)0 ? (T)-1 : (T)0);  // NaN: 0
            else if (kind == 2) sg = d < -p0 ? (T)-1 : (d > p0 ? (T)1 : d * ((T)1 / p0));
            else sg = d < -p0 ? -p0 : (d > p0 ? p0 : d);
            dx = c * sg;
            dt = -dx;
        } else if (kind == 4) {
            T den = ((T)1 - xv) * xv;
            den = den < (T)9.999999960041972e-13 ? (T)9.999999960041972e-13 : den;
            dx = c * (xv - tv) / den;
            T lx = fm_llog(xv), l1x = fm_llog1p(-xv);
            lx = lx < (T)-100 ? (T)-100 : lx;
            l1x = l1x < (T)-100 ? (T)-100 : l1x;
            dt = c * (l1x - lx);
        } else if (kind == 5) {
            if (pw) {
                const T p = pw[i % pn];
                const T lw = (T)1 + (p - (T)1) * tv;
                dx = c * (lw * fm_lsig(xv) - p * tv);
                dt = c * ((p - (T)1) * fm_lsp(-xv) - xv);
            } else {
                dx = c * (fm_lsig(xv) - tv);
                dt = -(c * xv);
            }
        } else if (kind == 6) {
            const T q = c * fm_lsig(-tv * xv);
            dx = -tv * q;
            dt = -xv * q;
        } else if (kind == 7) {
            dx = -(c * tv);
            dt = c * (fm_llog(tv) + (T)1 - xv);
        } else {
            const T e = fm_lexp(tv);
            dx = -(c * e);
            dt = c * e * (tv - xv + (T)1);
        }
        if (gx) gx[i] = dx;
        if (gt) gt[i] = dt;
    }
}
#undef FM_LOOP
#undef FM_AVG_ARGS
"""

# an int32/int64 tensor + - * a number (batch norm's num_batches_tracked += 1 each step), in
# two's complement (unsigned arithmetic: wraps as the generic code's NumPy/CuPy integers);
# left: the number is the left operand (s - x)
INT_S = r"""
template <typename U> __device__ void fm_int_s(const U* __restrict__ x, U s,
        U* __restrict__ o, long long n, int op, int left) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const U v = x[i];
        o[i] = op == 0 ? (U)(v + s) : op == 2 ? (U)(v * s) : left ? (U)(s - v) : (U)(v - s);
    }
}
extern "C" __global__ void fm_int_s32(const unsigned int* x, unsigned int s, unsigned int* o,
        long long n, int op, int left) {
    fm_int_s(x, s, o, n, op, left);
}
extern "C" __global__ void fm_int_s64(const unsigned long long* x, unsigned long long s,
        unsigned long long* o, long long n, int op, int left) {
    fm_int_s(x, s, o, n, op, left);
}
"""
_INT_OPS = {K.BIN_ADD: 0, K.BIN_SUB: 1, K.BIN_MUL: 2}

# storage kind -> (compute type, prelude)
_F_IO = ("typedef {t} S;\n__device__ __forceinline__ {t} fm_ld({t} v) {{ return v; }}\n"
         "__device__ __forceinline__ {t} fm_st({t} v) {{ return v; }}\n")
_LP_IO = ("#define FM_H {h}\n" + LP_CONV + "typedef X S;\n"
          "__device__ __forceinline__ float fm_ld(X v) { return fm_lp_ld(v); }\n"
          "__device__ __forceinline__ X fm_st(float f) { return fm_lp_st(f); }\n")
STEP_KINDS = {"f32": "float", "f64": "double", "bf16": "float", "f16": "float"}


def step_prelude(kind):
    """What STEP_SOURCE is compiled after for storage kind ``kind`` (after ``typedef T``)."""
    if kind in ("bf16", "f16"):
        io = _LP_IO.replace("{h}", "0" if kind == "bf16" else "1")
    else:
        io = _F_IO.format(t=STEP_KINDS[kind])
    return _GELU_PRE + _BLOCK + io


_KIND = {D.float32.code: "f32", D.float64.code: "f64", D.bfloat16.code: "bf16",
         D.float16.code: "f16"}
_LOWP = (D.bfloat16, D.float16)
_B256 = (256,)
_GLOBAL_MIN = 256  # global average pools of planes this large take one block a plane


def _grid(n):
    return (min((n + 255) // 256, 1 << 20),)


_WINDOWS_OK = {}


def _no_empty_window(isz, osz, k, s, p, d):
    """Whether every window of the pool holds an input position (an empty one reports its
    clamped start, outside the gather's candidates: the scatter serves those pools)."""
    key = (isz, osz, k, s, p, d)
    ok = _WINDOWS_OK.get(key)
    if ok is None:
        ok = all(any(0 <= o * ss - pp + j * dd < n for j in range(kk))
                 for n, on, kk, ss, pp, dd in zip(isz, osz, k, s, p, d) for o in range(on))
        if len(_WINDOWS_OK) > 512:
            _WINDOWS_OK.clear()
        _WINDOWS_OK[key] = ok
    return ok


def _u64(t):
    return np.uint64(t._ptr)


def _u64n(t):
    """A tensor's address, or a null pointer for None."""
    return np.uint64(0 if t is None else t._ptr)


def _planes(shape, strides):
    """(P1, plane stride 0, plane stride 1) as int64s for lead dims that merge into at most two
    strided dims (P0 x P1), or None."""
    dims = [(n, st) for n, st in zip(shape, strides) if n != 1]
    merged = []
    for n, st in dims:
        if merged and merged[-1][1] == n * st:
            merged[-1] = (merged[-1][0] * n, st)
        else:
            merged.append((n, st))
    if len(merged) > 2:
        return None
    merged = [(1, 0)] * (2 - len(merged)) + merged
    return np.int64(merged[1][0]), np.int64(merged[0][1]), np.int64(merged[1][1])


class StepKernelsMixin:
    """ReLU backward and 16-bit GELU kernels in front of the other kernel mixins (see the
    module docstring); each method defers to the next class in the MRO where it declines."""

    def _step_kernel(self, kind, name):
        return self._raw_kernel("step_" + kind, step_prelude(kind) + STEP_SOURCE, name,
                                STEP_KINDS[kind])

    def binary(self, op, shape, out, a, sa, b, sb, params=None):
        ta, tb = type(a), type(b)
        if params is None and (ta is int or tb is int) and op in _INT_OPS and \
                (out._dtype is D.int64 or out._dtype is D.int32) and \
                self._int_scalar(op, tuple(shape), out, a, sa, b, sb):
            return 0
        return super().binary(op, shape, out, a, sa, b, sb, params)

    def _int_scalar(self, op, shape, out, a, sa, b, sb):
        """An int32/int64 tensor + - * a Python int into a result of its dtype and layout (in
        place too): one launch (fm_int_s32/64), no array views. The number wraps to the
        dtype's width, as the generic code's."""
        left = type(a) is int
        t, st, sv = (b, sb, a) if left else (a, sa, b)
        if t._dtype is not out._dtype or not _same_contig(shape, out, (t, st)) or \
                self._overlap_other(out, t):
            return False
        n = out._numel
        w = 64 if out._dtype is D.int64 else 32
        s = sv & ((1 << w) - 1)
        name = f"fm_int_s{w}"
        args = (_u64(t), np.uint64(s) if w == 64 else np.uint32(s), _u64(out), np.int64(n),
                np.int32(_INT_OPS[op]), np.int32(left))

        def go():
            self._raw_kernel("int_s", INT_S, name, "float")(_grid(n), _B256, args)

        return n == 0 or self._served("int_scalar", go)

    def unary(self, op, out, x, p0, p1, p2):
        if op == K.UN_RELU and (x._dtype is D.float32 or x._dtype is D.float64) and \
                out._dtype is x._dtype and _same_contig(x._shape, out, (x, None)) and \
                not self._overlap_other(out, x):
            n = x._numel
            kind = _KIND[x._dtype.code]
            px, po = _u64(x), _u64(out)

            def go():
                self._step_kernel(kind, "fm_relu")(_grid(n), _B256, (px, po, np.int64(n)))

            if n == 0 or self._served("relu", go):
                return 0
        return super().unary(op, out, x, p0, p1, p2)

    def relu_bwd(self, g, y, out):
        kind = _KIND.get(y._dtype.code)
        if kind is not None and g._dtype is y._dtype and out._dtype is y._dtype:
            n = y._numel
            pg, py, po = _u64(g), _u64(y), _u64(out)

            def go():
                self._step_kernel(kind, "fm_relu_bwd")(_grid(n), _B256,
                                                        (pg, py, po, np.int64(n)))

            if n == 0 or self._served("relu_bwd", go):
                return 0
        return super().relu_bwd(g, y, out)

    def mm_bias(self, m, n, k, c, scm, a, sam, sak, b, sbk, sbn, bias):
        kind = _KIND.get(c._dtype.code)
        if kind is not None and bias._dtype is c._dtype and m * n:
            tot = m * n
            args = (_u64(c), _u64(bias), np.int64(n), np.int64(scm), np.int64(tot))

            def go():
                self._step_kernel(kind, "fm_bias_rows")(_grid(tot), _B256, args)

            if self._served("bias_rows", go):
                return self.mm(m, n, k, c, scm, 1, a, sam, sak, b, sbk, sbn, 1.0, 1.0, 1, 1)
        return super().mm_bias(m, n, k, c, scm, a, sam, sak, b, sbk, sbn, bias)

    def pool_avg_any(self, backward, adaptive, nsp, src, out, isz, osz, k, s, p, cip, divo):
        """Average pool (or its backward) of src read through its strides, any float dtype
        (16-bit as it is), into the contiguous out (the op layer's lead + osz, or lead + isz
        for the backward): one launch; nonzero to leave it to the generic path. nsp: src's
        spatial dims (its last); isz, osz, k, s, p: (D, H, W) triples."""
        kind = _KIND.get(src._dtype.code)
        nd = len(src._shape)
        if kind is None or out._dtype is not src._dtype or not out._contig or not 0 < nsp <= 3:
            return K.ERR_DTYPE
        planes = _planes(src._shape[:nd - nsp], src._stride[:nd - nsp])
        if planes is None:
            return K.ERR_ARG
        st = (0,) * (3 - nsp) + tuple(src._stride[nd - nsp:])
        tot = out._numel
        if tot == 0:
            return 0
        if not backward and self._avg_global(
                kind, src, out, planes, isz, st, osz, k, p, adaptive, divo):
            return 0
        args = ((_u64(src), _u64(out), np.int64(tot)) + planes +
                tuple(np.int64(v) for v in tuple(isz) + st + tuple(osz)) +
                tuple(np.int32(v) for v in tuple(k) + tuple(s) + tuple(p)) +
                (np.int32(adaptive), np.int32(cip), np.int64(divo)))
        name = "fm_avgpool_bwd_s" if backward else "fm_avgpool_s"

        def go():
            self._step_kernel(kind, name)(_grid(tot), _B256, args)

        return 0 if self._served("avgpool_bwd" if backward else "avgpool", go) else K.ERR_OP

    # ---- the max-pool backward as a gather --------------------------------------------------
    def pool_max(self, adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx):
        rc = super().pool_max(adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx)
        if rc == 0 and idx is not None and not adaptive and d is not None:
            st = idx._storage
            r = getattr(st, "irange", None)
            if r is not None and len(r) == 4 and r[0] == st.version:
                # the windows that made these indices ride on the range note (note_range's,
                # dropped with it when the storage is next written in place)
                st.irange = r + ((nplanes, tuple(isz), tuple(osz), tuple(k), tuple(s),
                                  tuple(p), tuple(d)),)
        return rc

    def pool_scatter(self, accumulate, nplanes, ssize, dsize, src, idx, dst, bad):
        if accumulate and self._max_bwd_gather(nplanes, ssize, dsize, src, idx, dst):
            return 0
        return super().pool_scatter(accumulate, nplanes, ssize, dsize, src, idx, dst, bad)

    def _max_bwd_gather(self, nplanes, ssize, dsize, src, idx, dst):
        """The max-pool backward of the pool's own indices (their windows noted by pool_max,
        the storage not written since) as one gather launch (fm_maxpool_bwd_s)."""
        st = idx._storage
        r = getattr(st, "irange", None)
        kind = _KIND.get(src._dtype.code)
        if r is None or len(r) != 5 or kind is None or r[0] != st.version or \
                r[1] != D.int64.code or r[4][0] != nplanes or \
                dst._dtype is not src._dtype or not (src._contig and dst._contig) or \
                idx._ptr != st.ptr or not idx._contig or nplanes <= 0:
            return False
        _, isz, osz, k, s, p, d = r[4]
        if ssize != osz[0] * osz[1] * osz[2] or dsize != isz[0] * isz[1] * isz[2] or \
                src._numel != nplanes * ssize or dst._numel != nplanes * dsize or \
                not _no_empty_window(isz, osz, k, s, p, d):
            return False
        total = nplanes * dsize
        args = ((_u64(src), _u64(idx), _u64(dst), np.int64(total)) +
                tuple(np.int64(v) for v in isz + osz) +
                tuple(np.int32(v) for v in k + s + p + d))

        def go():
            self._step_kernel(kind, "fm_maxpool_bwd_s")(_grid(total), _B256, args)

        return self._served("maxpool_bwd", go)

    def _avg_global(self, kind, src, out, planes, isz, st, osz, k, p, adaptive, divo):
        """Global average pooling (one output per plane, its window the whole plane) of planes
        of at least _GLOBAL_MIN elements: one block a plane (fm_avgpool_glob_s) where the
        thread-per-output kernel would sum a large plane in one thread."""
        n = int(isz[0]) * int(isz[1]) * int(isz[2])
        if n < _GLOBAL_MIN or tuple(osz) != (1, 1, 1) or \
                not (adaptive or (tuple(k) == tuple(isz) and tuple(p) == (0, 0, 0))):
            return False
        nplanes = out._numel
        if nplanes >= 1 << 31:
            return False
        args = ((_u64(src), _u64(out)) + planes +
                tuple(np.int64(v) for v in tuple(isz) + tuple(st)) +
                (np.int64(divo if divo > 0 else n),))

        def go():
            self._step_kernel(kind, "fm_avgpool_glob_s")((nplanes,), _B256, args)

        return self._served("avgpool_glob", go)

    # ---- the fused elementwise losses (core's fused.loss; csrc/losses.c on the CPU) -------------
    def _loss_kind(self, x, t, w, pw, *outs):
        """The storage kind of float32/float64 contiguous operands of one dtype, or None."""
        dt = x._dtype
        if dt is not D.float32 and dt is not D.float64:
            return None
        for v in (t, w, pw) + outs:
            if v is not None and (v._dtype is not dt or not v._contig):
                return None
        return "f32" if dt is D.float32 else "f64"

    def loss_fwd(self, kind, reduction, x, t, w, wn, pw, pn, p0, y):
        """The elementwise loss ``kind`` (codes.LOSS_*) of contiguous float32/float64 x, t
        (weights w, pw of periods wn, pn, or None) into y, or its mean/sum into the 0-d y: one
        launch, plus one for a reduction's total (block sums in double, added in block order:
        deterministic); binary cross entropy reads back its range flag (one sync, as the
        composition's check). codes.ERR_DTYPE leaves it to the composition."""
        ks = self._loss_kind(x, t, w, pw, y)
        n = x._numel
        if ks is None or not 0 <= kind <= K.LOSS_KL_DIV_LOG or t._numel != n or \
                (w is not None and not 0 < wn) or (pw is not None and not 0 < pn) or \
                n >= 1 << 40:
            return K.ERR_DTYPE
        red = int(reduction != K.LOSS_NONE)
        mean = int(reduction == K.LOSS_MEAN)
        ct = np.float32 if ks == "f32" else np.float64
        nb = min((n + 255) // 256, 1024) if red else 0
        part = self.xp.empty(max(nb, 1), np.float64) if red else None
        bad = self.xp.zeros(1, np.int32) if kind == K.LOSS_BCE and n else None

        def go():
            if n:
                self._step_kernel(ks, "fm_loss_fwd")(
                    (nb,) if red else _grid(n), _B256,
                    (np.int32(kind), np.int32(red), np.int64(n), _u64n(x), _u64n(t), _u64n(w),
                     np.int64(wn or 1), _u64n(pw), np.int64(pn or 1), ct(p0), _u64n(y),
                     np.uint64(0) if part is None else part,
                     np.uint64(0) if bad is None else bad))
            if red:
                self._step_kernel(ks, "fm_loss_total")(
                    (1,), _B256, (part, np.int64(nb), np.int64(n), np.int32(mean), _u64n(y)))

        if not self._served("loss_fwd", go):
            return K.ERR_OP
        if bad is not None and int(self.to_numpy(bad)[0]):
            return K.ERR_VALUE
        return 0

    def loss_bwd(self, kind, g, gstep, scale, x, t, w, wn, pw, pn, p0, gx, gt):
        """gx = c dloss/dx, gt = c dloss/dt (either None), c = g[i * gstep] * scale * w: one
        launch (codes.ERR_DTYPE: the composition's derivative)."""
        ks = self._loss_kind(x, t, w, pw, g, gx, gt)
        n = x._numel
        if ks is None or not 0 <= kind <= K.LOSS_KL_DIV_LOG or gstep not in (0, 1) or \
                (w is not None and not 0 < wn) or (pw is not None and not 0 < pn):
            return K.ERR_DTYPE
        if n == 0 or (gx is None and gt is None):
            return 0
        ct = np.float32 if ks == "f32" else np.float64

        def go():
            self._step_kernel(ks, "fm_loss_bwd")(_grid(n), _B256, (
                np.int32(kind), np.int64(n), _u64n(g), np.int32(gstep), ct(scale), _u64n(x),
                _u64n(t), _u64n(w), np.int64(wn or 1), _u64n(pw), np.int64(pn or 1), ct(p0),
                _u64n(gx), _u64n(gt)))

        return 0 if self._served("loss_bwd", go) else K.ERR_OP

    def _act_s(self, name, kind, ins, out, p0, p1, p2):
        """One launch of fm_act_fwd_s / fm_act_bwd_s (float32/float64 contiguous operands of one
        dtype and shape: core's activation casts 16-bit data to float32 first); codes.ERR_OP to
        let core compose the formula when the kernel cannot serve."""
        dt = out._dtype
        k = _KIND.get(dt.code)
        if k is None or dt in _LOWP or any(t._dtype is not dt or t._numel != out._numel
                                           for t in ins):
            return K.ERR_DTYPE
        bwd = name == "fm_act_bwd_s"
        if kind < K.ACT_SILU or kind > K.ACT_TANH or \
                (not bwd and kind in (K.ACT_SIGMOID, K.ACT_TANH)):
            return K.ERR_OP
        n = out._numel
        args = tuple(_u64(t) for t in ins) + (_u64(out), np.int64(n), np.int32(kind),
                                               np.float64(p0), np.float64(p1), np.float64(p2))

        def go():
            self._step_kernel(k, name)(_grid(n), _B256, args)

        return 0 if n == 0 or self._served("act", go) else K.ERR_OP

    def act_fwd(self, kind, x, y, p0, p1, p2):
        """y = act(x) for csrc's codes.ACT_* kinds in one launch (see fm_act_fwd_s)."""
        return self._act_s("fm_act_fwd_s", kind, (x,), y, p0, p1, p2)

    def act_bwd(self, kind, g, x, out, p0, p1, p2):
        """out = g * act'(x) in one launch (ACT_SIGMOID/ACT_TANH: x is the forward's output)."""
        return self._act_s("fm_act_bwd_s", kind, (g, x), out, p0, p1, p2)

    def gelu_native(self, dtype):
        """Whether gelu_fwd/gelu_bwd take ``dtype`` (16-bit) data as it is."""
        return dtype in _LOWP and self._kernels_ok and "gelu_s" not in self.fast_path_errors

    def _gelu_s(self, approximate, name, ins, out, bwd):
        kind = _KIND[out._dtype.code]
        n = out._numel
        hi, lo = self._gelu_limits(approximate, D.float32, bwd)
        args = tuple(_u64(t) for t in ins) + (_u64(out), np.int64(n), np.float32(hi),
                                               np.float32(lo),
                                               np.int32(approximate == K.GELU_TANH))

        def go():
            self._step_kernel(kind, name)(_grid(n), _B256, args)

        return n == 0 or self._served("gelu_s", go)

    def gelu_fwd(self, approximate, x, y):
        dt = x._dtype
        if (dt in _LOWP or dt is D.float32) and y._dtype is dt and \
                self._gelu_s(approximate, "fm_gelu_fwd_s", (x,), y, False):
            return 0
        return K.ERR_DTYPE if dt in _LOWP else super().gelu_fwd(approximate, x, y)

    def gelu_bwd(self, approximate, g, x, out):
        dt = x._dtype
        if (dt in _LOWP or dt is D.float32) and g._dtype is dt and out._dtype is dt and \
                self._gelu_s(approximate, "fm_gelu_bwd_s", (g, x), out, True):
            return 0
        return K.ERR_DTYPE if dt in _LOWP else super().gelu_bwd(approximate, g, x, out)
