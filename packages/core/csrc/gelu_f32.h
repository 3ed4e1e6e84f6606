/* Exact float32 GELU forward and backward loops, included by activations.c once per ISA level:
 * GF(name) suffixes the names, GELU_TARGET is the target attribute, GELU_FMA says whether fused
 * multiply-add is a single instruction there (x86-64-v3 and up, aarch64): with it, two steps
 * are exact for a few instructions; without it they are done with a split of u (slower, and up
 * to ~6 ulp instead of ~4.1).
 *
 * Phi(x) = 1 - h for x >= 0 and h for x < 0, with u = |x| and
 *   h = erfc(u / sqrt2) / 2 = exp(-u^2 / 2) * G(u) / 2,   G(u) = erfcx(u / sqrt2),
 * G smooth on [0, inf) (1 at 0, ~sqrt(2/pi)/u at infinity); no cancellation anywhere, so the
 * negative tail keeps its relative accuracy down to float's subnormals (u clamped at 14.5,
 * where h is below them). exp(-u^2/2): with FMA, r = fma(-u/2, u, -n ln2_hi) is exact to
 * ~2^-26; without, u = uh + ul with uh on 12 bits makes -uh^2/2 exact and the rest a small
 * correction added to r. The exponent is rebased by 2^64 so every intermediate stays normal
 * and the result is rounded once, at the end, into the subnormal range.
 * G(u) = w q(t), w = K / (u + K), t = 1 - 2w in [-1, 0.61], q of degree 9 (relative error
 * 7e-9 on [0, 14.5]; a least-squares fit with relative weights reweighted towards minimax,
 * made for this file against scipy's erfcx). G is sensitive to rounding in w (an error in w is
 * an error in u, amplified ~2x): with FMA the division's residual fma(-w, s, K) and the
 * rounding of s = u + K (Fast2Sum) give w to ~2^-40.
 */

#define GK 3.5f
#define GUMAX 14.5f

/* returns h = erfc(u / sqrt2) / 2 and sets *es = exp(-u^2 / 2) * 2^64, for u in [0, GUMAX] */
GELU_TARGET static inline float GF(gelu_half_erfc)(float u, float *es) {
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding and subtracting rounds to integer */
#if GELU_FMA
    float hu = -0.5f * u;
    float n = ((hu * u) * 1.44269504088896341f + shift) - shift;
    float r = __builtin_fmaf(hu, u, n * -0.693359375f);
    r = __builtin_fmaf(n, 2.12194440e-4f, r);
#else
    float uh = fm_bits_to_f(fm_f_to_bits(u) & 0xfffff000u);
    float ul = u - uh;
    float m = (-0.5f * uh) * uh;         /* exact */
    float l = (-0.5f * ul) * (u + uh);   /* -u^2/2 - m, small */
    float n = ((m + l) * 1.44269504088896341f + shift) - shift;
    float r = n * -0.693359375f + m;     /* exact (n ln2_hi has 17 bits) */
    r = n * 2.12194440e-4f + r;
    r = r + l;
#endif
    /* e^r on |r| <= 0.36: 1 + r + r^2 P(r), relative error 4e-9 */
    float p = 1.3809860613e-03f;
    p = p * r + 8.3714949951e-03f;
    p = p * r + 4.1668648369e-02f;
    p = p * r + 1.6666496851e-01f;
    p = p * r + 4.9999991871e-01f;
    p = p * (r * r) + r + 1.0f;
    int32_t ni = (int32_t)n; /* in [-152, 0] */
    float e = p * fm_bits_to_f((uint32_t)(ni + 64 + 127) << 23);
    *es = e;
    float s = u + GK;
    float w = GK / s;
#if GELU_FMA
    float big = u > GK ? u : GK, sml = u > GK ? GK : u;
    float sl = sml - (s - big);              /* u + K = s + sl exactly */
    float rho = __builtin_fmaf(-w, s, GK);   /* K - w s exactly */
    float wl = (rho - w * sl) * (w * (1.0f / GK));
    float t = (1.0f - 2.0f * w) - 2.0f * wl;
    w = w + wl;
#else
    float t = 1.0f - 2.0f * w;
#endif
    /* q's coefficients carry the 1/2 of h and the 2^-64 that undoes e's rebasing */
    const float S = 2.710505431213761e-20f; /* 2^-65 */
    float q = 6.325305437e-05f * S;
    q = q * t + 2.410872294e-04f * S;
    q = q * t - 2.828261016e-04f * S;
    q = q * t - 1.814465699e-03f * S;
    q = q * t + 3.710352132e-03f * S;
    q = q * t + 9.946502645e-03f * S;
    q = q * t - 6.631602333e-02f * S;
    q = q * t + 1.802428849e-01f * S;
    q = q * t - 3.231781401e-01f * S;
    q = q * t + 4.253806138e-01f * S;
    return e * (w * q);
}

/* x clamped at -GUMAX keeps -inf out of the product with a zero h (NaN stays NaN) */
GELU_TARGET static void GF(gelu_fwd_f)(int64_t n, const float *FM_RESTRICT x,
                                       float *FM_RESTRICT y) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], es;
        float u = fabsf(v);
        u = u < GUMAX ? u : GUMAX; /* NaN -> GUMAX; v carries the NaN */
        float h = GF(gelu_half_erfc)(u, &es);
        float phi = v < 0.0f ? h : 1.0f - h;
        float vc = v < -GUMAX ? -GUMAX : v;
        y[i] = vc * phi;
    }
}

/* gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi), from Phi and es (gelu_half_erfc's
   rebased exp); the limits beyond GUMAX (x phi(x) at the clamp is still a subnormal, and inf * 0
   would be NaN) */
GELU_TARGET static inline float GF(gelu_slope)(float v, float phi, float es) {
    float d = phi + v * es * (float)(INV_SQRT_2PI * 5.421010862427522e-20);
    d = v < -GUMAX ? 0.0f : d;
    return v > GUMAX ? 1.0f : d;
}

GELU_TARGET static void GF(gelu_bwd_f)(int64_t n, const float *FM_RESTRICT g,
                                       const float *FM_RESTRICT x, float *FM_RESTRICT gx) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], es;
        float u = fabsf(v);
        u = u < GUMAX ? u : GUMAX;
        float h = GF(gelu_half_erfc)(u, &es);
        float phi = v < 0.0f ? h : 1.0f - h;
        gx[i] = g[i] * GF(gelu_slope)(v, phi, es);
    }
}

/* the forward and the derivative in one pass (for the backward of a recorded gelu: there
   it is one product g * d, the same rounding as gelu_bwd_f's g[i] * d) */
GELU_TARGET static void GF(gelu_fwdd_f)(int64_t n, const float *FM_RESTRICT x,
                                        float *FM_RESTRICT y, float *FM_RESTRICT dy) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], es;
        float u = fabsf(v);
        u = u < GUMAX ? u : GUMAX;
        float h = GF(gelu_half_erfc)(u, &es);
        float phi = v < 0.0f ? h : 1.0f - h;
        float vc = v < -GUMAX ? -GUMAX : v;
        y[i] = vc * phi;
        dy[i] = GF(gelu_slope)(v, phi, es);
    }
}

#undef GK
#undef GUMAX
