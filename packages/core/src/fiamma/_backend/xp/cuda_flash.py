"""The cuda backend's fused (flash-style) attention: ``attn_fwd`` / ``attn_bwd`` without a mask
or with the causal one, no dropout, float32/float64, head dims E, Ev <= 128, any row strides of
q, k, v, out and the gradient of out, grouped-query heads (H a multiple of Hk).

Forward (``fm_flash_fwd``): one block of 128 threads per (batch, head, tile of query rows); the
block walks the key/value tiles through shared memory with an online softmax (running row max
and sum, the partial output rescaled when the max grows) and writes the output and the rows'
log-sum-exp. Causal blocks stop at the tile holding their last row's key and take the longest
tiles first. The (L, S) score matrix never exists in global memory.

Backward, without atomics:
- ``fm_flash_bwd_dq``: one block per (batch, head, query tile); over the key tiles it recomputes
  p = exp(s - lse) and dp = dO V^T and accumulates A = sum p dp K, P = sum p K and
  D = sum p dp (the row's sum of p dp, which equals rowsum(dO * O)), then dQ = scale (A - D P):
  D comes with dQ, so no pass over the output (which the backward is not given) is needed;
- ``fm_flash_bwd_dkv``: one block per (batch, key head, key tile); over the group's query heads
  and the query tiles (causal: from the tile of the block's first key) it recomputes p and
  ds = p (dp - D) and accumulates dV = sum p dO and dK = scale sum ds Q; a key head's group is
  summed inside the block.

Arithmetic in the inputs' dtype (float accumulators for float32, as PyTorch's kernels, double
for float64), with explicit fused multiply-adds. Tiles are sized so a block's static shared
memory stays under 48 KB; shared rows are padded by 16 bytes, so the inner loops read 16 bytes
(float4 / double2) a load without bank conflicts; where q, k, v (and dO) are float32 with
16-byte aligned rows of a multiple of 4 elements, tiles also load from global memory as float4.
Larger head dims, masks, dropout and other dtypes go to the materialised path of
cuda_kernels.py (and from there to the generic code).
"""

import functools

import numpy as np

from fiamma._backend import codes as K

__all__ = ["FLASH_EMAX", "flash_fwd", "flash_bwd", "flash_source", "FLASH_CFG"]

FLASH_EMAX = 128
_SHARED = 48 * 1024  # static shared memory a block may take without opting in

# (ct, head-dim bound) -> forward (query rows a tile, keys a tile, threads a query row) and the
# backward's (rows a tile, both kinds, threads a row); threads a block: rows x threads a row
# (128; 64 in the double, E <= 128 backward). Shared memory per block (checked by _cfg), with
# rows of W = EMAX + 16 bytes: forward (BM + 2 BN) W + BM (BN + 1) elements, backward 4 B W +
# 2 B (B + 2); ptxas (sm_90) counts forward / backward dK dV bytes:
FLASH_CFG = {
    ("float", 64): ((64, 32, 2), (32, 4)),     # 43264 / 43520
    ("float", 128): ((32, 16, 4), (16, 8)),    # 35968 / 36096
    ("double", 64): ((32, 16, 4), (16, 8)),    # 38144 / 38400
    ("double", 128): ((16, 8, 8), (8, 8)),     # 34432 / 34560
}

