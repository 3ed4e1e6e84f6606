/* Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11) and the distributions built on it.
 *
 * The key is the 64-bit seed; the counter is (block index low, block index high, 0, 0) where the
 * block index is the caller's offset plus the block number inside the call. Element i of a
 * contiguous output uses block i/4 (one 32-bit word per value: float32/16 uniforms and normals)
 * or block i/2 (one 64-bit value per value: everything else), so results depend only on
 * (seed, offset, i). Blocks are generated CHUNK at a time into a stack buffer, structure-of-
 * arrays inside the Philox rounds so the compiler vectorises across blocks, then transformed.
 */
/* No implicit a*b+c -> fma contraction: it happens only on the FMA-capable clones, so
   results would differ between machines. Explicit fma() calls are exact everywhere. */
#pragma GCC optimize("fp-contract=off")
#include <stdlib.h>

#include "dtypes.h"
#include "api_random.h"

#define PH_M0 0xD2511F53u
#define PH_M1 0xCD9E8D57u
#define PH_W0 0x9E3779B9u
#define PH_W1 0xBB67AE85u

#define CHUNK 64 /* blocks per chunk: 256 words, 1 KiB */

static inline void philox_rounds(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                                 uint32_t k0, uint32_t k1) {
    uint32_t x0 = *c0, x1 = *c1, x2 = *c2, x3 = *c3;
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PH_M0 * x0;
        uint64_t p1 = (uint64_t)PH_M1 * x2;
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
        uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
        x1 = (uint32_t)p1;
        x3 = (uint32_t)p0;
        x0 = y0;
        x2 = y2;
        k0 += PH_W0;
        k1 += PH_W1;
    }
    *c0 = x0; *c1 = x1; *c2 = x2; *c3 = x3;
}

void fm_philox4x32_10(const uint32_t *ctr, const uint32_t *key, uint32_t *out) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    philox_rounds(&c0, &c1, &c2, &c3, key[0], key[1]);
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* ---- chunks of blocks -----------------------------------------------------------------------
   philox_chunk writes the words of blocks ctr .. ctr+CHUNK-1 into w[4*CHUNK], block b's word j at
   w[4b+j]. Within a chunk the high counter word is constant unless the low word wraps (then the
   scalar path runs), so the lanes are pure 32-bit: x86 computes 8 or 16 blocks at a time with
   vpmuludq on even and odd lanes (compilers turn the scalar code into 64-bit multiplies and
   shuffles, about 5x slower). */
