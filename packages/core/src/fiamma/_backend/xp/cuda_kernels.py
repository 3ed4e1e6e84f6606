"""The cuda backend's own kernels: fused CuPy kernels (ElementwiseKernel / RawKernel) for the
primitives whose generic array code costs many launches or many passes over memory:

- ``gelu_fwd`` / ``gelu_bwd``: one elementwise pass (the generic code makes ~20 float64
  passes through erfc);
- ``adam_step`` / ``sgd_step``: one elementwise kernel per parameter (the generic code ~12);
- ``row_norm_fwd`` / ``row_norm_bwd`` (layer norm and RMS norm with one weight per column):
  one block per row, statistics in float64; the weight/bias gradients as column sums;
- ``xent_fwd`` / ``xent_bwd``: one block per row (log-sum-exp, target, smoothing in float64);
  the target range check is a flag the kernel raises, read back once (the one host sync, as
  before);
- ``reduce`` (sum/mean over leading dims of a contiguous float array, e.g. a bias gradient):
  column sums in float64;
- ``binary`` (+ - * / of same-shape contiguous float32 arrays): four elements per thread, as
  wide loads where the addresses allow;
- ``batch_norm_fwd`` / ``batch_norm_bwd``: per-channel statistics in one block a channel
  (float64 sums; the running statistics and affine factors written by the block), then one
  elementwise pass (the generic code makes ~15 whole-array passes);
- ``attn_fwd`` / ``attn_bwd`` without a mask or with the causal one, no dropout: with head
  dims up to 128 the fused flash-style kernels of cuda_flash.py (no score matrix in memory;
  an online softmax, so they agree with the generic code to float tolerance, not bit for bit);
  beyond, the score rows' scale, mask, softmax and log-sum-exp (and in the backward the
  probabilities again and ds = p (dp - sum p dp)) in one kernel between cuBLAS's products (the
  generic code ~10 passes over the (B, H, L, S) scores);
- the counter-based generator's Philox4x32-10 blocks (every random fill: dropout, rand,
  randn, ...): one kernel, the same words as the CPU's (the generic code ~100 array ops);
- ``softmax`` (and log-softmax) over the last dim of contiguous rows: one block a row;
- ``pool_max`` with fixed windows: one thread an output, the window in tap order;
- convolution's im2col and col2im for 2 spatial dims (``conv``'s forward, data and weight
  gradients): one pass each (the generic code pads, stacks one view per tap, and adds one
  strided view per tap back); col2im gathers per input pixel in tap order, so it needs no
  atomics and sums in the generic code's order.

Each path is taken only where its conditions hold (dtype float32/float64, the layouts named);
everything else goes to the generic array code (fiamma._backend.xp), which is correct for
every layout. Arithmetic mirrors the generic code's order in the tensor's dtype (kernels are
compiled with --fmad=false, so no contraction changes a rounding); sums are float64 as there.
A kernel that fails to build or launch is reported in ``fast_path_errors`` and its op falls back
to the generic code (for the optimizer steps, on the parameters the kernel did not reach);
``fast_path_calls`` counts the calls each path served (the GPU tests assert both).
These kernels run only on a GPU: packages/core/tests/test_cuda_kernels.py checks them there
(benchmarks/gpu/run.sh).
"""

import math

import numpy as np

from fiamma import _dtype as D
from fiamma._backend import codes as K
from fiamma._backend.xp.cuda_flash import flash_bwd, flash_fwd

__all__ = ["CudaKernelsMixin"]

_CT = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_OPTS = ("--fmad=false",)
_MAX_GRID = (1 << 31) - 1  # blocks in a grid's x dimension (one a row in the row kernels)
_MAX_ROWS = 65535 * 64  # grid.y (65535) blocks of 64-row chunks in the column-sum kernels
_INV_SQRT2 = 0.70710678118654752440
_INV_SQRT_2PI = 0.39894228040143267794
_TANH_K = 0.79788456080286535588
_TANH_C = 0.044715

# ---- CUDA sources ------------------------------------------------------------------------------

_BLOCK = r"""
#define FM_NEG_INF __longlong_as_double(0xfff0000000000000ULL)
__device__ __forceinline__ double fm_block_sum(double v, double* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    const int nw = (blockDim.x + 31) >> 5;
    if (wid == 0) {
        v = (lane < nw) ? sh[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    return sh[32];
}
__device__ __forceinline__ double fm_block_max(double v, double* sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    const int nw = (blockDim.x + 31) >> 5;
    if (wid == 0) {
        v = (lane < nw) ? sh[lane] : FM_NEG_INF;
        for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) sh[32] = v;
    }
    __syncthreads();
    return sh[32];
}
"""

# layer norm / RMS norm forward: one block per row; T the data, mean and rstd dtype
_ROW_NORM_FWD = _BLOCK + r"""
extern "C" __global__ void fm_row_norm_fwd(const T* __restrict__ x, long long sx,
        T* __restrict__ y, const T* __restrict__ w, const T* __restrict__ b,
        T* __restrict__ mean, T* __restrict__ rstd, long long K, int rms, double eps) {
    __shared__ double sh[33];
    const long long r = blockIdx.x;
    const T* xr = x + r * sx;
    T* yr = y + r * K;
    double mu, var;
    if (rms) {
        double s2 = 0.0;
        for (long long j = threadIdx.x; j < K; j += blockDim.x) {
            double v = (double)xr[j];
            s2 += v * v;
        }
        s2 = fm_block_sum(s2, sh);
        mu = 0.0;
        var = s2 / (double)K;
    } else {
        double s = 0.0;
        for (long long j = threadIdx.x; j < K; j += blockDim.x) s += (double)xr[j];
        s = fm_block_sum(s, sh);
        const T shift = (T)(s / (double)K);
        double sd = 0.0, sdd = 0.0;
        for (long long j = threadIdx.x; j < K; j += blockDim.x) {
            T d = xr[j] - shift;
            sd += (double)d;
            sdd += (double)(d * d);
        }
        sd = fm_block_sum(sd, sh);
        sdd = fm_block_sum(sdd, sh);
        const double dm = sd / (double)K;
        var = fmax(sdd / (double)K - dm * dm, 0.0);
        mu = (double)shift + dm;
    }
    const double inv = 1.0 / sqrt(var + eps);
    if (threadIdx.x == 0) {
        if (!rms) mean[r] = (T)mu;
        rstd[r] = (T)inv;
    }
    const T tm = (T)mu;
    const T tl = (T)(mu - (double)tm);
    const T ti = (T)inv;
    for (long long j = threadIdx.x; j < K; j += blockDim.x) {
        T v = (xr[j] - tm - tl) * ti;
        if (w) v = v * w[j];
        if (b) v = v + b[j];
        yr[j] = v;
    }
}
"""

# its input gradient: one block per row
_ROW_NORM_BWD = _BLOCK + r"""
extern "C" __global__ void fm_row_norm_bwd(const T* __restrict__ g, long long sg,
        const T* __restrict__ x, long long sx, const T* __restrict__ w,
        const T* __restrict__ mean, const T* __restrict__ rstd, T* __restrict__ gx,
        long long K, int rms) {
    __shared__ double sh[33];
    const long long r = blockIdx.x;
    const T* gr = g + r * sg;
    const T* xr = x + r * sx;
    const double mu = rms ? 0.0 : (double)mean[r];
    const double inv = (double)rstd[r];
    double A = 0.0, Bs = 0.0;
    for (long long j = threadIdx.x; j < K; j += blockDim.x) {
        double gh = (double)gr[j];
        if (w) gh *= (double)w[j];
        A += gh;
        Bs += gh * ((double)xr[j] - mu);
    }
    A = fm_block_sum(A, sh);
    Bs = fm_block_sum(Bs, sh) * inv;
    const double ka = rms ? 0.0 : -inv * A / (double)K;
    const double kb = -inv * inv * Bs / (double)K;
    const T ti = (T)inv, tka = (T)ka, tkb = (T)kb, tmu = (T)mu;
    T* o = gx + r * K;
    for (long long j = threadIdx.x; j < K; j += blockDim.x) {
        T k1 = w ? gr[j] * w[j] : gr[j];
        o[j] = k1 * ti + tka + (xr[j] - tmu) * tkb;
    }
}
"""

# the weight and bias gradients: column sums over row chunks, float64 atomics into acc (2, K)
_ROW_NORM_WB = r"""
extern "C" __global__ void fm_row_norm_wb(const T* __restrict__ g, long long sg,
        const T* __restrict__ x, long long sx, const T* __restrict__ mean,
        const T* __restrict__ rstd, double* __restrict__ acc, long long M, long long K,
        int rms, int chunk) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= K) return;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = r0 + chunk < M ? r0 + chunk : M;
    double sw = 0.0, sb = 0.0;
    for (long long r = r0; r < r1; ++r) {
        const double gv = (double)g[r * sg + j];
        const double mu = rms ? 0.0 : (double)mean[r];
        sw += gv * ((double)x[r * sx + j] - mu) * (double)rstd[r];
        sb += gv;
    }
    atomicAdd(acc + j, sw);
    atomicAdd(acc + K + j, sb);
}
"""

# the same two sums in one launch, deterministic, straight into gw and gb (each optional): as
# fm_colsum1 below (32 columns x 8 row lanes a block, per-chunk float64 partials, the last
# block of a column tile adding them in chunk order)
_ROW_NORM_WB1 = r"""
extern "C" __global__ void fm_row_norm_wb1(const T* __restrict__ g, long long sg,
        const T* __restrict__ x, long long sx, const T* __restrict__ mean,
        const T* __restrict__ rstd, double* ws, unsigned int* cnt, T* __restrict__ gw,
        T* __restrict__ gb, long long M, long long K, int rms, long long chunk) {
    __shared__ double sh[2][8][33];
    __shared__ int last;
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const long long j = (long long)blockIdx.x * 32 + tx;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = r0 + chunk < M ? r0 + chunk : M;
    double sw = 0.0, sb = 0.0;
    if (j < K)
        for (long long r = r0 + ty; r < r1; r += 8) {
            const double gv = (double)g[r * sg + j];
            const double mu = rms ? 0.0 : (double)mean[r];
            sw += gv * ((double)x[r * sx + j] - mu) * (double)rstd[r];
            sb += gv;
        }
    sh[0][ty][tx] = sw;
    sh[1][ty][tx] = sb;
    __syncthreads();
    if (ty == 0 && j < K) {
        double a = 0.0, b = 0.0;
        for (int q = 0; q < 8; ++q) {
            a += sh[0][q][tx];
            b += sh[1][q][tx];
        }
        if (gridDim.y == 1) {
            if (gw) gw[j] = (T)a;
            if (gb) gb[j] = (T)b;
        } else {
            ws[(2LL * blockIdx.y) * K + j] = a;
            ws[(2LL * blockIdx.y + 1) * K + j] = b;
        }
    }
    if (gridDim.y == 1) return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(cnt + blockIdx.x, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    if (ty == 0 && j < K) {
        double a = 0.0, b = 0.0;
        for (unsigned int q = 0; q < gridDim.y; ++q) {
            a += ((volatile double*)ws)[(2LL * q) * K + j];
            b += ((volatile double*)ws)[(2LL * q + 1) * K + j];
        }
        if (gw) gw[j] = (T)a;
        if (gb) gb[j] = (T)b;
    }
    if (threadIdx.x == 0) cnt[blockIdx.x] = 0;
}
"""

# sums over the leading dims of a contiguous (M, K) array into float64 acc (K,)
_COLSUM = r"""
extern "C" __global__ void fm_colsum(const T* __restrict__ x, double* __restrict__ acc,
        long long M, long long K, int chunk) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= K) return;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = r0 + chunk < M ? r0 + chunk : M;
    double s = 0.0;
    for (long long r = r0; r < r1; ++r) s += (double)x[r * K + j];
    atomicAdd(acc + j, s);
}
"""