_COMMON = r"""
#define FA_W (FA_EMAX + FA_VN)
#define FA_NEG_INF ((T)__longlong_as_double(0xfff0000000000000ULL))
// 16 bytes: FA_VN elements of T (float4 or double2) a shared-memory load; fused multiply-adds
// written out (the kernels are compiled with --fmad=false, which contracts nothing itself)
__device__ __forceinline__ float fa_dot(float s, float4 a, float4 b) {
    s = fmaf(a.x, b.x, s); s = fmaf(a.y, b.y, s); s = fmaf(a.z, b.z, s);
    return fmaf(a.w, b.w, s);
}
__device__ __forceinline__ double fa_dot(double s, double2 a, double2 b) {
    return fma(a.y, b.y, fma(a.x, b.x, s));
}
__device__ __forceinline__ void fa_axpy(float* acc, float p, float4 v) {
    acc[0] = fmaf(p, v.x, acc[0]); acc[1] = fmaf(p, v.y, acc[1]);
    acc[2] = fmaf(p, v.z, acc[2]); acc[3] = fmaf(p, v.w, acc[3]);
}
__device__ __forceinline__ void fa_axpy(double* acc, double p, double2 v) {
    acc[0] = fma(p, v.x, acc[0]); acc[1] = fma(p, v.y, acc[1]);
}
#define FA_LD(p) (*(const FA_V*)(p))
// the head dim of a thread's accumulator slot i (FA_VN consecutive dims a load)
#define FA_DIM(i) (sub * FA_VN + ((i) / FA_VN) * FA_TPR * FA_VN + (i) % FA_VN)
__device__ __forceinline__ float fa_exp(float x) { return expf(x); }
__device__ __forceinline__ double fa_exp(double x) { return exp(x); }
__device__ __forceinline__ float fa_log(float x) { return logf(x); }
__device__ __forceinline__ double fa_log(double x) { return log(x); }
// the larger, NaN if either is (as the generic code's max)
__device__ __forceinline__ T fa_max(T a, T b) { return (a > b || a != a) ? a : b; }
// over the FA_TPR consecutive lanes that share a row
__device__ __forceinline__ T fa_rows_sum(T v) {
    for (int o = FA_TPR >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ T fa_rows_max(T v) {
    for (int o = FA_TPR >> 1; o > 0; o >>= 1) v = fa_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// rows r0 .. r0 + rows - 1 (n elements, row stride rs) of src into dst (row pitch FA_W), zeros
// from row nr on and from column n to the next multiple of FA_VN; four elements a global load
// where vec (float rows 16-byte aligned, n % 4 == 0)
__device__ __forceinline__ void fa_load(T* dst, const T* src, long long rs, long long r0,
                                        long long nr, int rows, int n, int vec) {
    if (vec) {
        const int n4 = n >> 2;
        for (int i = threadIdx.x; i < rows * n4; i += blockDim.x) {
            const int rr = i / n4, e = (i - rr * n4) << 2;
            T* d = dst + rr * FA_W + e;
            if (r0 + rr < nr) {
                const float4 x = *(const float4*)(src + (r0 + rr) * rs + e);
                d[0] = x.x; d[1] = x.y; d[2] = x.z; d[3] = x.w;
            } else {
                d[0] = (T)0; d[1] = (T)0; d[2] = (T)0; d[3] = (T)0;
            }
        }
    } else {
        const int np = (n + FA_VN - 1) / FA_VN * FA_VN;
        for (int i = threadIdx.x; i < rows * np; i += blockDim.x) {
            const int rr = i / np, e = i - rr * np;
            dst[rr * FA_W + e] = r0 + rr < nr && e < n ? src[(r0 + rr) * rs + e] : (T)0;
        }
    }
}
"""

_UNDEF = "\n#undef FA_W\n#undef FA_NEG_INF\n#undef FA_BM\n#undef FA_BN\n#undef FA_TPR\n" \
         "#undef FA_EMAX\n#undef FA_VN\n#undef FA_V\n#undef FA_LD\n#undef FA_DIM\n"