static void lanes_scalar(uint32_t lo, uint32_t hi, uint32_t k0, uint32_t k1, uint32_t *a0,
                         uint32_t *a1, uint32_t *a2, uint32_t *a3) {
    for (int b = 0; b < CHUNK; b++) {
        uint32_t x0 = lo + (uint32_t)b, x1 = hi, x2 = 0, x3 = 0;
        philox_rounds(&x0, &x1, &x2, &x3, k0, k1);
        a0[b] = x0; a1[b] = x1; a2[b] = x2; a3[b] = x3;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* PH_LANES(NAME, TARGET, V, W, PFX, BLEND): the 32-bit lane Philox for one vector width */
#define PH_LANES(NAME, TARGET, V, W, SET1, SETR, ADD, MUL, SRL, SLL, XOR, BLEND, STORE)    \
    __attribute__((target(TARGET))) static void NAME(uint32_t lo, uint32_t hi, uint32_t k0,  \
                                                      uint32_t k1, uint32_t *a0, uint32_t *a1, \
                                                      uint32_t *a2, uint32_t *a3) {          \
        const V m0 = SET1((int)PH_M0), m1 = SET1((int)PH_M1), z = SET1(0);                   \
        for (int b = 0; b < CHUNK; b += W) {                                                 \
            V x0 = ADD(SET1((int)(lo + (uint32_t)b)), SETR), x1 = SET1((int)hi);             \
            V x2 = z, x3 = z;                                                                \
            uint32_t q0 = k0, q1 = k1;                                                       \
            for (int r = 0; r < 10; r++) {                                                   \
                V pe0 = MUL(x0, m0), po0 = MUL(SRL(x0, 32), m0);                             \
                V pe1 = MUL(x2, m1), po1 = MUL(SRL(x2, 32), m1);                             \
                V hi0 = BLEND(SRL(pe0, 32), po0), lo0 = BLEND(pe0, SLL(po0, 32));            \
                V hi1 = BLEND(SRL(pe1, 32), po1), lo1 = BLEND(pe1, SLL(po1, 32));            \
                x0 = XOR(XOR(hi1, x1), SET1((int)q0));                                       \
                x2 = XOR(XOR(hi0, x3), SET1((int)q1));                                       \
                x1 = lo1;                                                                    \
                x3 = lo0;                                                                    \
                q0 += PH_W0;                                                                 \
                q1 += PH_W1;                                                                 \
            }                                                                                \
            STORE((void *)(a0 + b), x0); STORE((void *)(a1 + b), x1);                        \
            STORE((void *)(a2 + b), x2); STORE((void *)(a3 + b), x3);                        \
        }                                                                                    \
    }

#define B256(a, b) _mm256_blend_epi32((a), (b), 0xAA)
#define B512(a, b) _mm512_mask_blend_epi32((__mmask16)0xAAAA, (a), (b))
PH_LANES(lanes_avx2, "avx2", __m256i, 8, _mm256_set1_epi32,
         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_add_epi32, _mm256_mul_epu32,
         _mm256_srli_epi64, _mm256_slli_epi64, _mm256_xor_si256, B256, _mm256_storeu_si256)
PH_LANES(lanes_avx512, "avx512f", __m512i, 16, _mm512_set1_epi32,
         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
         _mm512_add_epi32, _mm512_mul_epu32, _mm512_srli_epi64, _mm512_slli_epi64,
         _mm512_xor_si512, B512, _mm512_storeu_si512)

typedef void (*lanes_fn)(uint32_t, uint32_t, uint32_t, uint32_t, uint32_t *, uint32_t *,
                         uint32_t *, uint32_t *);

static lanes_fn pick_lanes(void) {
    static lanes_fn fn = NULL; /* a benign race: every thread computes the same value */
    if (!fn) {
        __builtin_cpu_init();
        fn = __builtin_cpu_supports("avx512f") ? lanes_avx512
             : __builtin_cpu_supports("avx2") ? lanes_avx2 : lanes_scalar;
    }
    return fn;
}
#else
typedef void (*lanes_fn)(uint32_t, uint32_t, uint32_t, uint32_t, uint32_t *, uint32_t *,
                         uint32_t *, uint32_t *);
static lanes_fn pick_lanes(void) { return lanes_scalar; }
#endif

FM_CLONES static void interleave(const uint32_t *a0, const uint32_t *a1, const uint32_t *a2,
                                 const uint32_t *a3, uint32_t *w) {
    for (int b = 0; b < CHUNK; b++) {
        w[4 * b] = a0[b]; w[4 * b + 1] = a1[b]; w[4 * b + 2] = a2[b]; w[4 * b + 3] = a3[b];
    }
}

static void philox_chunk(uint64_t ctr, uint32_t k0, uint32_t k1, uint32_t *w) {
    const uint32_t lo = (uint32_t)ctr, hi = (uint32_t)(ctr >> 32);
    if (lo > UINT32_MAX - CHUNK) {
        for (int b = 0; b < CHUNK; b++) {
            uint64_t c = ctr + (uint64_t)b;
            uint32_t x0 = (uint32_t)c, x1 = (uint32_t)(c >> 32), x2 = 0, x3 = 0;
            philox_rounds(&x0, &x1, &x2, &x3, k0, k1);
            w[4 * b] = x0; w[4 * b + 1] = x1; w[4 * b + 2] = x2; w[4 * b + 3] = x3;
        }
        return;
    }
    _Alignas(64) uint32_t a0[CHUNK], a1[CHUNK], a2[CHUNK], a3[CHUNK];
    pick_lanes()(lo, hi, k0, k1, a0, a1, a2, a3);
    interleave(a0, a1, a2, a3, w);
}

static inline uint64_t w64(const uint32_t *w, int k) {
    return ((uint64_t)w[2 * k] << 32) | w[2 * k + 1];
}

/* y < 2^54 as a double, exactly, with bit operations only (packed uint64 -> double conversion
   needs AVX-512; this vectorises everywhere) */
static inline double small_u64_to_d(uint64_t y) {
    uint64_t b = 0x4330000000000000ull | (y & 0xFFFFFFFFFFFFFull);
    double d;
    memcpy(&d, &b, 8);
    return (d - 0x1.0p52) + (double)(int32_t)(y >> 52) * 0x1.0p52;
}

/* uniform doubles from a 64-bit draw: [0, 1), (0, 1] and (0, 1) */
static inline double u53(uint64_t x) { return small_u64_to_d(x >> 11) * 0x1.0p-53; }
static inline double u53_oc(uint64_t x) { return small_u64_to_d((x >> 11) + 1) * 0x1.0p-53; }
static inline double u53_open(uint64_t x) {
    return small_u64_to_d(((x >> 11) << 1) + 1) * 0x1.0p-54;
}

static inline uint64_t mulhi64(uint64_t a, uint64_t b) {
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
}

/* ---- vectorisable float math for Box-Muller ---------------------------------------------------
   log on (0, 1]: x = 2^e * m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1),
   |s| <= 0.172, by its odd series to s^9 (truncation error < 1e-9). */
static inline float r_logf(float x) {
    uint32_t ix;
    memcpy(&ix, &x, 4);
    ix += 0x3f800000u - 0x3f3504f3u; /* so the exponent field splits at sqrt(1/2) */
    int32_t e = (int32_t)(ix >> 23) - 127;
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    float m;
    memcpy(&m, &ix, 4);
    float s = (m - 1.0f) / (m + 1.0f);
    float z = s * s;
    float p = 2.0f / 9.0f;
    p = fmaf(p, z, 2.0f / 7.0f);
    p = fmaf(p, z, 2.0f / 5.0f);
    p = fmaf(p, z, 2.0f / 3.0f);
    p = fmaf(p, z, 2.0f);
    return fmaf((float)e, 0.693147180559945f, s * p);
}

/* sin and cos of 2*pi*u for u in [0, 1): reduce to x in [-pi/4, pi/4] plus a quadrant, Taylor
   polynomials to x^9 / x^10 (error < 2e-9), then rotate by the quadrant without branches. */
static inline void r_sincos2pi(float u, float *s_out, float *c_out) {
    float t = u - rintf(u);            /* [-1/2, 1/2] */
    float q = rintf(4.0f * t);         /* quadrant -2..2 */
    float x = (t - 0.25f * q) * 6.28318530717958648f;
    float z = x * x;
    float s = fmaf(z, 2.7557319e-6f, -1.9841270e-4f);
    s = fmaf(s, z, 8.3333333e-3f);
    s = fmaf(s, z, -1.6666667e-1f);
    s = fmaf(s * z, x, x);
    float c = fmaf(z, -2.7557319e-7f, 2.4801587e-5f);
    c = fmaf(c, z, -1.3888889e-3f);
    c = fmaf(c, z, 4.1666667e-2f);
    c = fmaf(c, z, -0.5f);
    c = fmaf(c, z, 1.0f);
    int32_t qi = (int32_t)q & 3;
    float ss = (qi & 1) ? c : s;
    float cc = (qi & 1) ? s : c;
    *s_out = (qi & 2) ? -ss : ss;
    *c_out = ((qi + 1) & 2) ? -cc : cc;
}

/* the same in double for (0, 1]: log m = 2 atanh(s) by its series to s^19 (error < 1e-17) */
static inline double r_log(double x) {
    uint64_t ix;
    memcpy(&ix, &x, 8);
    ix += 0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull;
    int64_t e = (int64_t)(ix >> 52) - 1023;
    ix = (ix & 0x000fffffffffffffull) + 0x3fe6a09e667f3bcdull;
    double m;
    memcpy(&m, &ix, 8);
    double s = (m - 1.0) / (m + 1.0);
    double z = s * s;
    double p = 2.0 / 19.0;
    p = fma(p, z, 2.0 / 17.0);
    p = fma(p, z, 2.0 / 15.0);
    p = fma(p, z, 2.0 / 13.0);
    p = fma(p, z, 2.0 / 11.0);
    p = fma(p, z, 2.0 / 9.0);
    p = fma(p, z, 2.0 / 7.0);
    p = fma(p, z, 2.0 / 5.0);
    p = fma(p, z, 2.0 / 3.0);
    double de = (double)e;
    /* ln 2 split so that e * LN2_HI is exact */
    return fma(de, 6.93147180369123816490e-01, fma(s * z, p, 2.0 * s) +
               de * 1.90821492927058770002e-10);
}

static inline void r_sincos2pi_d(double u, double *s_out, double *c_out) {
    double t = u - rint(u);
    double q = rint(4.0 * t);
    double x = (t - 0.25 * q) * 6.283185307179586477;
    double z = x * x;
    double s = 1.0 / 355687428096000.0;             /* 1/17! */
    s = fma(s, z, -1.0 / 1307674368000.0);
    s = fma(s, z, 1.0 / 6227020800.0);
    s = fma(s, z, -1.0 / 39916800.0);
    s = fma(s, z, 1.0 / 362880.0);
    s = fma(s, z, -1.0 / 5040.0);
    s = fma(s, z, 1.0 / 120.0);
    s = fma(s, z, -1.0 / 6.0);
    s = fma(s * z, x, x);
    double c = 1.0 / 20922789888000.0;              /* 1/16! */
    c = fma(c, z, -1.0 / 87178291200.0);
    c = fma(c, z, 1.0 / 479001600.0);
    c = fma(c, z, -1.0 / 3628800.0);
    c = fma(c, z, 1.0 / 40320.0);
    c = fma(c, z, -1.0 / 720.0);
    c = fma(c, z, 1.0 / 24.0);
    c = fma(c, z, -0.5);
    c = fma(c, z, 1.0);
    int64_t qi = (int64_t)q & 3;
    double ss = (qi & 1) ? c : s;
    double cc = (qi & 1) ? s : c;
    *s_out = (qi & 2) ? -ss : ss;
    *c_out = ((qi + 1) & 2) ? -cc : cc;
}

/* ---- float path: one 32-bit word per value ----------------------------------------------------
   Uniforms take the top `bits` bits (24 for float32, 11 for float16, 8 for bfloat16) so that every
   value is exact in the output dtype and below 1. Normals: Box-Muller on word pairs. */
FM_CLONES static void chunk_uniform_f(const uint32_t *w, float *v, int bits) {
    const int sh = 32 - bits;
    const float sc = 1.0f / (float)(1u << bits);
    for (int i = 0; i < 4 * CHUNK; i++) v[i] = (float)(w[i] >> sh) * sc;
}

FM_CLONES static void chunk_normal_f(const uint32_t *w, float *v, float mean, float std) {
    for (int k = 0; k < 2 * CHUNK; k++) {
        float u1 = (float)((w[2 * k] >> 8) + 1) * 0x1.0p-24f; /* (0, 1] */
        float u2 = (float)(w[2 * k + 1] >> 8) * 0x1.0p-24f;
        float r = sqrtf(-2.0f * r_logf(u1));
        float sn, cs;
        r_sincos2pi(u2, &sn, &cs);
        v[2 * k] = fmaf(std, r * cs, mean);
        v[2 * k + 1] = fmaf(std, r * sn, mean);
    }
}

/* ---- double path: one 64-bit draw per value ---------------------------------------------------- */
FM_CLONES static void chunk_uniform_d(const uint32_t *w, double *v) {
    for (int k = 0; k < 2 * CHUNK; k++) v[k] = u53(w64(w, k));
}

FM_CLONES static void chunk_normal_d(const uint32_t *w, double *v, double mean, double std) {
    for (int k = 0; k < CHUNK; k++) {
        double r = sqrt(-2.0 * r_log(u53_oc(w64(w, 2 * k))));
        double sn, cs;
        r_sincos2pi_d(u53(w64(w, 2 * k + 1)), &sn, &cs);
        v[2 * k] = fma(std, r * cs, mean);
        v[2 * k + 1] = fma(std, r * sn, mean);
    }
}

/* u53 < p exactly as an integer compare: (x >> 11) < ceil(p * 2^53) */
FM_CLONES static void chunk_bernoulli_d(const uint32_t *w, double *v, double p) {
    const uint64_t thr = (uint64_t)ceil(p * 0x1.0p53);
    for (int k = 0; k < 2 * CHUNK; k++) v[k] = (w64(w, k) >> 11) < thr ? 1.0 : 0.0;
}

FM_CLONES static void chunk_exponential_d(const uint32_t *w, double *v, double lambd) {
    const double inv = -1.0 / lambd;
    for (int k = 0; k < 2 * CHUNK; k++) v[k] = r_log(u53_oc(w64(w, k))) * inv;
}

FM_CLONES static void chunk_geometric_d(const uint32_t *w, double *v, double p) {
    const double inv = 1.0 / log1p(-p);
    for (int k = 0; k < 2 * CHUNK; k++) v[k] = ceil(r_log(u53_open(w64(w, k))) * inv);
}

static void chunk_double(int dist, const uint32_t *w, double *v, double a, double b) {
    switch (dist) {
        case FM_RAND_UNIFORM: chunk_uniform_d(w, v); break;
        case FM_RAND_NORMAL: chunk_normal_d(w, v, a, b); break;
        case FM_RAND_LOGNORMAL:
            chunk_normal_d(w, v, a, b);
            for (int k = 0; k < 2 * CHUNK; k++) v[k] = exp(v[k]);
            break;
        case FM_RAND_BERNOULLI: chunk_bernoulli_d(w, v, a); break;
        case FM_RAND_EXPONENTIAL: chunk_exponential_d(w, v, a); break;
        case FM_RAND_GEOMETRIC: chunk_geometric_d(w, v, a); break;
        case FM_RAND_CAUCHY:
            for (int k = 0; k < 2 * CHUNK; k++)
                v[k] = a + b * tan(3.141592653589793 * (u53_open(w64(w, k)) - 0.5));
            break;
    }
}

/* ---- storing a chunk ---------------------------------------------------------------------------- */
#define DEF_STORE(T)                                                                         \
    FM_CLONES static void store_f_##T(char *o, const float *v, int64_t m) {                           \
        ct_##T *oo = (ct_##T *)o;                                                            \
        for (int64_t k = 0; k < m; k++) STF_##T(&oo[k], v[k]);                               \
    }                                                                                        \
    FM_CLONES static void store_d_##T(char *o, const double *v, int64_t m) {                          \
        ct_##T *oo = (ct_##T *)o;                                                            \
        for (int64_t k = 0; k < m; k++) STF_##T(&oo[k], v[k]);                               \
    }                                                                                        \
    FM_CLONES static void store_i_##T(char *o, const int64_t *v, int64_t m) {                         \
        ct_##T *oo = (ct_##T *)o;                                                            \
        for (int64_t k = 0; k < m; k++) STI_##T(&oo[k], v[k]);                               \
    }
