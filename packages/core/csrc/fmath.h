/* Vectorisable float math: branch-free inline functions the compiler turns into SIMD loops.
 *
 * glibc's expf/logf/tanhf are scalar calls unless built with -ffast-math, which fiamma avoids
 * because it breaks NaN/inf semantics. Everything here is written so that GCC if-converts every
 * select (ternaries on values computed unconditionally, no early returns, no calls to fminf /
 * fmaxf, which are real calls without -ffinite-math-only) and vectorises the loops that use
 * them in the x86-64-v3/v4 clones (checked with -fopt-info-vec and objdump).
 *
 * Accuracy (max error vs a float64 reference over the whole float range, see
 * tests/test_elementwise.py): fm_expf 1 ulp, fm_logf 1 ulp, fm_expm1f 2 ulp, fm_log1pf 2.5 ulp,
 * fm_tanhf 1.5 ulp, fm_sigmoidf 2.5 ulp, fm_sinf / fm_cosf 1.5 ulp (|x| <= 1e6).
 * NaN propagates, +-inf and the overflow / underflow limits give the IEEE results.
 */
#ifndef FIAMMA_FMATH_H
#define FIAMMA_FMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float fm_bits_to_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t fm_f_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* NaN test on the bits: GCC narrows `x != x` on a float widened from _Float16 into a half
   compare, which is a libcall (__nehf2) without AVX512-FP16 and stops vectorisation */
static inline int fm_isnanf(float x) { return (fm_f_to_bits(x) & 0x7fffffffu) > 0x7f800000u; }

static inline float fm_pow2i_f(int32_t n) { /* 2^n for n in [-126, 127] */
    return fm_bits_to_f((uint32_t)(n + 127) << 23);
}

/* float16 <-> float32 on the bits, with integer ops the vectoriser handles (GCC 12 cannot
   vectorise _Float16 loads and stores without AVX512-FP16, so loops over _Float16 stay scalar).
   Half -> float: the exponent and mantissa shifted into place and scaled by 2^112 (which also
   normalises subnormals); inf/NaN get the full exponent. Float -> half rounds to nearest even:
   normal results by adding half an ulp (0xfff + the lsb) before the shift, subnormal results by
   adding 0.5f so the FPU rounds at the half-subnormal spacing 2^-24; overflow gives inf. */
static inline float fm_h2f(uint16_t h) {
    uint32_t em = h & 0x7fffu;
    uint32_t bits = fm_f_to_bits(fm_bits_to_f(em << 13) * 5.192296858534828e33f); /* 2^112 */
    bits = em >= 0x7c00u ? ((em << 13) | 0x7f800000u) : bits;
    return fm_bits_to_f(bits | ((uint32_t)(h & 0x8000u) << 16));
}

static inline uint16_t fm_f2h(float f) {
    uint32_t x = fm_f_to_bits(f);
    uint32_t a = x & 0x7fffffffu;
    uint32_t norm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    uint32_t sub = fm_f_to_bits(fm_bits_to_f(a) + 0.5f) - 0x3f000000u;
    uint32_t r = a < 0x38800000u ? sub : norm;
    r = a >= 0x477ff000u ? 0x7c00u : r;
    r = a > 0x7f800000u ? 0x7e00u : r;
    return (uint16_t)(r | ((x >> 16) & 0x8000u));
}

/* e^x: x = n*ln2 + r with ln2 split in two so r is exact, e^r on [-ln2/2, ln2/2] by a degree-6
   minimax polynomial (Cephes' coefficients), and the scale by 2^n done in two halves through
   the exponent bits so subnormal results and overflow to inf come out right. Rounding to the
   nearest integer adds and subtracts 1.5*2^23 (no roundps needed, so the SSE2 clone vectorises
   too). NaN is clamped to a finite value first so the float->int conversion is defined; the
   final select puts it back. */
static inline float fm_expf(float x) {
    float xc = x > -104.0f ? x : -104.0f;
    xc = xc < 89.0f ? xc : 89.0f;
    const float shift = 12582912.0f;
    float n = (xc * 1.44269504088896341f + shift) - shift;
    float r = n * -0.693359375f + xc;
    r = n * 2.12194440e-4f + r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t ni = (int32_t)n;
    int32_t n1 = ni >> 1;
    float res = p * fm_pow2i_f(n1) * fm_pow2i_f(ni - n1);
    return fm_isnanf(x) ? x : res;
}

/* natural log: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 P(f) with
   f = m - 1 (Cephes' degree-8 minimax coefficients), e*ln2 added in two parts. Subnormal inputs
   are scaled by 2^23 first. x < 0 -> NaN, 0 -> -inf, inf -> inf, NaN -> NaN. */