# thread t serves query row t / FA_TPR of the tile: key columns sub + c FA_TPR of each key tile,
# output dims (sub + i FA_TPR) FA_VN + u (u < FA_VN: one 16-byte shared load); dot products
# over FA_VN elements a load (rows zero-padded to a multiple)
_FWD = r"""
extern "C" __global__ void fm_flash_fwd(
        const T* __restrict__ q, long long qb, long long qh, long long ql,
        const T* __restrict__ k, long long kb, long long kh, long long kl,
        const T* __restrict__ v, long long vb, long long vh, long long vl,
        T* __restrict__ o, long long ob, long long oh, long long ol, T* __restrict__ lse,
        int H, int rep, long long L, long long S, int E, int Ev, double scale, int causal,
        int vec, long long nq) {
    constexpr int CPT = FA_BN / FA_TPR, DPT = FA_EMAX / FA_TPR, PW = FA_BN + 1;
    __shared__ __align__(16) T Qs[FA_BM * FA_W];
    __shared__ __align__(16) T Ks[FA_BN * FA_W];
    __shared__ __align__(16) T Vs[FA_BN * FA_W];
    __shared__ T Ps[FA_BM * PW];
    // the tile is the slow index of the grid: (causal) the longest tiles are dispatched first
    const long long nbh = (long long)gridDim.x / nq;
    const long long tile = nq - 1 - (long long)blockIdx.x / nbh;
    const long long bh = (long long)blockIdx.x % nbh, b = bh / H;
    const int h = (int)(bh - b * H), hk = h / rep;
    const int t = threadIdx.x, r = t / FA_TPR, sub = t - r * FA_TPR;
    const long long m0 = tile * FA_BM, l = m0 + r;
    const T tsc = (T)scale, ninf = FA_NEG_INF;
    const T* kp = k + b * kb + hk * kh;
    const T* vp = v + b * vb + hk * vh;
    fa_load(Qs, q + b * qb + h * qh, ql, m0, L, FA_BM, E, vec);
    const T* qr = Qs + r * FA_W;
    T m = ninf, den = (T)0, acc[DPT];
#pragma unroll
    for (int i = 0; i < DPT; ++i) acc[i] = (T)0;
    const long long nend = causal && m0 + FA_BM < S ? m0 + FA_BM : S;
    for (long long n0 = 0; n0 < nend; n0 += FA_BN) {
        __syncthreads();
        fa_load(Ks, kp, kl, n0, S, FA_BN, E, vec);
        fa_load(Vs, vp, vl, n0, S, FA_BN, Ev, vec);
        __syncthreads();
        T s[CPT];
#pragma unroll
        for (int c = 0; c < CPT; ++c) s[c] = (T)0;
        for (int e = 0; e < E; e += FA_VN) {
            const FA_V qe = FA_LD(qr + e);
#pragma unroll
            for (int c = 0; c < CPT; ++c)
                s[c] = fa_dot(s[c], qe, FA_LD(Ks + (sub + c * FA_TPR) * FA_W + e));
        }
        T mt = ninf;
#pragma unroll
        for (int c = 0; c < CPT; ++c) {
            const long long j = n0 + sub + c * FA_TPR;
            s[c] = (j < S && !(causal && j > l)) ? s[c] * tsc : ninf;
            mt = fa_max(mt, s[c]);
        }
        const T mn = fa_max(m, fa_rows_max(mt));
        const T base = mn == ninf ? (T)0 : mn;  // a row with no key yet: all p 0
        const T alpha = fa_exp(m - base);
        T ps = (T)0;
#pragma unroll
        for (int c = 0; c < CPT; ++c) {
            const T p = fa_exp(s[c] - base);
            Ps[r * PW + sub + c * FA_TPR] = p;
            ps += p;
        }
        den = den * alpha + fa_rows_sum(ps);
        m = mn;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < DPT; ++i) acc[i] *= alpha;
        const int nj = S - n0 < FA_BN ? (int)(S - n0) : FA_BN;
        for (int jj = 0; jj < nj; ++jj) {
            const T p = Ps[r * PW + jj];
            const T* vr = Vs + jj * FA_W + sub * FA_VN;
#pragma unroll
            for (int i = 0; i < DPT; i += FA_VN) fa_axpy(acc + i, p, FA_LD(vr + i * FA_TPR));
        }
    }
    if (l < L) {
        const bool dead = den == (T)0;  // every score -inf: output 0, log-sum-exp -inf
        const T dd = dead ? (T)1 : den;
        T* op = o + b * ob + h * oh + l * ol;
#pragma unroll
        for (int i = 0; i < DPT; ++i) {
            const int d = FA_DIM(i);
            if (d < Ev) op[d] = acc[i] / dd;
        }
        if (sub == 0) lse[bh * L + l] = dead ? ninf : m + fa_log(den);
    }
}
"""