#define DEF_STORE_X(T, K) DEF_STORE(T)
FM_ALL_DTYPES(DEF_STORE_X)

typedef void (*store_f_fn)(char *, const float *, int64_t);
typedef void (*store_d_fn)(char *, const double *, int64_t);
typedef void (*store_i_fn)(char *, const int64_t *, int64_t);
static const store_f_fn store_f[FM_NDTYPES] = FM_TABLE(store_f_);
static const store_d_fn store_d[FM_NDTYPES] = FM_TABLE(store_d_);
static const store_i_fn store_i[FM_NDTYPES] = FM_TABLE(store_i_);

/* the value a double becomes in dtype, as a double (for the [from, to) clamp) */
static double round_to(int dtype, double x) {
    switch (dtype) {
        case FM_FLOAT16: return (double)(float)(fm_f16)(float)x;
        case FM_BFLOAT16: return (double)fm_bf16_to_f32(fm_f32_to_bf16((float)x));
        case FM_FLOAT32: return (double)(float)x;
        default: return x;
    }
}

/* the largest value of float dtype below x (x representable in dtype) */
static double below(int dtype, double x) {
    if (dtype == FM_FLOAT64) return nextafter(x, -INFINITY);
    if (dtype == FM_FLOAT32) return (double)nextafterf((float)x, -INFINITY);
    uint16_t bits;
    if (dtype == FM_FLOAT16) {
        fm_f16 h = (fm_f16)(float)x;
        memcpy(&bits, &h, 2);
    } else {
        bits = fm_f32_to_bf16((float)x);
    }
    if ((bits & 0x7fffu) == 0) bits = 0x8001u;
    else if (bits & 0x8000u) bits++;
    else bits--;
    if (dtype == FM_FLOAT16) {
        fm_f16 h;
        memcpy(&h, &bits, 2);
        return (double)(float)h;
    }
    return (double)fm_bf16_to_f32(bits);
}