# the same sums in one launch, deterministic, straight into the output: a block is 32 columns x
# 8 row lanes over one chunk of rows (float64); with several chunks each block leaves its
# partial in ws and the last block of a column tile to finish (a counter per tile, left at
# zero again) adds the partials in chunk order and writes out = (T)(sum / div)
_COLSUM1 = r"""
extern "C" __global__ void fm_colsum1(const T* __restrict__ x, double* ws, unsigned int* cnt,
        T* __restrict__ out, long long M, long long K, long long chunk, double div) {
    __shared__ double sh[8][33];
    __shared__ int last;
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const long long j = (long long)blockIdx.x * 32 + tx;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = r0 + chunk < M ? r0 + chunk : M;
    double s = 0.0;
    if (j < K)
        for (long long r = r0 + ty; r < r1; r += 8) s += (double)x[r * K + j];
    sh[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && j < K) {
        double t = 0.0;
        for (int q = 0; q < 8; ++q) t += sh[q][tx];
        if (gridDim.y == 1) out[j] = (T)(t / div);
        else ws[(long long)blockIdx.y * K + j] = t;
    }
    if (gridDim.y == 1) return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(cnt + blockIdx.x, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    if (ty == 0 && j < K) {
        double t = 0.0;
        for (unsigned int q = 0; q < gridDim.y; ++q) t += ((volatile double*)ws)[q * K + j];
        out[j] = (T)(t / div);
    }
    if (threadIdx.x == 0) cnt[blockIdx.x] = 0;
}
"""

# the float64 sums of fm_colsum / fm_row_norm_wb (rows of K in acc) divided by div and cast
# into up to two outputs of the kernels' type (each optional): one launch where a view, a row
# read and a cast write per output were three array calls
_ACC_OUT = r"""
extern "C" __global__ void fm_acc_out(const double* __restrict__ acc, T* __restrict__ o0,
        T* __restrict__ o1, long long K, double div) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= K) return;
    if (o0) o0[j] = (T)(acc[j] / div);
    if (o1) o1[j] = (T)(acc[K + j] / div);
}
"""

# the start of fm_xent_fwd and fm_xent_bwd (one block per row of the contiguous (n, c) x): the
# row's target (0 where it is ignore; an out-of-range one sets *err and reads 0) and the row's
# max (0 when not finite, so that exp(v - m) stays finite)
_XENT_ROW = _BLOCK + r"""
__device__ __forceinline__ long long fm_xent_target(long long t, long long c, long long ignore,
        int* err) {
    if (t == ignore) return 0;
    if (t < 0 || t >= c) {
        if (threadIdx.x == 0) atomicExch(err, 1);
        return 0;
    }
    return t;
}
__device__ __forceinline__ double fm_xent_row_max(const T* xr, long long c, double* sh) {
    double m = FM_NEG_INF;
    for (long long j = threadIdx.x; j < c; j += blockDim.x) m = fmax(m, (double)xr[j]);
    m = fm_block_max(m, sh);
    return isfinite(m) ? m : 0.0;
}
"""

# cross entropy, forward: one block per row of the contiguous (n, c) x
_XENT_FWD = _XENT_ROW + r"""
extern "C" __global__ void fm_xent_fwd(const T* __restrict__ x, const long long* __restrict__ tg,
        const T* __restrict__ w, long long c, long long ignore, double s,
        T* __restrict__ loss, T* __restrict__ wt, int* __restrict__ err) {
    __shared__ double sh[33];
    const long long r = blockIdx.x;
    const T* xr = x + r * c;
    const bool kept = tg[r] != ignore;
    const long long t = fm_xent_target(tg[r], c, ignore, err);
    const double m = fm_xent_row_max(xr, c, sh);
    double se = 0.0, vs = 0.0, ws = 0.0;
    for (long long j = threadIdx.x; j < c; j += blockDim.x) {
        const double v = (double)xr[j];
        se += exp(v - m);
        if (s != 0.0) {
            vs += w ? v * (double)w[j] : v;
            if (w) ws += (double)w[j];
        }
    }
    se = fm_block_sum(se, sh);
    if (s != 0.0) {
        vs = fm_block_sum(vs, sh);
        if (w) ws = fm_block_sum(ws, sh);
    }
    if (threadIdx.x == 0) {
        const double lse = m + log(se);
        const double wti = w ? (double)w[t] : 1.0;
        double out = (1.0 - s) * wti * (lse - (double)xr[t]);
        if (s != 0.0) out += (s / (double)c) * ((w ? ws : (double)c) * lse - vs);
        loss[r] = kept ? (T)out : (T)0;
        wt[r] = kept ? (T)wti : (T)0;
    }
}
"""

# cross entropy, gradient: one block per row
_XENT_BWD = _XENT_ROW + r"""
extern "C" __global__ void fm_xent_bwd(const T* __restrict__ x, const long long* __restrict__ tg,
        const T* __restrict__ w, long long c, long long ignore, double s,
        const T* __restrict__ g, long long gs, double scale, T* __restrict__ gx,
        int* __restrict__ err) {
    __shared__ double sh[33];
    const long long r = blockIdx.x;
    const T* xr = x + r * c;
    const bool kept = tg[r] != ignore;
    const long long t = fm_xent_target(tg[r], c, ignore, err);
    const double m = fm_xent_row_max(xr, c, sh);
    double se = 0.0, ws = 0.0;
    for (long long j = threadIdx.x; j < c; j += blockDim.x) {
        se += exp((double)xr[j] - m);
        if (w) ws += (double)w[j];
    }
    se = fm_block_sum(se, sh);
    if (w) ws = fm_block_sum(ws, sh);
    const double lse = m + log(se);
    const double a = kept ? (double)(T)((double)g[r * gs] * scale) : 0.0;
    const double wti = w ? (double)w[t] : 1.0;
    const double bigw = w ? ws : (double)c;
    const double k = a * ((1.0 - s) * wti + (s / (double)c) * bigw);
    const double sc = a * (s / (double)c);
    T* o = gx + r * c;
    for (long long j = threadIdx.x; j < c; j += blockDim.x) {
        double v = k * exp((double)xr[j] - lse) - sc * (w ? (double)w[j] : 1.0);
        if (j == t) v -= a * (1.0 - s) * wti;
        o[j] = (T)v;
    }
}
"""

# cross entropy's mean, one block each (no host read): the loss (sum(lw[0]) / sum(lw[1]) of the
# per-row losses and weights fm_xent_fwd wrote) and the gradient's scale (g / the kept rows'
# summed weights; NaN when none is kept), both sums in double
_XENT_MEAN = _BLOCK + r"""
extern "C" __global__ void fm_xent_mean(const T* __restrict__ lw, long long n,
        T* __restrict__ out) {
    __shared__ double sh[33];
    double a = 0.0, b = 0.0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        a += (double)lw[j];
        b += (double)lw[n + j];
    }
    a = fm_block_sum(a, sh);
    b = fm_block_sum(b, sh);
    if (threadIdx.x == 0) out[0] = (T)(a / b);
}
extern "C" __global__ void fm_xent_gscale(const long long* __restrict__ tg,
        const T* __restrict__ w, long long n, long long c, long long ignore,
        const T* __restrict__ g, T* __restrict__ out) {
    __shared__ double sh[33];
    double d = 0.0;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        long long t = tg[j];
        if (t != ignore) {
            t = t < 0 ? 0 : (t >= c ? c - 1 : t);
            d += w ? (double)w[t] : 1.0;
        }
    }
    d = fm_block_sum(d, sh);
    if (threadIdx.x == 0) {
        const T den = (T)d;
        out[0] = den != (T)0 ? g[0] * ((T)1 / den)
                             : (T)__longlong_as_double(0x7ff8000000000000ULL);
    }
}
"""

# + - * / of same-size contiguous float32 arrays, 4 elements a thread (float4 when aligned)
_BIN4 = r"""
template <int OP> __device__ __forceinline__ float fm_op(float a, float b) {
    if (OP == 0) return a + b;
    if (OP == 1) return a - b;
    if (OP == 2) return a * b;
    return a / b;
}
template <int OP> __device__ void fm_bin4(const float* __restrict__ a,
        const float* __restrict__ b, float* __restrict__ o, long long n, int vec) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long n4 = n >> 2;
    if (vec) {
        const float4* a4 = (const float4*)a;
        const float4* b4 = (const float4*)b;
        float4* o4 = (float4*)o;
        for (long long k = i; k < n4; k += stride) {
            const float4 x = a4[k], y = b4[k];
            o4[k] = make_float4(fm_op<OP>(x.x, y.x), fm_op<OP>(x.y, y.y),
                                fm_op<OP>(x.z, y.z), fm_op<OP>(x.w, y.w));
        }
        for (long long k = (n4 << 2) + i; k < n; k += stride) o[k] = fm_op<OP>(a[k], b[k]);
    } else {
        for (long long k = i; k < n; k += stride) o[k] = fm_op<OP>(a[k], b[k]);
    }
}
extern "C" __global__ void fm_bin4_add(const float* a, const float* b, float* o, long long n,
        int vec) { fm_bin4<0>(a, b, o, n, vec); }
extern "C" __global__ void fm_bin4_sub(const float* a, const float* b, float* o, long long n,
        int vec) { fm_bin4<1>(a, b, o, n, vec); }
extern "C" __global__ void fm_bin4_mul(const float* a, const float* b, float* o, long long n,
        int vec) { fm_bin4<2>(a, b, o, n, vec); }
extern "C" __global__ void fm_bin4_div(const float* a, const float* b, float* o, long long n,
        int vec) { fm_bin4<3>(a, b, o, n, vec); }
// one operand a number s: a op s (left == 0) or s op a (left == 1)
template <int OP> __device__ void fm_bin4s(const float* __restrict__ a, float s,
        float* __restrict__ o, long long n, int vec, int left) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long n4 = n >> 2;
    if (vec) {
        const float4* a4 = (const float4*)a;
        float4* o4 = (float4*)o;
        if (left) {
            for (long long k = i; k < n4; k += stride) {
                const float4 x = a4[k];
                o4[k] = make_float4(fm_op<OP>(s, x.x), fm_op<OP>(s, x.y), fm_op<OP>(s, x.z),
                                    fm_op<OP>(s, x.w));
            }
        } else {
            for (long long k = i; k < n4; k += stride) {
                const float4 x = a4[k];
                o4[k] = make_float4(fm_op<OP>(x.x, s), fm_op<OP>(x.y, s), fm_op<OP>(x.z, s),
                                    fm_op<OP>(x.w, s));
            }
        }
        i += n4 << 2;
    }
    for (long long k = i; k < n; k += stride) o[k] = left ? fm_op<OP>(s, a[k]) : fm_op<OP>(a[k], s);
}
extern "C" __global__ void fm_bin4s_add(const float* a, float s, float* o, long long n, int vec,
        int left) { fm_bin4s<0>(a, s, o, n, vec, left); }
extern "C" __global__ void fm_bin4s_sub(const float* a, float s, float* o, long long n, int vec,
        int left) { fm_bin4s<1>(a, s, o, n, vec, left); }
extern "C" __global__ void fm_bin4s_mul(const float* a, float s, float* o, long long n, int vec,
        int left) { fm_bin4s<2>(a, s, o, n, vec, left); }
extern "C" __global__ void fm_bin4s_div(const float* a, float s, float* o, long long n, int vec,
        int left) { fm_bin4s<3>(a, s, o, n, vec, left); }
"""

