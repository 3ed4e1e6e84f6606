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
  product accumulates onto it (cuBLAS, beta = 1), as before; any float dtype.

The sources are compiled once per storage type: ``S`` the element as stored, ``T`` the type
computed in (float for the 16-bit types and float32, double for float64), ``fm_ld``/``fm_st``
the conversions (cuda_lowp's exact widening and round-to-nearest-even for 16-bit). Each path
is taken for contiguous operands of one dtype and shape (the op layer's condition); a kernel
that fails to build or launch is recorded in ``fast_path_errors`` and the generic code serves.
"""

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as K
from fiamma._backend.xp.cuda_kernels import _GELU_PRE
from fiamma._backend.xp.cuda_lowp import LP_CONV, _same_contig

__all__ = ["StepKernelsMixin", "STEP_SOURCE", "step_prelude", "STEP_KINDS"]

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
#undef FM_LOOP
#undef FM_AVG_ARGS
"""

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
    return _GELU_PRE + io


_KIND = {D.float32.code: "f32", D.float64.code: "f64", D.bfloat16.code: "bf16",
         D.float16.code: "f16"}
_LOWP = (D.bfloat16, D.float16)
_B256 = (256,)


def _grid(n):
    return (min((n + 255) // 256, 1 << 20),)


def _u64(t):
    return np.uint64(t._ptr)


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
        args = ((_u64(src), _u64(out), np.int64(tot)) + planes +
                tuple(np.int64(v) for v in tuple(isz) + st + tuple(osz)) +
                tuple(np.int32(v) for v in tuple(k) + tuple(s) + tuple(p)) +
                (np.int32(adaptive), np.int32(cip), np.int64(divo)))
        name = "fm_avgpool_bwd_s" if backward else "fm_avgpool_s"

        def go():
            self._step_kernel(kind, name)(_grid(tot), _B256, args)

        return 0 if self._served("avgpool_bwd" if backward else "avgpool", go) else K.ERR_OP

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