/* v <- a + span * v rounded to float, kept below b */
FM_CLONES static void affine_f32(float *v, int64_t m, double a, double span, double b, float hb,
                                 int clamp) {
    for (int64_t k = 0; k < m; k++) {
        float x = (float)(a + span * (double)v[k]);
        v[k] = clamp && (double)x >= b ? hb : x;
    }
}

static int uses_float_path(int dist, int dtype) {
    return (dist == FM_RAND_UNIFORM || dist == FM_RAND_NORMAL) && fm_is_float(dtype) &&
           dtype != FM_FLOAT64;
}

int64_t fm_rand_blocks(int dist, int dtype, int64_t n) {
    if (n <= 0) return 0;
    if (dist != FM_RAND_BITS64 && fm_dtype_ok(dtype) && uses_float_path(dist, dtype))
        return (n + 3) / 4;
    return (n + 1) / 2;
}

int fm_rand_fill(int dist, int dtype, int64_t n, intptr_t out, uint64_t seed, uint64_t offset,
                 double a, double b) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (dist < FM_RAND_UNIFORM || dist > FM_RAND_CAUCHY) return FM_ERR_OP;
    if (n < 0) return FM_ERR_ARG;
    if ((dist == FM_RAND_UNIFORM || dist == FM_RAND_NORMAL || dist == FM_RAND_LOGNORMAL ||
         dist == FM_RAND_EXPONENTIAL || dist == FM_RAND_CAUCHY) && !fm_is_float(dtype))
        return FM_ERR_DTYPE;
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    const int isz = fm_itemsize[dtype];
    char *o = (char *)out;
    uint32_t w[4 * CHUNK];
    /* uniform [a, b): a result that rounds up to b is moved to the largest value below it */
    const int clamp = dist == FM_RAND_UNIFORM && a < b;
    const double hb = clamp ? (round_to(dtype, b) >= b ? below(dtype, round_to(dtype, b))
                                                       : round_to(dtype, b)) : 0.0;
    const int unit = dist == FM_RAND_UNIFORM && a == 0.0 && b == 1.0;
    if (uses_float_path(dist, dtype)) {
        float v[4 * CHUNK];
        const int bits = dtype == FM_FLOAT32 ? 24 : dtype == FM_FLOAT16 ? 11 : 8;
        for (int64_t i = 0; i < n; i += 4 * CHUNK, offset += CHUNK) {
            int64_t m = n - i < 4 * CHUNK ? n - i : 4 * CHUNK;
            philox_chunk(offset, k0, k1, w);
            if (dist == FM_RAND_NORMAL) {
                chunk_normal_f(w, v, (float)a, (float)b);
            } else {
                chunk_uniform_f(w, v, bits);
                if (!unit && dtype == FM_FLOAT32) {
                    affine_f32(v, m, a, b - a, b, (float)hb, clamp);
                } else if (!unit) {
                    for (int64_t k = 0; k < m; k++) {
                        double x = round_to(dtype, a + (b - a) * (double)v[k]);
                        v[k] = (float)(clamp && x >= b ? hb : x);
                    }
                }
            }
            store_f[dtype](o + i * isz, v, m);
        }
        return FM_OK;
    }
    double v[2 * CHUNK];
    for (int64_t i = 0; i < n; i += 2 * CHUNK, offset += CHUNK) {
        int64_t m = n - i < 2 * CHUNK ? n - i : 2 * CHUNK;
        philox_chunk(offset, k0, k1, w);
        chunk_double(dist, w, v, a, b);
        if (dist == FM_RAND_UNIFORM && !unit) {
            for (int64_t k = 0; k < m; k++) {
                double x = a + (b - a) * v[k];
                v[k] = clamp && x >= b ? hb : x;
            }
        }
        store_d[dtype](o + i * isz, v, m);
    }
    return FM_OK;
}

