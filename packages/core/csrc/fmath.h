/* Vectorisable float math: branch-free inline functions the compiler can turn into SIMD loops
 * (glibc's expf/logf are scalar calls unless built with -ffast-math, which fiamma avoids because
 * it breaks NaN/inf semantics).
 *
 * fm_expf: range reduction x = n*ln2 + r (ln2 split in two parts so r is exact), a degree-6
 * polynomial for e^r on [-ln2/2, ln2/2] (Cephes' minimax coefficients), and a scale by 2^n done in
 * two halves through the exponent bits so that subnormal results and overflow to inf come out
 * right. Max error about 1 ulp over the whole float range; NaN propagates.
 */
#ifndef FIAMMA_FMATH_H
#define FIAMMA_FMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float fm_pow2i_f(int32_t n) { /* 2^n for n in [-126, 127] */
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float fm_expf(float x) {
    float xc = fminf(fmaxf(x, -104.0f), 89.0f);
    float n = rintf(xc * 1.44269504088896341f);
    float r = fmaf(n, -0.693359375f, xc);
    r = fmaf(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    int32_t ni = (int32_t)n;
    int32_t n1 = ni / 2;
    float res = p * fm_pow2i_f(n1) * fm_pow2i_f(ni - n1);
    return x != x ? x : res;
}

#endif