# batch norm: per-channel statistics (one block a channel, float64 sums; thread 0 then writes
# mean/invstd, the running statistics and the affine factors), then one elementwise pass
_BN_SRC = r"""
extern "C" __global__ void fm_bn_stats@S(const @X* __restrict__ x, long long N, long long S,
        long long s0, long long s1, long long s2, const T* __restrict__ w,
        const T* __restrict__ b, T* __restrict__ mean, T* __restrict__ invstd,
        T* __restrict__ rm, long long srm, T* __restrict__ rv, long long srv,
        T* __restrict__ ab, long long C, int training, double momentum, double eps) {
    __shared__ double sh[33];
    const long long c = blockIdx.x;
    const long long m = N * S;
    double mu, var;
    if (training) {
        double s = 0.0;
        for (long long i = threadIdx.x; i < m; i += blockDim.x)
            s += (double)@LD(x[(i / S) * s0 + c * s1 + (i % S) * s2]);
        s = fm_block_sum(s, sh);
        const double mu0 = s / (double)m;
        const T tmu = (T)mu0;
        double sd = 0.0, sdd = 0.0;
        for (long long i = threadIdx.x; i < m; i += blockDim.x) {
            const T d = @LD(x[(i / S) * s0 + c * s1 + (i % S) * s2]) - tmu;
            sd += (double)d;
            sdd += (double)(d * d);
        }
        sd = fm_block_sum(sd, sh);
        sdd = fm_block_sum(sdd, sh);
        const double dm = sd / (double)m;
        var = fmax(sdd / (double)m - dm * dm, 0.0);
        mu = mu0 + dm;
    } else {
        mu = (double)rm[c * srm];
        var = (double)rv[c * srv];
    }
    if (threadIdx.x != 0) return;
    const double inv = 1.0 / sqrt(var + eps);
    if (training) {
        if (rm) rm[c * srm] = (T)((1.0 - momentum) * (double)rm[c * srm] + momentum * mu);
        if (rv) {
            const double ub = m > 1 ? var * ((double)m / (double)(m - 1))
                                    : __longlong_as_double(0x7ff0000000000000ULL);
            rv[c * srv] = (T)((1.0 - momentum) * (double)rv[c * srv] + momentum * ub);
        }
    }
    mean[c] = (T)mu;
    invstd[c] = (T)inv;
    const double a = inv * (w ? (double)w[c] : 1.0);
    ab[c] = (T)a;
    ab[C + c] = (T)((b ? (double)b[c] : 0.0) - mu * a);
}

extern "C" __global__ void fm_bn_apply@S(const @X* __restrict__ x, long long C, long long S,
        long long s0, long long s1, long long s2, const T* __restrict__ ab,
        @X* __restrict__ y, long long total) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        const long long sp = i % S, t = i / S, c = t % C, n = t / C;
        y[i] = @ST(@LD(x[n * s0 + c * s1 + sp * s2]) * ab[c] + ab[C + c]);
    }
}

extern "C" __global__ void fm_bn_grad_stats@S(const @X* __restrict__ g, long long g0,
        long long g1, long long g2, const @X* __restrict__ x, long long s0, long long s1,
        long long s2, long long N, long long S, const T* __restrict__ w,
        const T* __restrict__ mean, const T* __restrict__ invstd, T* __restrict__ gw,
        T* __restrict__ gb, T* __restrict__ k, long long C, int training) {
    __shared__ double sh[33];
    const long long c = blockIdx.x;
    const long long m = N * S;
    const double mu = (double)mean[c];
    double sg = 0.0, sgx = 0.0;
    for (long long i = threadIdx.x; i < m; i += blockDim.x) {
        const long long n = i / S, sp = i % S;
        const double gv = (double)@LD(g[n * g0 + c * g1 + sp * g2]);
        sg += gv;
        sgx += gv * ((double)@LD(x[n * s0 + c * s1 + sp * s2]) - mu);
    }
    sg = fm_block_sum(sg, sh);
    sgx = fm_block_sum(sgx, sh);
    if (threadIdx.x != 0) return;
    const double inv = (double)invstd[c];
    const double wd = w ? (double)w[c] : 1.0;
    if (gb) gb[c] = (T)sg;
    if (gw) gw[c] = (T)(sgx * inv);
    k[c] = (T)(wd * inv);
    const bool tr = training && m > 0;
    k[C + c] = (T)(tr ? -wd * inv * inv * inv * sgx / (double)m : 0.0);
    k[2 * C + c] = (T)(tr ? -wd * inv * sg / (double)m : 0.0);
}

extern "C" __global__ void fm_bn_grad_apply@S(const @X* __restrict__ g, long long g0,
        long long g1, long long g2, const @X* __restrict__ x, long long s0, long long s1,
        long long s2, long long C, long long S, const T* __restrict__ mean,
        const T* __restrict__ k, @X* __restrict__ gx, long long total) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        const long long sp = i % S, t = i / S, c = t % C, n = t / C;
        const T d = @LD(x[n * s0 + c * s1 + sp * s2]) - mean[c];
        gx[i] = @ST(@LD(g[n * g0 + c * g1 + sp * g2]) * k[c] + d * k[C + c] +
                   k[2 * C + c]);
    }
}
"""


def bn_source(sfx="", X="T", ld="", st=""):
    """The batch-norm kernels (fm_bn_stats, fm_bn_apply, fm_bn_grad_stats, fm_bn_grad_apply,
    each name + ``sfx``) with the activations (x, y, g, gx) of type ``X``, read through
    ``ld(...)`` and written through ``st(...)`` (identities for T; cuda_lowp.py widens 16-bit
    loads and rounds the stores), weights and statistics of type T."""
    return _BN_SRC.replace("@ST", st).replace("@LD", ld).replace("@X", X).replace("@S", sfx)


_BN = _BLOCK + bn_source()

# softmax / log-softmax over the last dim of contiguous rows: one block a row
_SOFTMAX = _BLOCK + r"""
extern "C" __global__ void fm_softmax(const T* __restrict__ x, T* __restrict__ y,
        long long ncol, int lg) {
    __shared__ double sh[33];
    const long long r = blockIdx.x;
    const T* xr = x + r * ncol;
    T* yr = y + r * ncol;
    double m = FM_NEG_INF;
    for (long long j = threadIdx.x; j < ncol; j += blockDim.x) m = fmax(m, (double)xr[j]);
    m = fm_block_max(m, sh);
    double has_nan = 0.0;
    for (long long j = threadIdx.x; j < ncol; j += blockDim.x)
        if (xr[j] != xr[j]) has_nan = 1.0;
    // the row's max is NaN with a NaN in it (every output NaN); an all -inf row shifts by 0
    if (fm_block_sum(has_nan, sh) > 0.0) m = __longlong_as_double(0x7ff8000000000000ULL);
    else if (m == FM_NEG_INF) m = 0.0;
    const T tm = (T)m;
    double s = 0.0;
    for (long long j = threadIdx.x; j < ncol; j += blockDim.x) s += exp((double)(xr[j] - tm));
    s = fm_block_sum(s, sh);
    if (lg) {
        const T ls = (T)log(s);
        for (long long j = threadIdx.x; j < ncol; j += blockDim.x) yr[j] = (xr[j] - tm) - ls;
    } else {
        const T ts = (T)s;
        for (long long j = threadIdx.x; j < ncol; j += blockDim.x)
            yr[j] = (T)exp((double)(xr[j] - tm)) / ts;
    }
}
"""

# max pooling with fixed windows (padded to 3 dims): one thread an output; the first maximum
# of the window in tap order, a NaN winning (the last one); an empty window reports its clamped
# start (csrc/pool.c's conventions)
# where(cond, x, number) / where(cond, number, x) of contiguous operands as a bit move (the
# number's bits in the element type; flip: the number is the True branch), one pass
_WHERE_S = r"""
template <typename U> __device__ void fm_where_s(const unsigned char* __restrict__ c,
        const U* __restrict__ x, U s, U* __restrict__ o, long long n, int flip) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        o[i] = ((c[i] != 0) != (flip != 0)) ? x[i] : s;
}
extern "C" __global__ void fm_where_s16(const unsigned char* c, const unsigned short* x,
        unsigned short s, unsigned short* o, long long n, int flip) {
    fm_where_s(c, x, s, o, n, flip);
}
extern "C" __global__ void fm_where_s32(const unsigned char* c, const unsigned int* x,
        unsigned int s, unsigned int* o, long long n, int flip) {
    fm_where_s(c, x, s, o, n, flip);
}
extern "C" __global__ void fm_where_s64(const unsigned char* c, const unsigned long long* x,
        unsigned long long s, unsigned long long* o, long long n, int flip) {
    fm_where_s(c, x, s, o, n, flip);
}
"""

# tensor <op> number (or number <op> tensor) into a bool result, for contiguous float32,
# float64 and bfloat16 operands: one pass, compared in double (exact for all three)
_CMP_S = r"""
__device__ __forceinline__ double fm_cmp_val(float v) { return (double)v; }
__device__ __forceinline__ double fm_cmp_val(double v) { return v; }
__device__ __forceinline__ double fm_cmp_val(unsigned short h) {
    union { unsigned int u; float f; } c;
    c.u = (unsigned int)h << 16;
    return (double)c.f;
}
template <typename X> __device__ void fm_cmp_s(const X* __restrict__ x, double s,
        unsigned char* __restrict__ o, long long n, int op, int left) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double v = fm_cmp_val(x[i]);
        const double a = left ? s : v, b = left ? v : s;
        bool r;
        switch (op) {
            case 0: r = a == b; break;
            case 1: r = a != b; break;
            case 2: r = a < b; break;
            case 3: r = a <= b; break;
            case 4: r = a > b; break;
            default: r = a >= b;
        }
        o[i] = r ? 1 : 0;
    }
}
extern "C" __global__ void fm_cmp_s_bf16(const unsigned short* x, double s, unsigned char* o,
        long long n, int op, int left) {
    fm_cmp_s(x, s, o, n, op, left);
}
extern "C" __global__ void fm_cmp_s_f32(const float* x, double s, unsigned char* o,
        long long n, int op, int left) {
    fm_cmp_s(x, s, o, n, op, left);
}
extern "C" __global__ void fm_cmp_s_f64(const double* x, double s, unsigned char* o,
        long long n, int op, int left) {
    fm_cmp_s(x, s, o, n, op, left);
}
"""

# a max-pool window's first in-range input position along one dimension (output o, stride s,
# padding p, dilation d, input size m): fm_maxpool's and cuda_lowp's fm_maxpool_lp's first index
_POOL_START = r"""
__device__ __forceinline__ long long fm_pool_start(long long o, int s, int p, int d, int m) {
    long long b = o * s - p;
    long long j0 = b < 0 ? (-b + d - 1) / d : 0;
    long long st = b + j0 * d;
    long long hi = m - 1 > 0 ? m - 1 : 0;
    return st < 0 ? 0 : (st > hi ? hi : st);
}
"""

_MAXPOOL = r"""
#define FM_NEG_INF_T ((T)(-__longlong_as_double(0x7ff0000000000000ULL)))
""" + _POOL_START + r"""
extern "C" __global__ void fm_maxpool(const T* __restrict__ x, T* __restrict__ out,
        long long* __restrict__ idx, long long total, int D, int H, int W, int oD, int oH,
        int oW, int k0, int k1, int k2, int s0, int s1, int s2, int p0, int p1, int p2, int d0,
        int d1, int d2) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        long long t = i;
        const long long ow = t % oW; t /= oW;
        const long long oh = t % oH; t /= oH;
        const long long od = t % oD; t /= oD;
        const T* xp = x + t * (long long)D * H * W;
        long long bi = (fm_pool_start(od, s0, p0, d0, D) * H + fm_pool_start(oh, s1, p1, d1, H))
                       * W + fm_pool_start(ow, s2, p2, d2, W);
        T best = FM_NEG_INF_T;
        for (int a = 0; a < k0; ++a) {
            const long long iz = od * s0 - p0 + (long long)a * d0;
            for (int b = 0; b < k1; ++b) {
                const long long iy = oh * s1 - p1 + (long long)b * d1;
                for (int c = 0; c < k2; ++c) {
                    const long long ix = ow * s2 - p2 + (long long)c * d2;
                    if (iz < 0 || iz >= D || iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                    const long long f = (iz * H + iy) * W + ix;
                    const T v = xp[f];
                    if (v > best || v != v) { best = v; bi = f; }
                }
            }
        }
        out[i] = best;
        if (idx) idx[i] = bi;
    }
}
"""

# attention (no mask or the causal one, no dropout): the scores' row work between cuBLAS's
# products. Forward: scale, mask, softmax in place and the rows' log-sum-exp; backward: the
# probabilities again from the log-sum-exp (in place of the scores) and ds = p (dp - sum p dp)
# in place of dp
_ATTN = _BLOCK + r"""
#define FM_INF_T ((T)__longlong_as_double(0x7ff0000000000000ULL))
extern "C" __global__ void fm_attn_fwd_rows(T* __restrict__ sc, T* __restrict__ lse,
        long long L, long long S, double scale, int causal) {
    __shared__ double sh[33];
    const long long r = blockIdx.x;
    const long long l = r % L;
    T* row = sc + r * S;
    const T tsc = (T)scale;
    const long long lim = causal ? (l + 1 < S ? l + 1 : S) : S;
    double m = FM_NEG_INF, has_nan = 0.0;
    for (long long j = threadIdx.x; j < S; j += blockDim.x) {
        T v = row[j] * tsc;
        if (j >= lim) v = -FM_INF_T;
        row[j] = v;
        if (v != v) has_nan = 1.0;
        else m = fmax(m, (double)v);
    }
    m = fm_block_max(m, sh);
    has_nan = fm_block_sum(has_nan, sh);
    const bool dead = has_nan == 0.0 && m == FM_NEG_INF;
    const T tm = has_nan > 0.0 ? (T)__longlong_as_double(0x7ff8000000000000ULL)
                               : (dead ? (T)0 : (T)m);
    double s = 0.0;
    for (long long j = threadIdx.x; j < S; j += blockDim.x) s += exp((double)(row[j] - tm));
    s = fm_block_sum(s, sh);
    const T ts = (T)s;
    const T den = dead ? (T)1 : ts;
    for (long long j = threadIdx.x; j < S; j += blockDim.x)
        row[j] = (T)exp((double)(row[j] - tm)) / den;
    if (threadIdx.x == 0) lse[r] = dead ? -FM_INF_T : tm + (T)log((double)ts);
}

extern "C" __global__ void fm_attn_bwd_rows(T* __restrict__ sc, T* __restrict__ dp,
        const T* __restrict__ lse, long long L, long long S, double scale, int causal,
        int has_dp) {
    __shared__ double sh[33];
    const long long r = blockIdx.x;
    const long long l = r % L;
    T* row = sc + r * S;
    const T tsc = (T)scale;
    const long long lim = causal ? (l + 1 < S ? l + 1 : S) : S;
    const T tl = lse[r];
    const bool dead = tl == -FM_INF_T;
    const T ls0 = dead ? (T)0 : tl;
    double acc = 0.0;
    for (long long j = threadIdx.x; j < S; j += blockDim.x) {
        T v = row[j] * tsc;
        if (j >= lim) v = -FM_INF_T;
        const T p = dead ? (T)0 : (T)exp((double)(v - ls0));
        row[j] = p;
        if (has_dp) acc += (double)(p * dp[r * S + j]);
    }
    if (!has_dp) return;
    const T rs = (T)fm_block_sum(acc, sh);
    for (long long j = threadIdx.x; j < S; j += blockDim.x)
        dp[r * S + j] = row[j] * (dp[r * S + j] - rs);
}
"""