int fm_rand_int(int dtype, int64_t n, intptr_t out, uint64_t seed, uint64_t offset,
                int64_t low, uint64_t range) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    const int isz = fm_itemsize[dtype];
    uint32_t w[4 * CHUNK];
    int64_t v[2 * CHUNK];
    for (int64_t i = 0; i < n; i += 2 * CHUNK, offset += CHUNK) {
        int64_t m = n - i < 2 * CHUNK ? n - i : 2 * CHUNK;
        philox_chunk(offset, k0, k1, w);
        /* multiply-shift: floor(x * range / 2^64), bias at most range / 2^64 */
        if (range)
            for (int k = 0; k < 2 * CHUNK; k++)
                v[k] = (int64_t)((uint64_t)low + mulhi64(w64(w, k), range));
        else
            for (int k = 0; k < 2 * CHUNK; k++) v[k] = (int64_t)((uint64_t)low + w64(w, k));
        store_i[dtype]((char *)out + i * isz, v, m);
    }
    return FM_OK;
}

int fm_rand_bernoulli_p(int dtype, int64_t n, intptr_t out, intptr_t p, uint64_t seed,
                        uint64_t offset, int64_t *bad) {
    if (!fm_dtype_ok(dtype)) return FM_ERR_DTYPE;
    if (n < 0) return FM_ERR_ARG;
    const double *pp = (const double *)p;
    for (int64_t i = 0; i < n; i++) {
        if (!(pp[i] >= 0.0 && pp[i] <= 1.0)) {
            *bad = i;
            return FM_ERR_VALUE;
        }
    }
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    const int isz = fm_itemsize[dtype];
    uint32_t w[4 * CHUNK];
    int64_t v[2 * CHUNK];
    for (int64_t i = 0; i < n; i += 2 * CHUNK, offset += CHUNK) {
        int64_t m = n - i < 2 * CHUNK ? n - i : 2 * CHUNK;
        philox_chunk(offset, k0, k1, w);
        for (int64_t k = 0; k < m; k++) v[k] = u53(w64(w, (int)k)) < pp[i + k];
        store_i[dtype]((char *)out + i * isz, v, m);
    }
    return FM_OK;
}