static inline float fm_logf(float x) {
    int sub = x < 1.17549435e-38f; /* also true for 0 and negatives, fixed up at the end */
    float xs = sub ? x * 8388608.0f : x;
    uint32_t u = fm_f_to_bits(xs);
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 127 - (sub ? 23 : 0);
    float m = fm_bits_to_f((u & 0x007fffffu) | 0x3f800000u); /* [1, 2) */
    int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    e += big;
    float f = m - 1.0f;
    float z = f * f;
    float p = 7.0376836292e-2f;
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    float fe = (float)e;
    float y = p * f * z;
    y = fe * -2.12194440e-4f + y;
    y = z * -0.5f + y;
    float res = f + y;
    res = fe * 0.693359375f + res;
    res = x == INFINITY ? x : res;
    res = x == 0.0f ? -INFINITY : res;
    res = x < 0.0f ? NAN : res;
    return fm_isnanf(x) ? x : res;
}

/* e^x - 1 with the reduction of fm_expf: e^x - 1 = 2^n (e^r - 1) + (2^n - 1), where e^r - 1 is
   the polynomial without its leading 1, so small |x| (n = 0) keeps full relative accuracy. Above
   n = 24 the -1 is below half an ulp and the exp scaling is used; below n = -30 the result
   rounds to -1. */
static inline float fm_expm1f(float x) {
    float xc = x > -104.0f ? x : -104.0f;
    xc = xc < 89.0f ? xc : 89.0f;
    const float shift = 12582912.0f;
    float n = (xc * 1.44269504088896341f + shift) - shift;
    float r = n * -0.693359375f + xc;
    r = n * 2.12194440e-4f + r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float em1 = p * (r * r) + r;
    int32_t ni = (int32_t)n;
    int32_t n1 = ni >> 1;
    float big = (em1 + 1.0f) * fm_pow2i_f(n1) * fm_pow2i_f(ni - n1);
    float t = fm_pow2i_f(ni < -30 ? -30 : (ni > 30 ? 30 : ni));
    float mid = em1 * t + (t - 1.0f);
    float res = ni > 24 ? big : mid;
    res = x == 0.0f ? x : res; /* keeps the sign of -0 */
    return fm_isnanf(x) ? x : res;
}

/* log(1 + x) = log(u) * x / (u - 1) with u = 1 + x rounded: the quotient corrects the rounding
   of u (exact when u == 1, where the answer is x itself) */
static inline float fm_log1pf(float x) {
    float u = 1.0f + x;
    float d = u - 1.0f;
    float res = fm_logf(u) * (x / (d == 0.0f ? 1.0f : d));
    res = d == 0.0f ? x : res;
    return x == INFINITY ? x : res;
}

/* sin and cos for |x| <= FM_TRIG_MAX: x = j*pi/2 + r with the reduction in double (pi/2 in
   three parts of at most 32 bits, so each j*part is exact for |j| < 2^21), then Cephes' minimax
   polynomials for sin and cos on [-pi/4, pi/4] in float, picked and signed by the quadrant j
   mod 4. Larger |x|, inf and NaN are left to libm by the caller (see DEF_UN_FIX). */
#define FM_TRIG_MAX 1.0e6f

static inline float fm_trig_reduce(float x, int32_t *q) {
    const double shift = 6755399441055744.0; /* 1.5 * 2^52: rounds to an integer */
    double xd = x;
    double j = (xd * 0.63661977236758134308 + shift) - shift;
    double r = xd - j * 1.57079632673412561417e+00;
    r = r - j * 6.07710050630396597660e-11;
    r = r - j * 2.02226624871116645580e-21;
    *q = (int32_t)j;
    return (float)r;
}

static inline float fm_sin_poly(float r, float z) {
    return ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
}

static inline float fm_cos_poly(float z) {
    return ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) *
               z * z - 0.5f * z + 1.0f;
}

static inline float fm_sinf(float x) {
    int32_t q;
    float r = fm_trig_reduce(x, &q);
    float z = r * r;
    float s = fm_sin_poly(r, z), c = fm_cos_poly(z);
    float res = (q & 1) ? c : s;
    res = (q & 2) ? -res : res;
    return x == 0.0f ? x : res; /* keeps the sign of -0 */
}

static inline float fm_cosf(float x) {
    int32_t q;
    float r = fm_trig_reduce(x, &q);
    float z = r * r;
    float s = fm_sin_poly(r, z), c = fm_cos_poly(z);
    float res = (q & 1) ? s : c;
    return ((q + 1) & 2) ? -res : res;
}

/* tanh: an odd polynomial below |x| = 0.625 (Cephes' coefficients), 1 - 2/(e^{2|x|} + 1) with
   the sign of x above (e^{2|x|} overflowing to inf gives exactly +-1). */
static inline float fm_tanhf(float x) {
    float a = fabsf(x);
    float e = fm_expf(2.0f * a);
    float big = copysignf(1.0f - 2.0f / (e + 1.0f), x);
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = x * z * p + x;
    float r = a < 0.625f ? small : big;
    return x == 0.0f ? x : r; /* keeps the sign of -0 */
}

/* logistic sigmoid from e = e^-|x|: 1 / (1 + e) for x >= 0, e / (1 + e) below, so results
   down to the subnormal range keep their relative accuracy (1 / (1 + e^-x) gives 0 once e^-x
   overflows, below x = -88.7) */
static inline float fm_sigmoidf(float x) {
    float e = fm_expf(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

#endif