# FA_BM == FA_BN: dq's thread t serves query row t / FA_TPR (key columns sub + c FA_TPR),
# dkv's thread t key row t / FA_TPR (query columns sub + c FA_TPR); dims sub + i FA_TPR
_BWD = r"""
extern "C" __global__ void fm_flash_bwd_dq(
        const T* __restrict__ q, long long qb, long long qh, long long ql,
        const T* __restrict__ k, long long kb, long long kh, long long kl,
        const T* __restrict__ v, long long vb, long long vh, long long vl,
        const T* __restrict__ g, long long gb, long long gh, long long gl,
        const T* __restrict__ lse, T* __restrict__ dsum, T* __restrict__ gq,
        int H, int rep, long long L, long long S, int E, int Ev, double scale, int causal,
        int vec, long long nq) {
    constexpr int CPT = FA_BN / FA_TPR, DPT = FA_EMAX / FA_TPR, PW = FA_BN + 1;
    __shared__ __align__(16) T Qs[FA_BM * FA_W];
    __shared__ __align__(16) T Gs[FA_BM * FA_W];
    __shared__ __align__(16) T Ks[FA_BN * FA_W];
    __shared__ __align__(16) T Vs[FA_BN * FA_W];
    __shared__ T Ps[FA_BM * PW];
    __shared__ T Rs[FA_BM * PW];
    // the tile is the slow index of the grid: (causal) the longest tiles are dispatched first
    const long long nbh = (long long)gridDim.x / nq;
    const long long tile = nq - 1 - (long long)blockIdx.x / nbh;
    const long long bh = (long long)blockIdx.x % nbh, b = bh / H;
    const int h = (int)(bh - b * H), hk = h / rep;
    const int t = threadIdx.x, r = t / FA_TPR, sub = t - r * FA_TPR;
    const long long m0 = tile * FA_BM, l = m0 + r;
    const T tsc = (T)scale, ninf = FA_NEG_INF;
    const T* kp = k + b * kb + hk * kh;
    const T* vp = v + b * vb + hk * vh;
    fa_load(Qs, q + b * qb + h * qh, ql, m0, L, FA_BM, E, vec);
    fa_load(Gs, g + b * gb + h * gh, gl, m0, L, FA_BM, Ev, vec);
    const T* qr = Qs + r * FA_W;
    const T* gr = Gs + r * FA_W;
    const T ls = l < L ? lse[bh * L + l] : ninf;
    const bool live = ls != ninf;  // a dead row (lse -inf) has p 0
    T a[DPT], pk[DPT], dpart = (T)0;
#pragma unroll
    for (int i = 0; i < DPT; ++i) { a[i] = (T)0; pk[i] = (T)0; }
    const long long nend = causal && m0 + FA_BM < S ? m0 + FA_BM : S;
    for (long long n0 = 0; n0 < nend; n0 += FA_BN) {
        __syncthreads();
        fa_load(Ks, kp, kl, n0, S, FA_BN, E, vec);
        fa_load(Vs, vp, vl, n0, S, FA_BN, Ev, vec);
        __syncthreads();
        T s[CPT], dp[CPT];
#pragma unroll
        for (int c = 0; c < CPT; ++c) { s[c] = (T)0; dp[c] = (T)0; }
        for (int e = 0; e < E; e += FA_VN) {
            const FA_V qe = FA_LD(qr + e);
#pragma unroll
            for (int c = 0; c < CPT; ++c)
                s[c] = fa_dot(s[c], qe, FA_LD(Ks + (sub + c * FA_TPR) * FA_W + e));
        }
        for (int e = 0; e < Ev; e += FA_VN) {
            const FA_V ge = FA_LD(gr + e);
#pragma unroll
            for (int c = 0; c < CPT; ++c)
                dp[c] = fa_dot(dp[c], ge, FA_LD(Vs + (sub + c * FA_TPR) * FA_W + e));
        }
#pragma unroll
        for (int c = 0; c < CPT; ++c) {
            const long long j = n0 + sub + c * FA_TPR;
            const T p = (live && j < S && !(causal && j > l)) ? fa_exp(s[c] * tsc - ls) : (T)0;
            const T pd = p * dp[c];
            Ps[r * PW + sub + c * FA_TPR] = p;
            Rs[r * PW + sub + c * FA_TPR] = pd;
            dpart += pd;
        }
        __syncthreads();
        const int nj = S - n0 < FA_BN ? (int)(S - n0) : FA_BN;
        for (int jj = 0; jj < nj; ++jj) {
            const T p = Ps[r * PW + jj], pd = Rs[r * PW + jj];
            const T* kr = Ks + jj * FA_W + sub * FA_VN;
#pragma unroll
            for (int i = 0; i < DPT; i += FA_VN) {
                const FA_V kv = FA_LD(kr + i * FA_TPR);
                fa_axpy(a + i, pd, kv);
                fa_axpy(pk + i, p, kv);
            }
        }
    }
    const T D = fa_rows_sum(dpart);
    if (l < L) {
        if (sub == 0) dsum[bh * L + l] = D;
        if (gq) {
            T* gp = gq + (bh * L + l) * E;
#pragma unroll
            for (int i = 0; i < DPT; ++i) {
                const int d = FA_DIM(i);
                if (d < E) gp[d] = (a[i] - D * pk[i]) * tsc;
            }
        }
    }
}

extern "C" __global__ void fm_flash_bwd_dkv(
        const T* __restrict__ q, long long qb, long long qh, long long ql,
        const T* __restrict__ k, long long kb, long long kh, long long kl,
        const T* __restrict__ v, long long vb, long long vh, long long vl,
        const T* __restrict__ g, long long gb, long long gh, long long gl,
        const T* __restrict__ lse, const T* __restrict__ dsum, T* __restrict__ gk,
        T* __restrict__ gv, int H, int rep, long long L, long long S, int E, int Ev,
        double scale, int causal, int vec, long long nk) {
    constexpr int CPT = FA_BM / FA_TPR, DPT = FA_EMAX / FA_TPR, PW = FA_BM + 1;
    __shared__ __align__(16) T Ks[FA_BN * FA_W];
    __shared__ __align__(16) T Vs[FA_BN * FA_W];
    __shared__ __align__(16) T Qs[FA_BM * FA_W];
    __shared__ __align__(16) T Gs[FA_BM * FA_W];
    __shared__ T Ps[FA_BN * PW];
    __shared__ T Rs[FA_BN * PW];
    __shared__ T Ls[FA_BM];
    __shared__ T Ds[FA_BM];
    // causal: the first key tiles have the most rows, dispatched first
    const long long nbh = (long long)gridDim.x / nk;
    const long long tile = (long long)blockIdx.x / nbh;
    const long long bhk = (long long)blockIdx.x % nbh, Hk = H / rep, b = bhk / Hk;
    const int hk = (int)(bhk - b * Hk);
    const int t = threadIdx.x, r = t / FA_TPR, sub = t - r * FA_TPR;
    const long long n0 = tile * FA_BN, j = n0 + r;
    const T tsc = (T)scale, ninf = FA_NEG_INF;
    const bool want_ds = gk != 0;
    fa_load(Ks, k + b * kb + hk * kh, kl, n0, S, FA_BN, E, vec);
    fa_load(Vs, v + b * vb + hk * vh, vl, n0, S, FA_BN, Ev, vec);
    const T* kr = Ks + r * FA_W;
    const T* vr = Vs + r * FA_W;
    T dk[DPT], dv[DPT];
#pragma unroll
    for (int i = 0; i < DPT; ++i) { dk[i] = (T)0; dv[i] = (T)0; }
    const long long mstart = causal ? n0 / FA_BM * FA_BM : 0;
    for (int hh = 0; hh < rep; ++hh) {
        const long long h = (long long)hk * rep + hh, bh = b * H + h;
        for (long long m0 = mstart; m0 < L; m0 += FA_BM) {
            __syncthreads();
            fa_load(Qs, q + b * qb + h * qh, ql, m0, L, FA_BM, E, vec);
            fa_load(Gs, g + b * gb + h * gh, gl, m0, L, FA_BM, Ev, vec);
            for (int i = t; i < FA_BM; i += blockDim.x) {
                const long long l = m0 + i;
                Ls[i] = l < L ? lse[bh * L + l] : ninf;
                Ds[i] = l < L && want_ds ? dsum[bh * L + l] : (T)0;
            }
            __syncthreads();
            T s[CPT], dp[CPT];
#pragma unroll
            for (int c = 0; c < CPT; ++c) { s[c] = (T)0; dp[c] = (T)0; }
            for (int e = 0; e < E; e += FA_VN) {
                const FA_V ke = FA_LD(kr + e);
#pragma unroll
                for (int c = 0; c < CPT; ++c)
                    s[c] = fa_dot(s[c], FA_LD(Qs + (sub + c * FA_TPR) * FA_W + e), ke);
            }
            if (want_ds) {
                for (int e = 0; e < Ev; e += FA_VN) {
                    const FA_V ve = FA_LD(vr + e);
#pragma unroll
                    for (int c = 0; c < CPT; ++c)
                        dp[c] = fa_dot(dp[c], FA_LD(Gs + (sub + c * FA_TPR) * FA_W + e), ve);
                }
            }
#pragma unroll
            for (int c = 0; c < CPT; ++c) {
                const int ll = sub + c * FA_TPR;
                const T lr = Ls[ll];
                const T p = (lr != ninf && j < S && !(causal && j > m0 + ll))
                    ? fa_exp(s[c] * tsc - lr) : (T)0;
                Ps[r * PW + ll] = p;
                Rs[r * PW + ll] = p * (dp[c] - Ds[ll]);
            }
            __syncthreads();
            const int nl = L - m0 < FA_BM ? (int)(L - m0) : FA_BM;
            for (int ll = 0; ll < nl; ++ll) {
                const T p = Ps[r * PW + ll], ds = Rs[r * PW + ll];
                const T* gq_ = Gs + ll * FA_W + sub * FA_VN;
                const T* qq_ = Qs + ll * FA_W + sub * FA_VN;
#pragma unroll
                for (int i = 0; i < DPT; i += FA_VN) {
                    fa_axpy(dv + i, p, FA_LD(gq_ + i * FA_TPR));
                    fa_axpy(dk + i, ds, FA_LD(qq_ + i * FA_TPR));
                }
            }
        }
    }
    if (j < S) {
#pragma unroll
        for (int i = 0; i < DPT; ++i) {
            const int d = FA_DIM(i);
            if (gv && d < Ev) gv[(bhk * S + j) * Ev + d] = dv[i];
            if (gk && d < E) gk[(bhk * S + j) * E + d] = dk[i] * tsc;
        }
    }
}
"""