int fm_randperm(int64_t n, intptr_t out, uint64_t seed, uint64_t offset) {
    if (n < 0) return FM_ERR_ARG;
    int64_t *o = (int64_t *)out;
    for (int64_t i = 0; i < n; i++) o[i] = i;
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t w[4 * CHUNK];
    /* draw d (d = 0 .. n-2) picks the swap partner of position n-1-d among 0 .. n-1-d */
    for (int64_t d0 = 0; d0 < n - 1; d0 += 2 * CHUNK, offset += CHUNK) {
        philox_chunk(offset, k0, k1, w);
        int64_t m = n - 1 - d0 < 2 * CHUNK ? n - 1 - d0 : 2 * CHUNK;
        for (int64_t k = 0; k < m; k++) {
            int64_t i = n - 1 - (d0 + k);
            int64_t j = (int64_t)mulhi64(w64(w, (int)k), (uint64_t)i + 1);
            int64_t t = o[i];
            o[i] = o[j];
            o[j] = t;
        }
    }
    return FM_OK;
}

/* ---- multinomial -------------------------------------------------------------------------------- */

typedef struct {
    double key;
    int64_t idx;
} mn_item;

/* heap order: the root is the worst kept item (smallest key, larger index on ties) */
static inline int mn_worse(const mn_item *a, const mn_item *b) {
    return a->key < b->key || (a->key == b->key && a->idx > b->idx);
}