# Philox4x32-10 blocks first .. first + n - 1 (philox.philox_words' arithmetic): 4 words a block
_PHILOX = r"""
extern "C" __global__ void fm_philox(unsigned int* __restrict__ out, unsigned long long first,
        long long n, unsigned int key0, unsigned int key1) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < n; b += stride) {
        const unsigned long long ctr = first + (unsigned long long)b;
        unsigned int x0 = (unsigned int)ctr, x1 = (unsigned int)(ctr >> 32), x2 = 0u, x3 = 0u;
        unsigned int k0 = key0, k1 = key1;
        for (int r = 0; r < 10; ++r) {
            const unsigned long long p0 = (unsigned long long)x0 * 0xD2511F53ULL;
            const unsigned long long p1 = (unsigned long long)x2 * 0xCD9E8D57ULL;
            const unsigned int y0 = (unsigned int)(p1 >> 32) ^ x1 ^ k0;
            const unsigned int y2 = (unsigned int)(p0 >> 32) ^ x3 ^ k1;
            x1 = (unsigned int)p1;
            x3 = (unsigned int)p0;
            x0 = y0;
            x2 = y2;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        out[4 * b] = x0;
        out[4 * b + 1] = x1;
        out[4 * b + 2] = x2;
        out[4 * b + 3] = x3;
    }
}
"""

# convolution's im2col / col2im for 2 spatial dims: x (n, c, H, W) <-> cols (n, c, kh kw, oh, ow)
_IM2COL = r"""
extern "C" __global__ void fm_im2col(const T* __restrict__ x, T* __restrict__ cols,
        long long total, int C, int H, int W, int kh, int kw, int oh, int ow, int sh, int sw,
        int ph, int pw, int dh, int dw) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        long long t = i;
        const int ox = (int)(t % ow); t /= ow;
        const int oy = (int)(t % oh); t /= oh;
        const int kx = (int)(t % kw); t /= kw;
        const int ky = (int)(t % kh); t /= kh;
        const long long plane = t;  // b * C + ch
        const int iy = oy * sh - ph + ky * dh;
        const int ix = ox * sw - pw + kx * dw;
        cols[i] = (iy >= 0 && iy < H && ix >= 0 && ix < W)
            ? x[(plane * H + iy) * W + ix] : (T)0;
    }
}
"""

# the adjoint: every input pixel gathers the taps that read it, in tap order (deterministic)
_COL2IM = r"""
extern "C" __global__ void fm_col2im(const T* __restrict__ cols, T* __restrict__ x,
        long long total, int C, int H, int W, int kh, int kw, int oh, int ow, int sh, int sw,
        int ph, int pw, int dh, int dw) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += stride) {
        long long t = i;
        const int ix = (int)(t % W); t /= W;
        const int iy = (int)(t % H); t /= H;
        const long long plane = t;
        const T* cp = cols + plane * (long long)kh * kw * oh * ow;
        T acc = (T)0;
        for (int ky = 0; ky < kh; ++ky) {
            const int yy = iy + ph - ky * dh;
            if (yy < 0 || yy % sh) continue;
            const int oy = yy / sh;
            if (oy >= oh) continue;
            for (int kx = 0; kx < kw; ++kx) {
                const int xx = ix + pw - kx * dw;
                if (xx < 0 || xx % sw) continue;
                const int ox = xx / sw;
                if (ox >= ow) continue;
                acc += cp[(((long long)ky * kw + kx) * oh + oy) * ow + ox];
            }
        }
        x[i] = acc;
    }
}
"""

_BIN_NAMES = {K.BIN_ADD: "fm_bin4_add", K.BIN_SUB: "fm_bin4_sub", K.BIN_MUL: "fm_bin4_mul",
              K.BIN_DIV: "fm_bin4_div"}
_BIN4S_NAMES = {v: v.replace("fm_bin4_", "fm_bin4s_") for v in _BIN_NAMES.values()}

# elementwise bodies (CuPy ElementwiseKernel): T is the tensor's dtype
_GELU_FWD = """
if (x > hi) { y = x; }
else if (x < lo) { y = (T)(-0.0); }
else if (f32) {  // float32: float arithmetic, as PyTorch's kernel (double is slow on GPUs)
    const float v = (float)x;
    float p;
    if (approx) {
        const float u = (float)TK * v * (1.0f + (float)TC * v * v);
        const float e = expf(-2.0f * fabsf(u));
        const float s = 1.0f / (1.0f + e);
        p = u >= 0.0f ? 2.0f * s : 2.0f * e * s;
    } else {
        p = erfcf(-v * (float)IS2);
    }
    y = (T)(0.5f * v * p);
}
else {
    const double v = (double)x;
    double p;
    if (approx) {
        const double u = TK * v * (1.0 + TC * v * v);
        double m = -2.0 * fabs(u);
        if (f32 && m < -110.0) m = -110.0;
        const double e = exp(m);
        const double s = 1.0 / (1.0 + e);
        p = u >= 0.0 ? 2.0 * s : 2.0 * e * s;
    } else {
        p = erfc(-v * IS2);
    }
    y = (T)0.5 * x * (T)p;
}
"""

_GELU_BWD = """
T d;
if (x > hi) { d = (T)1; }
else if (x < lo) { d = (T)0; }
else if (f32) {
    const float v = (float)x;
    float dd;
    if (approx) {
        const float u = (float)TK * v * (1.0f + (float)TC * v * v);
        const float e = expf(-2.0f * fabsf(u));
        const float s = 1.0f / (1.0f + e);
        const float sech2 = 4.0f * e * s * s;
        const float p = u >= 0.0f ? 2.0f * s : 2.0f * e * s;
        dd = 0.5f * p + 0.5f * v * sech2 * (float)TK * (1.0f + 3.0f * (float)TC * v * v);
    } else {
        dd = 0.5f * erfcf(-v * (float)IS2) + v * expf(-0.5f * v * v) * (float)ISP;
    }
    d = (T)dd;
}
else {
    const double v = (double)x;
    double dd;
    if (approx) {
        const double u = TK * v * (1.0 + TC * v * v);
        double m = -2.0 * fabs(u);
        if (f32 && m < -110.0) m = -110.0;
        const double e = exp(m);
        const double s = 1.0 / (1.0 + e);
        const double sech2 = 4.0 * e * s * s;
        const double p = u >= 0.0 ? 2.0 * s : 2.0 * e * s;
        dd = 0.5 * p + 0.5 * v * sech2 * TK * (1.0 + 3.0 * TC * v * v);
    } else {
        const double p = erfc(-v * IS2);
        dd = 0.5 * p + v * exp(-0.5 * v * v) * ISP;
    }
    d = (T)dd;
}
o = g * d;
"""

_GELU_PRE = (f"#define TK {_TANH_K!r}\n#define TC {_TANH_C!r}\n#define IS2 {_INV_SQRT2!r}\n"
             f"#define ISP {_INV_SQRT_2PI!r}\n")

_ADAM = """
T gi = maximize ? -g : g;
T pi = p;
if (mode == 2) { pi = p * dec; } else if (mode == 1) { gi = gi + wd * p; }
const T mi = m + w1 * (gi - m);
T vi = v * b2 + w2 * (gi * gi);
m = mi;
v = vi;
AMS
const T denom = sqrt(vi) / bc2s + eps;
p = pi + ss * (mi / denom);
"""

# every parameter of an Adam/AdamW step in one launch: tab holds, per tensor, the addresses of
# p, g, m, v, vm (0 without amsgrad), its element count and its first block; each block updates
# one chunk of FM_CHUNK elements of one tensor (found by binary search over the first blocks)
_ADAM_MULTI = r"""
#define FM_CHUNK 2048
extern "C" __global__ void NAME(const long long* __restrict__ tab, int ntens, T w1, T b2,
        T w2, T eps, T wd, T ss, T bc2s, T dec, int maximize, int mode) {
    const long long blk = blockIdx.x;
    int lo = 0, hi = ntens - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tab[mid * 7 + 6] <= blk) { lo = mid; } else { hi = mid - 1; }
    }
    const long long* r = tab + lo * 7;
    T* P = (T*)r[0];
    const T* Gr = (const T*)r[1];
    T* Mr = (T*)r[2];
    T* Vr = (T*)r[3];
    T* VMr = (T*)r[4];
    const long long n = r[5];
    const long long start = (blk - r[6]) * FM_CHUNK;
    const long long end = start + FM_CHUNK < n ? start + FM_CHUNK : n;
    T vm_unused = (T)0;
    for (long long i = start + threadIdx.x; i < end; i += blockDim.x) {
        const T g = Gr[i];
        T& p = P[i];
        T& m = Mr[i];
        T& v = Vr[i];
        T& vm = VMr ? VMr[i] : vm_unused;
        (void)vm;
BODY
    }
}
#undef FM_CHUNK
"""
_ADAM_CHUNK = 2048

_SGD = """
T gi = maximize ? -g : g;
if (has_wd) { gi = gi + wd * p; }
MOM
p = p + nlr * gi;
"""

# SGD over many tensors in one launch: _ADAM_MULTI's table and chunking with this body (the
# same arithmetic, in the same order, as _SGD). Its arguments are renamed: w1 = momentum,
# b2 = 1 - dampening, w2 = -lr, wd = weight decay; mode's bits: 1 weight decay, 2 first step,
# 4 Nesterov, 8 momentum (then m is the momentum buffer).
_SGD_MULTI_BODY = """
        (void)v; (void)eps; (void)ss; (void)bc2s; (void)dec;
        T gi = maximize ? -g : g;
        if (mode & 1) { gi = gi + wd * p; }
        if (mode & 8) {
            const T bi = (mode & 2) ? gi : m * w1 + b2 * gi;
            m = bi;
            gi = (mode & 4) ? gi + w1 * bi : bi;
        }
        p = p + w2 * gi;
"""


_CONTIG = {}


def _contig(shape):
    """The contiguous element strides of ``shape`` (kept per shape)."""
    r = _CONTIG.get(shape) if isinstance(shape, tuple) else None
    if r is None:
        st, acc = [], 1
        for s in reversed(shape):
            st.append(acc)
            acc *= max(int(s), 1)
        r = tuple(reversed(st))
        if isinstance(shape, tuple):
            if len(_CONTIG) >= 4096:
                _CONTIG.clear()
            _CONTIG[shape] = r
    return r


def _picker(rest):
    """pick(ts): the entries of the per-parameter list ts (or None) at the indices rest."""
    def pick(ts):
        return None if ts is None else [ts[i] for i in rest]
    return pick


def _float_ct(*ts):
    """The CUDA type of the tensors' one dtype (float32/float64), else None."""
    dt = ts[0]._dtype
    if dt is not D.float32 and dt is not D.float64:
        return None
    for t in ts:
        if t is not None and t._dtype is not dt:
            return None
    return "float" if dt is D.float32 else "double"