@functools.lru_cache(maxsize=None)
def _cfg(ct, emax, part):
    """(rows, keys, threads a row) of a tile of the forward ("f") or backward ("b") kernels."""
    fwd, bwd = FLASH_CFG[(ct, emax)]
    bm, bn, tpr = fwd if part == "f" else (bwd[0], bwd[0], bwd[1])
    size = 8 if ct == "double" else 4
    w = emax + 16 // size
    shared = ((bm + 2 * bn) * w + bm * (bn + 1) if part == "f" else
              4 * bm * w + 2 * bm * (bm + 2)) * size
    assert bm % tpr == 0 and bn % tpr == 0 and emax % (tpr * 16 // size) == 0, (ct, emax)
    assert tpr <= 32
    assert bm * tpr in (64, 128) and shared <= _SHARED, (ct, emax, part, shared)
    return bm, bn, tpr


@functools.lru_cache(maxsize=None)
def flash_source(ct, emax, part):
    """The CUDA source (without the ``typedef ct T``) of the forward ("f") or backward ("b")
    kernels for head dims up to emax (64 or 128)."""
    bm, bn, tpr = _cfg(ct, emax, part)
    vn, vt = (4, "float4") if ct == "float" else (2, "double2")
    head = (f"#define FA_EMAX {emax}\n#define FA_BM {bm}\n#define FA_BN {bn}\n"
            f"#define FA_TPR {tpr}\n#define FA_VN {vn}\n#define FA_V {vt}\n")
    return head + _COMMON + (_FWD if part == "f" else _BWD) + _UNDEF


def _emax(E, Ev):
    m = max(E, Ev)
    return 64 if m <= 64 else 128 if m <= FLASH_EMAX else None


def _vec(ct, E, Ev, pairs):
    """float4 tile loads: float32, rows of a multiple of 4 elements, 16-byte aligned rows."""
    return int(ct == "float" and E % 4 == 0 and Ev % 4 == 0 and
               all(t._ptr % 16 == 0 and all(s % 4 == 0 for s in st) for t, st in pairs))


def _strides(st):
    return tuple(np.int64(s) for s in st)


def flash_fwd(be, ct, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, out, os,
              lse):
    """The fused forward on backend ``be`` (a CudaKernelsMixin); True when it served."""
    em = _emax(E, Ev)
    if em is None:
        return False
    Q = be.raw(q, (B, H, L, E), tuple(qs) + (1,))
    Kv = be.raw(k, (B, Hk, S, E), tuple(ks) + (1,))
    V = be.raw(v, (B, Hk, S, Ev), tuple(vs) + (1,))
    O = be.raw(out, (B, H, L, Ev), tuple(os) + (1,))
    LS = be.cview(lse, (B, H, L))
    bm, _, tpr = _cfg(ct, em, "f")
    nq = (L + bm - 1) // bm
    vec = _vec(ct, E, Ev, ((q, qs), (k, ks), (v, vs)))

    def go():
        kern = be._raw_kernel(f"flash{em}f", flash_source(ct, em, "f"), "fm_flash_fwd", ct)
        kern((nq * B * H,), (bm * tpr,),
             (Q, *_strides(qs), Kv, *_strides(ks), V, *_strides(vs), O, *_strides(os), LS,
              np.int32(H), np.int32(H // Hk), np.int64(L), np.int64(S), np.int32(E),
              np.int32(Ev), np.float64(scale), np.int32(mkind == K.ATTN_CAUSAL),
              np.int32(vec), np.int64(nq)))

    return be._served("attn_flash_fwd", go)


def flash_bwd(be, ct, B, H, Hk, L, S, E, Ev, scale, q, qs, k, ks, v, vs, mkind, g, gs, lse,
              gq, gk, gv):
    """The fused backward on backend ``be``; True when it served."""
    em = _emax(E, Ev)
    if em is None:
        return False
    xp = be.xp
    Q = be.raw(q, (B, H, L, E), tuple(qs) + (1,))
    Kv = be.raw(k, (B, Hk, S, E), tuple(ks) + (1,))
    V = be.raw(v, (B, Hk, S, Ev), tuple(vs) + (1,))
    G = be.raw(g, (B, H, L, Ev), tuple(gs) + (1,))
    LS = be.cview(lse, (B, H, L))
    null = np.uint64(0)
    GQ = be.cview(gq, (B, H, L, E)) if gq is not None else null
    GK = be.cview(gk, (B, Hk, S, E)) if gk is not None else null
    GV = be.cview(gv, (B, Hk, S, Ev)) if gv is not None else null
    tb, _, tpr = _cfg(ct, em, "b")
    nq, nk = (L + tb - 1) // tb, (S + tb - 1) // tb
    vec = _vec(ct, E, Ev, ((q, qs), (k, ks), (v, vs), (g, gs)))
    causal = np.int32(mkind == K.ATTN_CAUSAL)
    common = (Q, *_strides(qs), Kv, *_strides(ks), V, *_strides(vs), G, *_strides(gs), LS)
    tail = (np.int32(H), np.int32(H // Hk), np.int64(L), np.int64(S), np.int32(E),
            np.int32(Ev), np.float64(scale), causal, np.int32(vec))

    def go():
        src = flash_source(ct, em, "b")
        dsum = null
        if gq is not None or gk is not None:
            dsum = xp.empty((B * H * L,), Q.dtype)
            kern = be._raw_kernel(f"flash{em}b", src, "fm_flash_bwd_dq", ct)
            kern((nq * B * H,), (tb * tpr,), common + (dsum, GQ) + tail + (np.int64(nq),))
        if gk is not None or gv is not None:
            kern = be._raw_kernel(f"flash{em}b", src, "fm_flash_bwd_dkv", ct)
            kern((nk * B * Hk,), (tb * tpr,), common + (dsum, GK, GV) + tail + (np.int64(nk),))

    return be._served("attn_flash_bwd", go)