static void mn_sift_down(mn_item *h, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && mn_worse(&h[l], &h[m])) m = l;
        if (r < n && mn_worse(&h[r], &h[m])) m = r;
        if (m == i) return;
        mn_item t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

int fm_multinomial(int64_t rows, int64_t ncat, intptr_t probs, int64_t nsamp, int replacement,
                   intptr_t out, uint64_t seed, uint64_t offset, int64_t *info) {
    if (rows < 0 || ncat <= 0 || nsamp < 0) return FM_ERR_ARG;
    if (!replacement && nsamp > ncat) return FM_ERR_ARG;
    const double *P = (const double *)probs;
    int64_t *O = (int64_t *)out;
    /* validate every row before drawing anything */
    for (int64_t r = 0; r < rows; r++) {
        const double *p = P + r * ncat;
        double sum = 0.0;
        int64_t nz = 0;
        for (int64_t c = 0; c < ncat; c++) {
            if (!(p[c] >= 0.0 && p[c] < INFINITY)) {
                info[0] = r; info[1] = 1;
                return FM_ERR_VALUE;
            }
            sum += p[c];
            nz += p[c] > 0.0;
        }
        if (!(sum > 0.0)) {
            info[0] = r; info[1] = 2;
            return FM_ERR_VALUE;
        }
        if (!replacement && nz < nsamp) {
            info[0] = r; info[1] = 3;
            return FM_ERR_VALUE;
        }
    }
    if (rows == 0 || nsamp == 0) return FM_OK;
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    uint32_t w[4 * CHUNK];
    if (replacement) {
        double *cdf = (double *)malloc((size_t)ncat * sizeof(double));
        if (!cdf) return FM_ERR_NOMEM;
        uint64_t d = 0; /* draw number; its chunk is generated when d crosses a chunk boundary */
        for (int64_t r = 0; r < rows; r++) {
            const double *p = P + r * ncat;
            double acc = 0.0;
            for (int64_t c = 0; c < ncat; c++) cdf[c] = acc += p[c];
            for (int64_t s = 0; s < nsamp; s++, d++) {
                if (d % (2 * CHUNK) == 0) philox_chunk(offset + d / 2, k0, k1, w);
                double x = u53(w64(w, (int)(d % (2 * CHUNK)))) * acc;
                int64_t lo = 0, hi = ncat - 1; /* first c with cdf[c] > x */
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (cdf[mid] > x) hi = mid; else lo = mid + 1;
                }
                while (lo > 0 && p[lo] == 0.0) lo--; /* never a zero-probability category */
                O[r * nsamp + s] = lo;
            }
        }
        free(cdf);
        return FM_OK;
    }
    /* without replacement (Efraimidis-Spirakis): key_c = log(u_c) / p_c; the nsamp largest keys,
       in decreasing order, are a sample drawn one at a time without replacement */
    mn_item *h = (mn_item *)malloc((size_t)nsamp * sizeof(mn_item));
    if (!h) return FM_ERR_NOMEM;
    uint64_t d = 0; /* draw number: category c of row r uses draw r*ncat + c */
    for (int64_t r = 0; r < rows; r++) {
        const double *p = P + r * ncat;
        int64_t hn = 0;
        for (int64_t c = 0; c < ncat; c++, d++) {
            if (d % (2 * CHUNK) == 0) philox_chunk(offset + d / 2, k0, k1, w);
            if (p[c] == 0.0) continue;
            mn_item it = {log(u53_oc(w64(w, (int)(d % (2 * CHUNK))))) / p[c], c};
            if (hn < nsamp) {
                h[hn++] = it;
                if (hn == nsamp)
                    for (int64_t i = nsamp / 2 - 1; i >= 0; i--) mn_sift_down(h, nsamp, i);
            } else if (mn_worse(&h[0], &it)) {
                h[0] = it;
                mn_sift_down(h, nsamp, 0);
            }
        }
        /* pop worst-first into the row from the back: best ends up first */
        for (int64_t k = nsamp - 1; k >= 0; k--) {
            O[r * nsamp + k] = h[0].idx;
            h[0] = h[k];
            mn_sift_down(h, k, 0);
        }
    }
    free(h);
    return FM_OK;
}