class CudaKernelsMixin:
    """Fast paths of CupyBackend (see the module docstring). Each method tries its kernel and
    otherwise defers to the generic array-module code (the next class in the MRO)."""

    def _kernels_init(self):
        self._kern = {}
        self.fast_path_calls = {}
        # an array module without CuPy's kernel classes (the tests' stand-in) takes the
        # generic code everywhere
        self._kernels_ok = hasattr(self.xp, "RawKernel") and hasattr(self.xp, "ElementwiseKernel")

    # ---- compile once, fall back on failure -------------------------------------------------
    def _raw_kernel(self, key, src, name, ct):
        k = self._kern.get((key, name, ct))
        if k is None:
            k = self.xp.RawKernel(f"typedef {ct} T;\n" + src, name, options=_OPTS)
            self._kern[(key, name, ct)] = k
        return k

    def _ew_kernel(self, key, in_params, out_params, body, preamble=""):
        k = self._kern.get(key)
        if k is None:
            k = self.xp.ElementwiseKernel(in_params, out_params, body, "fm_" + key,
                                          preamble=preamble, options=_OPTS)
            self._kern[key] = k
        return k

    def _served(self, name, fn):
        """fn() (launches one fast path) -> True; False when the path is off, or when fn
        raised (the kernel did not build, CuPy refused an argument): the error is recorded in
        fast_path_errors, the path stays off, and the caller's generic code serves."""
        if not self._kernels_ok or name in self.fast_path_errors:
            return False
        try:
            fn()
        except MemoryError:
            raise
        except Exception as e:
            self.fast_path_errors[name] = f"{type(e).__name__}: {e}"
            return False
        self.fast_path_calls[name] = self.fast_path_calls.get(name, 0) + 1
        return True

    def _acc_out(self, ct, acc, n, o0, o1, div):
        """Outputs o0 and o1 (contiguous tensors of ``n`` elements of the kernels' type ct, or
        None) = rows 0 and 1 of the float64 (rows, n) array acc, divided by div, in one
        launch; False when the kernel is off (then the caller casts with array calls)."""

        def go():
            k = self._raw_kernel("acc_out", _ACC_OUT, "fm_acc_out", ct)
            k(((n + 255) // 256,), (256,), (acc, _ptr(o0), _ptr(o1), np.int64(n),
                                           np.float64(div)))

        return self._served("acc_out", go)

    def _threads(self, n):
        t = 32
        while t < n and t < 256:
            t *= 2
        return t

    # ---- GELU ---------------------------------------------------------------------------------
    def gelu_fwd(self, approximate, x, y):
        if _float_ct(x, y) is None or x._numel == 0:
            return super().gelu_fwd(approximate, x, y)
        n = (x._numel,)
        v, o = self.raw(x, n, (1,)), self.raw(y, n, (1,))
        t = v.dtype.type
        hi, lo = self._gelu_limits(approximate, x._dtype, False)
        appr = int(approximate == K.GELU_TANH)
        f32 = int(x._dtype is D.float32)

        def go():
            k = self._ew_kernel("gelu_fwd", "T x, T hi, T lo, int32 approx, int32 f32", "T y",
                                _GELU_FWD, _GELU_PRE)
            k(v, t(hi), t(lo), np.int32(appr), np.int32(f32), o)

        if self._served("gelu_fwd", go):
            return 0
        return super().gelu_fwd(approximate, x, y)

    def gelu_bwd(self, approximate, g, x, out):
        if _float_ct(x, g, out) is None or x._numel == 0:
            return super().gelu_bwd(approximate, g, x, out)
        n = (x._numel,)
        v, gv, o = self.raw(x, n, (1,)), self.raw(g, n, (1,)), self.raw(out, n, (1,))
        t = v.dtype.type
        hi, lo = self._gelu_limits(approximate, x._dtype, True)
        appr = int(approximate == K.GELU_TANH)
        f32 = int(x._dtype is D.float32)

        def go():
            k = self._ew_kernel("gelu_bwd", "T g, T x, T hi, T lo, int32 approx, int32 f32",
                                "T o", _GELU_BWD, _GELU_PRE)
            k(gv, v, t(hi), t(lo), np.int32(appr), np.int32(f32), o)

        if self._served("gelu_bwd", go):
            return 0
        return super().gelu_bwd(approximate, g, x, out)

    # ---- optimizer steps ----------------------------------------------------------------------
    def adam_step(self, params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, lr, beta1, beta2,
                  eps, weight_decay, flags):
        rc = self._opt_check(params, grads)
        ams = flags & K.OPT_AMSGRAD
        generic = (rc or (ams and max_sqs is None) or
                   any(p._numel and not steps[i] >= 1 for i, p in enumerate(params)) or
                   any(p._numel and (grads[i]._dtype is not p._dtype or
                                     exp_avgs[i]._dtype is not p._dtype or
                                     exp_avg_sqs[i]._dtype is not p._dtype or
                                     (ams and max_sqs[i]._dtype is not p._dtype) or
                                     grads[i]._shape != p._shape)
                       for i, p in enumerate(params)))
        if generic or "adam" in self.fast_path_errors:
            return super().adam_step(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, lr,
                                     beta1, beta2, eps, weight_decay, flags)
        key = "adam_ams" if ams else "adam"
        body = _ADAM.replace("AMS", "if (vm > vi) { vi = vm; } vm = vi;" if ams else "")
        if self._adam_multi(params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, lr, beta1,
                            beta2, eps, weight_decay, flags, body):
            return 0
        outs = "T p, T m, T v" + (", T vm" if ams else "")
        mode = 0 if weight_decay == 0 else (2 if flags & K.OPT_DECOUPLED else 1)
        maximize = np.int32(1 if flags & K.OPT_MAXIMIZE else 0)

        def launch(i, p):
            k = self._ew_kernel(key, "T g, T w1, T b2, T w2, T eps, T wd, T ss, T bc2s, T dec, "
                                "int32 maximize, int32 mode", outs, body)
            pv = self.raw(p)
            t = pv.dtype.type
            st = steps[i]
            args = [self.raw(grads[i]), t(1.0 - beta1), t(beta2), t(1.0 - beta2), t(eps),
                    t(weight_decay), t(-(lr / (1.0 - beta1 ** st))),
                    t(math.sqrt(1.0 - beta2 ** st)), t(1.0 - lr * weight_decay),
                    maximize, np.int32(mode), pv, self.raw(exp_avgs[i]),
                    self.raw(exp_avg_sqs[i])]
            if ams:
                args.append(self.raw(max_sqs[i]))
            k(*args)

        rest = self._served_each("adam", params, launch)
        if rest is None:
            return 0
        pick = _picker(rest)
        return super().adam_step(pick(params), pick(grads), pick(exp_avgs), pick(exp_avg_sqs),
                                 pick(max_sqs), pick(steps), lr, beta1, beta2, eps,
                                 weight_decay, flags)

    def _served_each(self, name, params, launch):
        """launch(i, p) for each non-empty parameter p (one fast path, name): None when it
        served them all, else the indices of those it did not reach (a launch raised: the
        generic code updates those)."""
        done = set()

        def go():
            for i, p in enumerate(params):
                if p._numel and i not in done:
                    launch(i, p)
                    done.add(i)

        if self._served(name, go):
            return None
        return [i for i in range(len(params)) if i not in done]

    def _addr(self, a):
        """The device address of array a's first element."""
        d = a.data
        return d.ptr if hasattr(d, "ptr") else a.__array_interface__["data"][0]

    def _upload_table(self, host):
        """The int64 host array as a device array for a kernel's argument table (the CuPy
        backend queues it from pinned memory without waiting; here: the array module's copy)."""
        return self.xp.asarray(host)

    def _adam_multi(self, params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps, lr, beta1,
                    beta2, eps, weight_decay, flags, body):
        """Every contiguous parameter of one float dtype and one step count in one launch
        (the per-tensor launches cost ~30 us of host time each); False: not taken."""
        ams = bool(flags & K.OPT_AMSGRAD)
        taken = self._multi_params("adam_multi", params, lambda i: (
            params[i], grads[i], exp_avgs[i], exp_avg_sqs[i]) + ((max_sqs[i],) if ams else ()))
        if taken is None:
            return False
        live, ct = taken
        st = steps[live[0]]
        if any(steps[i] != st for i in live):
            return False
        t = np.float32 if ct == "float" else np.float64
        mode = 0 if weight_decay == 0 else (2 if flags & K.OPT_DECOUPLED else 1)
        args = (t(1.0 - beta1), t(beta2), t(1.0 - beta2), t(eps), t(weight_decay),
                t(-(lr / (1.0 - beta1 ** st))), t(math.sqrt(1.0 - beta2 ** st)),
                t(1.0 - lr * weight_decay), np.int32(1 if flags & K.OPT_MAXIMIZE else 0),
                np.int32(mode))
        name = "fm_adam_multi_ams" if ams else "fm_adam_multi"
        return self._multi_launch("adam_multi", name, body, ct, [
            (params[i]._ptr, grads[i]._ptr, exp_avgs[i]._ptr, exp_avg_sqs[i]._ptr,
             max_sqs[i]._ptr if ams else 0, params[i]._numel) for i in live], args)

    def _multi_params(self, key, params, operands):
        """(live, ct) for one multi-tensor launch (fast path key): the indices of the non-empty
        parameters and their C type, when there are two or more and operands(i) (the tensors
        step i reads and writes, the parameter first) are all contiguous and of one float
        dtype; None: not taken."""
        live = [i for i, p in enumerate(params) if p._numel]
        if len(live) < 2 or key in self.fast_path_errors:
            return None
        ct = _float_ct(params[live[0]])
        if ct is None:
            return None
        dt = params[live[0]]._dtype
        for i in live:
            if any(t._dtype is not dt or not t._contig for t in operands(i)):
                return None
        return live, ct

    def _multi_launch(self, key, name, body, ct, entries, args):
        """One launch of _ADAM_MULTI as kernel name with BODY body over its argument table: a
        row per entry (five addresses and the element count) plus the entry's first chunk;
        False when the chunks pass int32 or the launch failed."""
        rows = np.zeros((len(entries), 7), np.int64)
        first = 0
        for j, e in enumerate(entries):
            rows[j, :6] = e
            rows[j, 6] = first
            first += (e[5] + _ADAM_CHUNK - 1) // _ADAM_CHUNK
        if first >= 1 << 31:
            return False
        src = _ADAM_MULTI.replace("NAME", name).replace("BODY", body)

        def go():
            tab = self._upload_table(rows.reshape(-1))
            k = self._raw_kernel(key, src, name, ct)
            k((first,), (256,), (tab, np.int32(len(entries))) + args)

        return self._served(key, go)

    def sgd_step(self, params, grads, bufs, lr, momentum, dampening, weight_decay, flags):
        rc = self._opt_check(params, grads)
        mom = momentum != 0
        generic = (rc or (mom and (bufs is None or any(b is None for b, p in zip(bufs, params)
                                                       if p._numel))) or
                   any(p._numel and (grads[i]._dtype is not p._dtype or
                                     grads[i]._shape != p._shape or
                                     (mom and bufs[i]._dtype is not p._dtype))
                       for i, p in enumerate(params)))
        if generic or "sgd" in self.fast_path_errors:
            return super().sgd_step(params, grads, bufs, lr, momentum, dampening, weight_decay,
                                    flags)
        if self._sgd_multi(params, grads, bufs if mom else None, lr, momentum, dampening,
                           weight_decay, flags):
            return 0
        key = "sgd_mom" if mom else "sgd"
        body = _SGD.replace("MOM", "{ const T bi = first ? gi : buf * mom + damp1 * gi; buf = bi;"
                            " gi = nesterov ? gi + mom * bi : bi; }" if mom else "")
        ins = "T g, T wd, T mom, T damp1, T nlr, int32 maximize, int32 has_wd, int32 first, " \
              "int32 nesterov"
        outs = "T p, T buf" if mom else "T p"
        fl = [np.int32(1 if flags & K.OPT_MAXIMIZE else 0), np.int32(weight_decay != 0),
              np.int32(1 if flags & K.OPT_FIRST else 0),
              np.int32(1 if flags & K.OPT_NESTEROV else 0)]

        def launch(i, p):
            k = self._ew_kernel(key, ins, outs, body)
            pv = self.raw(p)
            t = pv.dtype.type
            args = [self.raw(grads[i]), t(weight_decay), t(momentum), t(1.0 - dampening),
                    t(-lr)] + fl + [pv]
            if mom:
                args.append(self.raw(bufs[i]))
            k(*args)

        rest = self._served_each("sgd", params, launch)
        if rest is None:
            return 0
        pick = _picker(rest)
        return super().sgd_step(pick(params), pick(grads), pick(bufs), lr, momentum, dampening,
                                weight_decay, flags)

    def _sgd_multi(self, params, grads, bufs, lr, momentum, dampening, weight_decay, flags):
        """Every contiguous parameter of one float dtype in one launch (fm_sgd_multi: a table
        of addresses, as _adam_multi), not one ElementwiseKernel call and array views per
        parameter; False: not taken (the per-parameter kernels serve)."""
        taken = self._multi_params("sgd_multi", params, lambda i: (
            params[i], grads[i]) + ((bufs[i],) if bufs is not None else ()))
        if taken is None:
            return False
        live, ct = taken
        t = np.float32 if ct == "float" else np.float64
        mode = ((1 if weight_decay != 0 else 0) | (2 if flags & K.OPT_FIRST else 0) |
                (4 if flags & K.OPT_NESTEROV else 0) | (8 if bufs is not None else 0))
        args = (t(momentum), t(1.0 - dampening), t(-lr), t(0), t(weight_decay), t(0), t(0), t(0),
                np.int32(1 if flags & K.OPT_MAXIMIZE else 0), np.int32(mode))
        # the buffer's address is the parameter's without momentum (never read then)
        return self._multi_launch("sgd_multi", "fm_sgd_multi", _SGD_MULTI_BODY, ct, [
            (params[i]._ptr, grads[i]._ptr, bufs[i]._ptr if bufs is not None else params[i]._ptr,
             params[i]._ptr, 0, params[i]._numel) for i in live], args)

    # ---- layer norm / RMS norm ------------------------------------------------------------------
    def _row_norm_fast(self, rms, M, K_, x, w, G, P, Sp, mean, rstd, *more):
        ct = _float_ct(x, w, rstd, *(() if rms else (mean,)), *more)
        if ct is None or not (G == 1 and Sp == 1 and P == K_ and 0 < M < _MAX_ROWS and K_ > 0):
            return None
        if rstd is None or (not rms and mean is None):
            return None
        return ct

    def row_norm_fwd(self, rms, M, K_, x, sx, y, w, b, G, P, Sp, mean, rstd, eps):
        ct = self._row_norm_fast(rms, M, K_, x, w, G, P, Sp, mean, rstd, y, b)
        if ct is None:
            return super().row_norm_fwd(rms, M, K_, x, sx, y, w, b, G, P, Sp, mean, rstd, eps)

        def go():
            k = self._raw_kernel("row_norm_fwd", _ROW_NORM_FWD, "fm_row_norm_fwd", ct)
            k((M,), (self._threads(K_),),
              (_ptr(x), np.int64(sx), _ptr(y), _ptr(w), _ptr(b), _ptr(mean), _ptr(rstd),
               np.int64(K_), np.int32(rms), np.float64(eps)))

        if self._served("row_norm_fwd", go):
            return 0
        return super().row_norm_fwd(rms, M, K_, x, sx, y, w, b, G, P, Sp, mean, rstd, eps)

    def _row_norm_wb1(self, ct, rms, M, K_, pg, sg, px, sx, pm, pr, gw, gb):
        """The weight and bias gradients (each optional) in one launch (fm_row_norm_wb1);
        False when the kernel is off."""
        gx, ny, chunk, ws, cnt = self._tiles(M, K_, 2)

        def go():
            k = self._raw_kernel("row_norm_wb1", _ROW_NORM_WB1, "fm_row_norm_wb1", ct)
            k((gx, ny), (256,), (pg, np.int64(sg), px, np.int64(sx), pm, pr, ws, cnt,
                                 _ptr(gw), _ptr(gb), np.int64(M), np.int64(K_), np.int32(rms),
                                 np.int64(chunk)))

        return self._served("row_norm_wb1", go)

    def row_norm_bwd(self, rms, M, K_, g, sg, x, sx, w, G, P, Sp, mean, rstd, gx, gw, gb):
        ct = self._row_norm_fast(rms, M, K_, x, w, G, P, Sp, mean, rstd, g, gx, gw, gb)
        if ct is None:
            return super().row_norm_bwd(rms, M, K_, g, sg, x, sx, w, G, P, Sp, mean, rstd, gx,
                                        gw, gb)
        xp = self.xp
        pg, px, pm, pr = _ptr(g), _ptr(x), _ptr(mean), _ptr(rstd)

        if (gw is not None or gb is not None) and \
                all(t is None or t._contig for t in (gw, gb)) and self._row_norm_wb1(
                    ct, rms, M, K_, pg, sg, px, sx, pm, pr, gw, gb):
            gw = gb = None  # written, in one launch

        def go():
            if gw is not None or gb is not None:
                k = self._raw_kernel("row_norm_wb", _ROW_NORM_WB, "fm_row_norm_wb", ct)
                acc = xp.zeros((2, K_), np.float64)
                chunk = 64
                k(((K_ + 127) // 128, (M + chunk - 1) // chunk), (128,),
                  (pg, np.int64(sg), px, np.int64(sx), pm, pr, acc, np.int64(M), np.int64(K_),
                   np.int32(rms), np.int32(chunk)))
                if not self._acc_out(ct, acc, K_, gw, gb, 1.0):
                    if gw is not None:
                        self.cview(gw, (K_,))[...] = acc[0]
                    if gb is not None:
                        self.cview(gb, (K_,))[...] = acc[1]
            if gx is not None:
                k = self._raw_kernel("row_norm_bwd", _ROW_NORM_BWD, "fm_row_norm_bwd", ct)
                k((M,), (self._threads(K_),),
                  (pg, np.int64(sg), px, np.int64(sx), _ptr(w), pm, pr, _ptr(gx),
                   np.int64(K_), np.int32(rms)))

        if self._served("row_norm_bwd", go):
            return 0
        return super().row_norm_bwd(rms, M, K_, g, sg, x, sx, w, G, P, Sp, mean, rstd, gx, gw,
                                    gb)

    # ---- cross entropy ------------------------------------------------------------------------
    def _xent_ok(self, n, c, x, target, weight, *outs):
        return (0 < n < _MAX_GRID and c >= 1 and _float_ct(x, weight, *outs) is not None and
                target._dtype is D.int64)

    def xent_fwd(self, n, c, x, target, weight, ignore_index, smoothing, loss, wt):
        if not self._xent_ok(n, c, x, target, weight, loss, wt):
            return super().xent_fwd(n, c, x, target, weight, ignore_index, smoothing, loss, wt)
        ct = _float_ct(x)
        known = self.known_in(target, 0, c)
        err = self._xent_err(known)

        def go():
            k = self._raw_kernel("xent_fwd", _XENT_FWD, "fm_xent_fwd", ct)
            k((n,), (self._threads(c),),
              (_ptr(x), _ptr(target), _ptr(weight), np.int64(c), np.int64(ignore_index),
               np.float64(smoothing), _ptr(loss), _ptr(wt), err))

        if not self._served("xent_fwd", go):
            return super().xent_fwd(n, c, x, target, weight, ignore_index, smoothing, loss, wt)
        # the one host sync (a bad target is an error first), skipped when the targets'
        # range is known (uploaded from the host)
        if not known and int(self.to_numpy(err)[0]):
            return K.ERR_INDEX
        return 0

    def _xent_err(self, known):
        """The cross entropy kernels' error flag: a fresh zeroed int32 to read back, or, when
        the targets are known to be in range (the kernel will not write it and nothing reads
        it), a null pointer: no allocation, no memset."""
        return np.uint64(0) if known else self.xp.zeros(1, np.int32)

    def xent_bwd(self, n, c, x, target, weight, ignore_index, smoothing, g, gs, scale, gx):
        if not self._xent_ok(n, c, x, target, weight, g, gx):
            return super().xent_bwd(n, c, x, target, weight, ignore_index, smoothing, g, gs,
                                    scale, gx)
        ct = _float_ct(x)
        known = self.known_in(target, 0, c)
        err = self._xent_err(known)

        def go():
            k = self._raw_kernel("xent_bwd", _XENT_BWD, "fm_xent_bwd", ct)
            k((n,), (self._threads(c),),
              (_ptr(x), _ptr(target), _ptr(weight), np.int64(c), np.int64(ignore_index),
               np.float64(smoothing), _ptr(g), np.int64(gs), np.float64(scale), _ptr(gx),
               err))

        if not self._served("xent_bwd", go):
            return super().xent_bwd(n, c, x, target, weight, ignore_index, smoothing, g, gs,
                                    scale, gx)
        if not known and int(self.to_numpy(err)[0]):
            return K.ERR_INDEX
        return 0

    def xent_mean(self, n, lw, out):
        """out (0-d) = lw[0].sum() / lw[1].sum() of the contiguous (2, n) losses and weights
        xent_fwd wrote, in one launch: True, or False to leave it to array calls."""
        ct = _float_ct(lw, out)
        if ct is None or not lw._contig or not 0 < n:
            return False

        def go():
            k = self._raw_kernel("xent_mean", _XENT_MEAN, "fm_xent_mean", ct)
            k((1,), (256,), (_ptr(lw), np.int64(n), _ptr(out)))

        return self._served("xent_mean", go)

    def xent_gscale(self, n, c, target, weight, ignore_index, g, out):
        """out (1 element) = g[0] / the summed weights of the rows whose target is not
        ignore_index (NaN when none): the mean's gradient scale, in one launch, no host read;
        False to leave it to array calls."""
        ct = _float_ct(g, weight, out)
        if ct is None or not 0 < n or target._dtype is not D.int64 or not target._contig:
            return False

        def go():
            k = self._raw_kernel("xent_mean", _XENT_MEAN, "fm_xent_gscale", ct)
            k((1,), (256,), (_ptr(target), _ptr(weight), np.int64(n), np.int64(c),
                             np.int64(ignore_index), _ptr(g), _ptr(out)))

        return self._served("xent_gscale", go)

    # ---- sums over leading dims ---------------------------------------------------------------
    def reduce(self, op, x, rmask, out, sout, aux, saux, p):
        nd = len(x._shape)
        if (op in (K.RED_SUM, K.RED_MEAN) and nd >= 2 and out is not None and
                _float_ct(x, out) is not None and x._numel > 0):
            lead = 0
            while lead < nd and (rmask >> lead) & 1:
                lead += 1
            if 0 < lead < nd and rmask >> lead == 0 and \
                    tuple(x._stride) == _contig(x._shape):
                M = 1
                for s in x._shape[:lead]:
                    M *= s
                Kc = x._numel // M
                if 16 <= M < _MAX_ROWS and self._colsum(op, x, M, Kc, lead, out, sout):
                    return 0
        return super().reduce(op, x, rmask, out, sout, aux, saux, p)

    def _tiles(self, M, Kc, nsums):
        """(column tiles, row chunks, rows a chunk, workspace, counters) of a one-launch column
        reduction (fm_colsum1, fm_row_norm_wb1): about 512 blocks of 32 columns over chunks
        of at least 64 rows; with several chunks the float64 partials' workspace and the
        tiles' counters (zero between launches), kept per stream so that launches on one
        stream never share them at once (null pointers with one chunk)."""
        gx = (Kc + 31) // 32
        ny = min((M + 63) // 64, max(1, 512 // gx), 65535)
        chunk = (M + ny - 1) // ny
        ny = (M + chunk - 1) // chunk
        if ny <= 1:
            return gx, 1, M, np.uint64(0), np.uint64(0)
        sp = getattr(self, "_stream_ptr", None)
        key = sp() if sp is not None else 0
        if not hasattr(self, "_tile_bufs"):
            self._tile_bufs = {}
        bufs = self._tile_bufs.get(key)
        if bufs is None or bufs[0].size < nsums * ny * Kc or bufs[1].size < gx:
            xp = self.xp
            n0 = max(nsums * ny * Kc, 0 if bufs is None else bufs[0].size)
            n1 = max(gx, 0 if bufs is None else bufs[1].size)
            bufs = (xp.empty(n0, np.float64), xp.zeros(n1, np.uint32))
            self._tile_bufs[key] = bufs
        return gx, ny, chunk, bufs[0], bufs[1]

    def _colsum1(self, ct, x, M, Kc, out, div):
        """The column sums into the contiguous row out in one launch (fm_colsum1); False when
        the kernel is off."""
        gx, ny, chunk, ws, cnt = self._tiles(M, Kc, 1)

        def go():
            k = self._raw_kernel("colsum1", _COLSUM1, "fm_colsum1", ct)
            k((gx, ny), (256,), (_ptr(x), ws, cnt, _ptr(out), np.int64(M), np.int64(Kc),
                                 np.int64(chunk), np.float64(div)))

        return self._served("colsum1", go)

    def _colsum(self, op, x, M, Kc, lead, out, sout):
        xp = self.xp
        ct = _float_ct(x)
        if tuple(sout[lead:]) == _contig(x._shape[lead:]) and \
                self._colsum1(ct, x, M, Kc, out, float(M) if op == K.RED_MEAN else 1.0):
            return True
        acc = xp.zeros(Kc, np.float64)
        chunk = 64

        def go():
            k = self._raw_kernel("colsum", _COLSUM, "fm_colsum", ct)
            k(((Kc + 127) // 128, (M + chunk - 1) // chunk), (128,),
              (_ptr(x), acc, np.int64(M), np.int64(Kc), np.int32(chunk)))

        if not self._served("colsum", go):
            return False
        if tuple(sout[lead:]) == _contig(x._shape[lead:]):
            # out's elements are Kc in a row: the float64 sums cast into them in one launch
            # (the mean's division in the same launch)
            if self._acc_out(ct, acc, Kc, out, None, float(M) if op == K.RED_MEAN else 1.0):
                return True
            o = self.cview(out, (Kc,))
            if op == K.RED_MEAN:
                xp.divide(acc, np.float64(M), out=o)
            else:
                o[...] = acc
            return True
        r = acc / np.float64(M) if op == K.RED_MEAN else acc
        kshape = (1,) * lead + tuple(x._shape[lead:])
        self.put(out, r.reshape(kshape), kshape, sout)
        return True

    # ---- batch norm ---------------------------------------------------------------------------
    def batch_norm_fwd(self, N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm, rvar, srv,
                       training, momentum, eps):
        ct = _float_ct(x, y, w, b, mean, invstd, rmean, rvar)
        if ct is None or N < 1 or C < 1 or S < 1 or \
                (not training and (rmean is None or rvar is None)):
            return super().batch_norm_fwd(N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm,
                                          rvar, srv, training, momentum, eps)
        xp = self.xp
        xv = self.raw(x, (1,), (1,))
        base = self.raw(x, (N, C, S), xs)
        ab = xp.empty(2 * C, base.dtype)
        total = N * C * S
        st = [np.int64(v) for v in xs]

        def opt(t):
            return self.raw(t, (1,), (1,)) if t is not None else np.uint64(0)

        def go():
            k = self._raw_kernel("bn", _BN, "fm_bn_stats", ct)
            k((C,), (512,), (xv, np.int64(N), np.int64(S), *st, opt(w), opt(b),
                             self.cview(mean, (C,)), self.cview(invstd, (C,)), opt(rmean),
                             np.int64(srm), opt(rvar), np.int64(srv), ab, np.int64(C),
                             np.int32(bool(training)), np.float64(momentum),
                             np.float64(eps)))
            k = self._raw_kernel("bn", _BN, "fm_bn_apply", ct)
            k((min((total + 255) // 256, 1 << 20),), (256,),
              (xv, np.int64(C), np.int64(S), *st, ab, self.cview(y, (N, C, S)),
               np.int64(total)))

        if self._served("batch_norm_fwd", go):
            return 0
        return super().batch_norm_fwd(N, C, S, x, xs, y, w, b, mean, invstd, rmean, srm, rvar,
                                      srv, training, momentum, eps)

    def batch_norm_bwd(self, N, C, S, g, gs, x, xs, w, mean, invstd, training, gx, gw, gb):
        ct = _float_ct(x, g, w, mean, invstd, gx, gw, gb)
        if ct is None or N < 1 or C < 1 or S < 1:
            return super().batch_norm_bwd(N, C, S, g, gs, x, xs, w, mean, invstd, training, gx,
                                          gw, gb)
        xp = self.xp
        xv, gv = self.raw(x, (1,), (1,)), self.raw(g, (1,), (1,))
        coef = xp.empty(3 * C, self.raw(x, (1,), (1,)).dtype)
        total = N * C * S
        sx = [np.int64(v) for v in xs]
        sg = [np.int64(v) for v in gs]

        def opt(t):
            return self.raw(t, (1,), (1,)) if t is not None else np.uint64(0)

        def go():
            k = self._raw_kernel("bn", _BN, "fm_bn_grad_stats", ct)
            k((C,), (512,), (gv, *sg, xv, *sx, np.int64(N), np.int64(S), opt(w),
                             self.cview(mean, (C,)), self.cview(invstd, (C,)), opt(gw), opt(gb),
                             coef, np.int64(C), np.int32(bool(training))))
            if gx is not None:
                k = self._raw_kernel("bn", _BN, "fm_bn_grad_apply", ct)
                k((min((total + 255) // 256, 1 << 20),), (256,),
                  (gv, *sg, xv, *sx, np.int64(C), np.int64(S), self.cview(mean, (C,)), coef,
                   self.cview(gx, (N, C, S)), np.int64(total)))

        if self._served("batch_norm_bwd", go):
            return 0
        return super().batch_norm_bwd(N, C, S, g, gs, x, xs, w, mean, invstd, training, gx, gw,
                                      gb)

    # ---- softmax / log-softmax over the last dim -----------------------------------------------
    def softmax(self, log, x, out, dim):
        shape = tuple(x._shape)
        nd = len(shape)
        ct = _float_ct(x, out)
        if ct is None or nd == 0 or x._numel == 0 or dim not in (nd - 1, -1) or \
                tuple(x._stride) != _contig(shape) or tuple(out._shape) != shape or \
                tuple(out._stride) != _contig(shape):
            return super().softmax(log, x, out, dim)
        ncol = shape[-1]
        rows = x._numel // ncol

        def go():
            k = self._raw_kernel("softmax", _SOFTMAX, "fm_softmax", ct)
            k((rows,), (self._threads(ncol),),
              (_ptr(x), _ptr(out), np.int64(ncol), np.int32(bool(log))))

        if rows < _MAX_GRID and self._served("softmax", go):
            return 0
        return super().softmax(log, x, out, dim)

    # ---- max pooling with fixed windows -------------------------------------------------------
    def pool_max(self, adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx):
        ct = _float_ct(x, out)
        ok = (ct is not None and not adaptive and d is not None and nplanes > 0 and
              len(isz) == len(osz) == len(k) == len(s) == len(p) == len(d) == 3 and
              all(v > 0 for v in tuple(isz) + tuple(osz) + tuple(k) + tuple(s) + tuple(d)) and
              all(v >= 0 for v in p) and (idx is None or idx._dtype is D.int64))
        if not ok:
            return super().pool_max(adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx)
        isz, osz = tuple(isz), tuple(osz)
        total = nplanes * osz[0] * osz[1] * osz[2]
        xv = self.cview(x, (nplanes * isz[0] * isz[1] * isz[2],))
        ov = self.cview(out, (total,))
        iv = self.cview(idx, (total,)) if idx is not None else np.uint64(0)
        args = [np.int32(v) for v in isz + osz + tuple(k) + tuple(s) + tuple(p) + tuple(d)]

        def go():
            kern = self._raw_kernel("maxpool", _MAXPOOL, "fm_maxpool", ct)
            kern((min((total + 255) // 256, 1 << 20),), (256,), (xv, ov, iv, np.int64(total),
                                                                  *args))

        if self._served("pool_max", go):
            return 0
        return super().pool_max(adaptive, nplanes, isz, osz, k, s, p, d, x, out, idx)

    # ---- attention (no mask or causal, no dropout) ---------------------------------------------
    def _attn_fast(self, H, Hk, L, S, E, mkind, drop, *ts):
        return (_float_ct(*ts) is not None and mkind in (K.ATTN_NONE, K.ATTN_CAUSAL) and
                drop is None and Hk >= 1 and H % Hk == 0 and L > 0 and S > 0 and E > 0)

    def _attn_rows_ok(self, B, H, L):
        return 0 < B * H * L < _MAX_GRID

    def attn_fwd(self, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms,
                 drop, out, os, lse):
        if not self._attn_fast(H, Hk, L, S, E, mkind, drop, q, k, v, out, lse) or \
                not self._attn_rows_ok(B, H, L):
            return super().attn_fwd(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind,
                                    mask, ms, drop, out, os, lse)
        ct = _float_ct(q)
        if flash_fwd(self, ct, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, out,
                     os, lse):
            return 0
        # head dims over cuda_flash's limit (or its kernel failed): the materialised scores
        xp = self.xp
        Q = self.raw(q, (B, H, L, E), tuple(qs) + (1,))
        Kt = self.raw(k, (B, Hk, S, E), tuple(ks) + (1,))
        V = self.raw(v, (B, Hk, S, Ev), tuple(vs) + (1,))
        if H != Hk:
            Kt = xp.repeat(Kt, H // Hk, axis=1)
            V = xp.repeat(V, H // Hk, axis=1)
        O = self.raw(out, (B, H, L, Ev), tuple(os) + (1,))
        LS = self.cview(lse, (B, H, L))

        def go():
            sc = xp.ascontiguousarray(xp.matmul(Q, xp.swapaxes(Kt, -1, -2)))
            kern = self._raw_kernel("attn", _ATTN, "fm_attn_fwd_rows", ct)
            kern((B * H * L,), (self._threads(S),),
                 (sc, LS, np.int64(L), np.int64(S), np.float64(scale),
                  np.int32(mkind == K.ATTN_CAUSAL)))
            if O.flags.c_contiguous:
                xp.matmul(sc, V, out=O)  # straight into the result
            else:
                O[...] = xp.matmul(sc, V)

        if self._served("attn_fwd", go):
            return 0
        return super().attn_fwd(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind,
                                mask, ms, drop, out, os, lse)

    def attn_bwd(self, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, mask, ms,
                 drop, g, gs, lse, gq, gk, gv):
        if not self._attn_fast(H, Hk, L, S, E, mkind, drop, q, k, v, g, lse, gq, gk, gv) or \
                not self._attn_rows_ok(B, H, L):
            return super().attn_bwd(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind,
                                    mask, ms, drop, g, gs, lse, gq, gk, gv)
        ct = _float_ct(q)
        if flash_bwd(self, ct, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, g, gs,
                     lse, gq, gk, gv):
            return 0
        xp = self.xp
        rep = H // Hk
        Q = self.raw(q, (B, H, L, E), tuple(qs) + (1,))
        Kr = self.raw(k, (B, Hk, S, E), tuple(ks) + (1,))
        V = self.raw(v, (B, Hk, S, Ev), tuple(vs) + (1,))
        if H != Hk:
            Kr = xp.repeat(Kr, rep, axis=1)
            V = xp.repeat(V, rep, axis=1)
        G = self.raw(g, (B, H, L, Ev), tuple(gs) + (1,))
        LS = self.cview(lse, (B, H, L))
        want_ds = gq is not None or gk is not None

        def go():
            p = xp.ascontiguousarray(xp.matmul(Q, xp.swapaxes(Kr, -1, -2)))
            ds = xp.ascontiguousarray(xp.matmul(G, xp.swapaxes(V, -1, -2))) if want_ds \
                else np.uint64(0)
            kern = self._raw_kernel("attn", _ATTN, "fm_attn_bwd_rows", ct)
            kern((B * H * L,), (self._threads(S),),
                 (p, ds, LS, np.int64(L), np.int64(S), np.float64(scale),
                  np.int32(mkind == K.ATTN_CAUSAL), np.int32(want_ds)))
            if gv is not None:
                r = xp.matmul(xp.swapaxes(p, -1, -2), G)
                self.cview(gv, (B, Hk, S, Ev))[...] = r.reshape(B, Hk, rep, S, Ev).sum(axis=2)
            one = p.dtype.type(scale)
            if gq is not None:
                self.cview(gq, (B, H, L, E))[...] = xp.matmul(ds, Kr) * one
            if gk is not None:
                r = xp.matmul(xp.swapaxes(ds, -1, -2), Q) * one
                self.cview(gk, (B, Hk, S, E))[...] = r.reshape(B, Hk, rep, S, E).sum(axis=2)

        if self._served("attn_bwd", go):
            return 0
        return super().attn_bwd(B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind,
                                mask, ms, drop, g, gs, lse, gq, gk, gv)

    # ---- the counter-based generator ------------------------------------------------------------
    def _philox_words(self, seed, first, nblocks):
        if nblocks < 1:
            return super()._philox_words(seed, first, nblocks)
        xp = self.xp
        out = xp.empty(4 * nblocks, np.uint32)

        def go():
            # the kernel has no type parameter: "T" is only the cache key's
            kern = self._raw_kernel("philox", _PHILOX, "fm_philox", "float")
            kern((min((nblocks + 255) // 256, 1 << 20),), (256,),
                 (out, np.uint64(first & 0xFFFFFFFFFFFFFFFF), np.int64(nblocks),
                  np.uint32(seed & 0xFFFFFFFF), np.uint32((seed >> 32) & 0xFFFFFFFF)))

        if self._served("philox", go):
            return out
        return super()._philox_words(seed, first, nblocks)

    # ---- convolution: im2col / col2im of 2 spatial dims ----------------------------------------
    def _conv2d_args(self, nd, c, big, k, stride, pad, dil, small):
        return [np.int32(v) for v in (c, big[0], big[1], k[0], k[1], small[0], small[1],
                                      stride[0], stride[1], pad[0], pad[1], dil[0], dil[1])]

    def _im2col(self, x, nd, k, stride, pad, dil, small):
        ct = _CT.get(np.dtype(x.dtype))
        big = tuple(x.shape[2:])
        pointwise = all(v == 1 for v in tuple(k) + tuple(stride)) and not any(pad) and \
            big == tuple(small)
        if nd != 2 or ct is None or pointwise or x.size == 0 or \
                max(big + tuple(small)) >= 1 << 30:
            return super()._im2col(x, nd, k, stride, pad, dil, small)
        xp = self.xp
        n, c = x.shape[:2]
        x = xp.ascontiguousarray(x)
        cols = xp.empty((n, c, k[0] * k[1]) + tuple(small), x.dtype)
        total = cols.size
        args = self._conv2d_args(nd, c, big, k, stride, pad, dil, small)

        def go():
            kern = self._raw_kernel("im2col", _IM2COL, "fm_im2col", ct)
            kern((min((total + 255) // 256, 1 << 20),), (256,), (x, cols, np.int64(total), *args))

        if self._served("im2col", go):
            return cols
        return super()._im2col(x, nd, k, stride, pad, dil, small)

    def _col2im(self, cols, nd, c, big, k, stride, pad, dil, small):
        ct = _CT.get(np.dtype(cols.dtype))
        big = tuple(big)
        pointwise = all(v == 1 for v in tuple(k) + tuple(stride)) and not any(pad) and \
            big == tuple(small)
        if nd != 2 or ct is None or pointwise or cols.size == 0 or \
                max(big + tuple(small)) >= 1 << 30:
            return super()._col2im(cols, nd, c, big, k, stride, pad, dil, small)
        xp = self.xp
        n = cols.shape[0]
        cols = xp.ascontiguousarray(cols)
        x = xp.empty((n, c) + big, cols.dtype)
        total = x.size
        args = self._conv2d_args(nd, c, big, k, stride, pad, dil, small)

        def go():
            kern = self._raw_kernel("col2im", _COL2IM, "fm_col2im", ct)
            kern((min((total + 255) // 256, 1 << 20),), (256,), (cols, x, np.int64(total), *args))

        if self._served("col2im", go):
            return x
        return super()._col2im(cols, nd, c, big, k, stride, pad, dil, small)

    # ---- where(cond, tensor, number): ReLU's backward -----------------------------------------
    def ternary(self, op, dtype, shape, out, a, sa, b, sb, c, sc, bf, bi, cf, ci, p0):
        if op == K.TER_WHERE and (b is None) != (c is None) and \
                self._where_scalar(dtype, shape, out, a, sa, b, sb, c, sc, bf, cf):
            return 0
        return super().ternary(op, dtype, shape, out, a, sa, b, sb, c, sc, bf, bi, cf, ci, p0)

    def _where_scalar(self, dtype, shape, out, a, sa, b, sb, c, sc, bf, cf):
        """where(a, tensor, number) (or number, tensor) for a float dtype with a, the tensor and
        the result contiguous in the result's layout: one launch moving the elements' bits (no
        array views, no temporary); False to leave it to the generic code."""
        flip = b is None
        t, st, num = (c, sc, bf) if flip else (b, sb, cf)
        bits = _where_bits(dtype, num)
        if bits is None or a._dtype is not D.bool or t._dtype is not dtype or \
                out._dtype is not dtype:
            return False
        shape = tuple(shape)
        geo = _flat_geometry(shape)
        if (sa if type(sa) is tuple else tuple(sa)) != geo[0] or \
                (st if type(st) is tuple else tuple(st)) != geo[0] or out._shape != shape or \
                out._stride != geo[0] or a._storage is out._storage or self._overlaps(out, t):
            return False
        pa, pt, po = a._ptr, t._ptr, out._ptr
        name = _WHERE_NAMES[dtype.itemsize]

        def go():
            k = self._raw_kernel("where_s", _WHERE_S, name, "float")
            k(geo[1], _B256, (np.uint64(pa), np.uint64(pt), bits, np.uint64(po), geo[2],
                              _ONE if flip else _ZERO))

        return self._served("where_scalar", go)

    # ---- + - * / of contiguous float32 --------------------------------------------------------
    def binary(self, op, shape, out, a, sa, b, sb):
        name = _BIN_NAMES.get(op)
        ta, tb = type(a), type(b)
        if ta is float or ta is int or tb is float or tb is int:
            if name is not None and out._dtype is D.float32 and \
                    self._binary_scalar(name, shape, out, a, sa, b, sb):
                return 0
            if out._dtype is D.bool and op in _CMP_OPS and \
                    self._compare_scalar(op, shape, out, a, sa, b, sb):
                return 0
            return super().binary(op, shape, out, a, sa, b, sb)
        if name is not None and a._dtype is D.float32 and b._dtype is D.float32 and \
                out._dtype is D.float32:
            shape = tuple(shape)
            geo = _bin4_geometry(shape)
            if geo is not None and (sa if type(sa) is tuple else tuple(sa)) == geo[0] and \
                    (sb if type(sb) is tuple else tuple(sb)) == geo[0] and \
                    out._shape == shape and out._stride == geo[0] and \
                    not self._overlaps(out, a, b):
                pa, pb, po = a._ptr, b._ptr, out._ptr
                vec = _ONE if (pa | pb | po) & 15 == 0 else _ZERO

                def go():  # pointers, not array views: the launch is the one call
                    k = self._raw_kernel("bin4", _BIN4, name, "float")
                    k(geo[1], _B256, (np.uint64(pa), np.uint64(pb), np.uint64(po), geo[2], vec))

                if self._served("binary", go):
                    return 0
        return super().binary(op, shape, out, a, sa, b, sb)

    def _compare_scalar(self, op, shape, out, a, sa, b, sb):
        """A comparison of a contiguous float32/float64/bfloat16 tensor of the result's layout
        with a number (in the tensor's dtype; for bfloat16 only a number exact in it), into a
        contiguous bool result: one launch, no array views (ReLU's backward compares its
        output with 0)."""
        left = type(a) is float or type(a) is int
        t, st, sv = (b, sb, a) if left else (a, sa, b)
        dt = t._dtype
        kname = _CMP_NAMES.get(dt)
        if kname is None or t._storage is out._storage or \
                (type(sv) is int and not -_EXACT_INT <= sv <= _EXACT_INT):
            return False
        shape = tuple(shape)
        geo = _flat_geometry(shape)
        if (st if type(st) is tuple else tuple(st)) != geo[0] or out._shape != shape or \
                out._stride != geo[0]:
            return False
        if dt is D.float64:
            s = np.float64(sv)
        else:
            with np.errstate(over="ignore"):  # beyond float32's range: inf, as the generic code
                s32 = np.float32(sv)
            # bfloat16: only a number exact in bfloat16 (the CPU rounds the number to bfloat16,
            # the generic array code compares in float32: they agree on those)
            if dt is D.bfloat16 and int(s32.view(np.uint32)) & 0xFFFF:
                return False
            s = np.float64(s32)
        pt, po = t._ptr, out._ptr
        code = _CMP_OPS[op]

        def go():
            k = self._raw_kernel("cmp_s", _CMP_S, kname, "float")
            k(geo[1], _B256, (np.uint64(pt), s, np.uint64(po), geo[2], code,
                              _ONE if left else _ZERO))

        return self._served("compare_scalar", go)

    def _binary_scalar(self, name, shape, out, a, sa, b, sb):
        """a op number or number op a for a contiguous float32 a of the result's layout (the
        number cast to float32 first, as the generic code does): one vectorised pass."""
        left = type(a) is float or type(a) is int
        t, st, sv = (b, sb, a) if left else (a, sa, b)
        if t._dtype is not D.float32:
            return False
        shape = tuple(shape)
        geo = _bin4_geometry(shape)
        if geo is None or (st if type(st) is tuple else tuple(st)) != geo[0] or \
                out._shape != shape or out._stride != geo[0] or self._overlaps(out, t):
            return False
        if type(sv) is float and -_F32_MAX <= sv <= _F32_MAX:
            s = np.float32(sv)  # (in range: no overflow to quiet)
        else:
            with np.errstate(over="ignore"):  # beyond float32's range: inf, as the generic code
                s = np.float32(self._scalar(D.float32, 0.0, sv, True))
        pa, po = t._ptr, out._ptr
        vec = _ONE if (pa | po) & 15 == 0 else _ZERO
        kname = _BIN4S_NAMES[name]

        def go():
            k = self._raw_kernel("bin4", _BIN4, kname, "float")
            k(geo[1], _B256, (np.uint64(pa), s, np.uint64(po), geo[2], vec,
                              _ONE if left else _ZERO))

        return self._served("binary_scalar", go)


_ONE, _ZERO = np.int32(1), np.int32(0)
_B256 = (256,)
_F32_MAX = float(np.finfo(np.float32).max)
_BIN4_GEO = {}


def _bin4_geometry(shape):
    """(contiguous strides, grid, element count as the kernel's int64) of the float4 kernels
    for a result of ``shape``, kept per shape; None below their 65536-element threshold."""
    g = _BIN4_GEO.get(shape, False)
    if g is False:
        n = 1
        for d in shape:
            n *= d
        g = None if n < 65536 else (_contig(shape), (min((n // 4 + 255) // 256 + 1, 1 << 20),),
                                    np.int64(n))
        if len(_BIN4_GEO) >= 1024:
            _BIN4_GEO.clear()
        _BIN4_GEO[shape] = g
    return g


_CMP_OPS = {K.BIN_EQ: np.int32(0), K.BIN_NE: np.int32(1), K.BIN_LT: np.int32(2),
            K.BIN_LE: np.int32(3), K.BIN_GT: np.int32(4), K.BIN_GE: np.int32(5)}
_CMP_NAMES = {D.bfloat16: "fm_cmp_s_bf16", D.float32: "fm_cmp_s_f32", D.float64: "fm_cmp_s_f64"}
_EXACT_INT = 1 << 53  # ints beyond are rounded twice on the way to float32: left to the generic
_WHERE_NAMES = {2: "fm_where_s16", 4: "fm_where_s32", 8: "fm_where_s64"}
_WHERE_BITS = {}
_FLAT_GEO = {}


def _where_bits(dtype, num):
    """The number ``num`` as where's generic code stores it in ``dtype`` (float32, float64,
    float16, or bfloat16 where the float32 number is exact in it), as an unsigned integer of
    the element's width; None for another dtype."""
    try:
        key = (dtype, num, math.copysign(1.0, num))  # (0.0 == -0.0: the sign tells them apart)
        return _WHERE_BITS[key]
    except KeyError:
        pass
    except TypeError:
        return None
    bits = None
    with np.errstate(over="ignore"):
        if dtype is D.float32:
            bits = np.float32(num).view(np.uint32)
        elif dtype is D.float64:
            bits = np.float64(num).view(np.uint64)
        elif dtype is D.float16:
            bits = np.float16(np.float32(num)).view(np.uint16)
        elif dtype is D.bfloat16:
            w = int(np.float32(num).view(np.uint32))
            bits = np.uint16(w >> 16) if w & 0xFFFF == 0 else None  # exact in bfloat16 only
    if len(_WHERE_BITS) >= 256:
        _WHERE_BITS.clear()
    _WHERE_BITS[key] = bits
    return bits


def _flat_geometry(shape):
    """(contiguous strides, grid, element count as the kernel's int64) of a one-element-per-
    thread pass over a result of ``shape``, kept per shape."""
    g = _FLAT_GEO.get(shape)
    if g is None:
        n = 1
        for d in shape:
            n *= d
        g = (_contig(shape), (max(min((n + 255) // 256, 1 << 20), 1),), np.int64(n))
        if len(_FLAT_GEO) >= 1024:
            _FLAT_GEO.clear()
        _FLAT_GEO[shape] = g
    return g


def _ptr_or_null(a):
    """A kernel argument for an optional array: the array, or a null pointer."""
    return a if a is not None else np.uint64(0)


def _ptr(t):
    """A raw kernel's pointer argument for the (optional) tensor t: its first element's
    address, or a null pointer. No array view is built (on CuPy an ndarray costs microseconds
    of host time; the kernels take the layout as their own arguments)."""
    return np.uint64(0 if t is None else t._ptr)

