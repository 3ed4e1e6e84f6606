/* Vectorisable float erf and erfc (inline, for elementwise.c and activations.c).
 *
 * |x| < 0.5: erf(x) = x P(x^2), P of degree 5 (relative error 1.2e-11 on the interval).
 * |x| >= 0.5: erfc(a) = exp(-a^2) erfcx(a), erfcx(a) = e^(a^2) erfc(a) smooth and evaluated in
 * double as a degree-11 polynomial in w = 1/(1 + a) (relative error 8e-10 for a in [0.5, 10.5];
 * beyond 10.5 erfc is below float's smallest subnormal, so a is clamped). One double division.
 * a^2 is split exactly into hi + lo (Veltkamp, no fma needed, so the SSE2 clone vectorises)
 * and exp(-a^2) = expf(-hi) (1 - lo): exp of a rounded a^2 would lose ~a^2 ulps in the tail.
 * Coefficients: least-squares fits (relative weights, Chebyshev nodes) made for this file
 * against 30-digit references. Results are within ~2 ulp of float64 references.
 */
#ifndef FIAMMA_FERF_H
#define FIAMMA_FERF_H
#include "fmath.h"

/* x*x = *hi + *lo exactly (for |x| below 2^60) */
static inline void fm_sqr2f(float x, float *hi, float *lo) {
    float c = 4097.0f * x;
    float xh = c - (c - x);
    float xl = x - xh;
    float h = x * x;
    *hi = h;
    *lo = ((xh * xh - h) + 2.0f * xh * xl) + xl * xl;
}

/* erf(x)/x for |x| < 0.5, from s = x^2 */
static inline float fm_erf_small_poly(float s) {
    float p = -7.692330911434333e-4f;
    p = p * s + 5.20027554982315e-3f;
    p = p * s - 2.6863112675394818e-2f;
    p = p * s + 1.1283773740563109e-1f;
    p = p * s - 3.761263851706185e-1f;
    return p * s + 1.1283791670819743f;
}

/* erfc(a) for a >= 0.5 (a may be larger than 10.5, or inf: the result is then 0); e2 is
   exp(-a^2) computed by the caller from an exact split of a^2 */
static inline float fm_erfc_tail(float a, float e2) {
    double ad = a < 10.5f ? (double)a : 10.5;
    double t = (1.0 / (1.0 + ad) - 0.377) * (1.0 / 0.29);
    double r = 2.6367238987090637e-06; /* erfcx(a) = exp(a^2) erfc(a) */
    r = r * t - 4.2183069229531546e-06;
    r = r * t - 1.0864429058165673e-05;
    r = r * t + 4.8920551665731264e-05;
    r = r * t - 6.208542955606937e-05;
    r = r * t - 1.8618905912905754e-04;
    r = r * t + 1.072324364215979e-03;
    r = r * t - 1.0445969707373686e-03;
    r = r * t - 1.051296882582997e-02;
    r = r * t + 3.769287116389255e-02;
    r = r * t + 2.907879260565623e-01;
    r = r * t + 2.982911153207177e-01;
    return a < 10.5f ? e2 * (float)r : 0.0f;
}

/* exp(-x^2) with x^2 split exactly (x clamped so the split cannot overflow) */
static inline float fm_expmsqf(float x) {
    float a = fabsf(x);
    a = a < 11.0f ? a : 11.0f;
    float hi, lo;
    fm_sqr2f(a, &hi, &lo);
    return fm_expf(-hi) * (1.0f - lo);
}

static inline float fm_erff(float x) {
    float a = fabsf(x);
    float small = x * fm_erf_small_poly(x * x);
    float big = copysignf(1.0f - fm_erfc_tail(a, fm_expmsqf(a)), x);
    float r = a < 0.5f ? small : big;
    return fm_isnanf(x) ? x : r;
}

static inline float fm_erfcf(float x) {
    float a = fabsf(x);
    float small = 1.0f - x * fm_erf_small_poly(x * x);
    float tail = fm_erfc_tail(a, fm_expmsqf(a));
    float big = x < 0.0f ? 2.0f - tail : tail;
    float r = a < 0.5f ? small : big;
    return fm_isnanf(x) ? x : r;
}

#endif
