/* The stft kernel for one float type, included by fft.c with ST (the type), NL (lanes: frames
 * transformed together, one SIMD register of ST) and F(name) (the suffixed name).
 *
 * Layout: a block of NL frames is transformed at once, "structure of arrays": complex element e
 * of lane l is (re[e*NL + l], im[e*NL + l]), so every butterfly is a loop over the NL lanes that
 * the compiler vectorises, and lane l's output bins land next to lane l+1's (consecutive frames
 * are consecutive in the (freq, frames) output layout).
 *
 * The complex FFT is a self-sorting (Stockham) decimation-in-frequency FFT: stage with radix p
 * on a length-n sub-problem at stride s reads a_r = x[q + s*(j + r*m)] (m = n/p) and writes
 * y[q + s*(p*j + k)] = w_n^(j*k) * sum_r a_r w_p^(r*k); the next stage works on length m at
 * stride s*p. After the last stage the result is in natural order.
 *
 * A real frame of even length N is packed as N/2 complex values z_j = x_2j + i x_2j+1, whose
 * FFT Z gives X_k = (Z_k + conj Z_{M-k})/2 - i w_N^k (Z_k - conj Z_{M-k})/2 (M = N/2). Odd N
 * goes through a complex FFT of length N with zero imaginary parts. */

typedef struct {
    int nst;
    int p[64];
    int64_t m[64], s[64];
    ST *tw[64];  /* stage twiddles w_n^(j*k), (re, im) at [(j*(p-1) + k-1)*2] */
    ST *wp[64];  /* radix > 5: w_p^r, (re, im) at [2r] */
    ST *post;    /* even N: w_N^k for k = 0..M, (re, im) pairs */
    ST *mem;
} F(plan_t);

static void F(plan_free)(F(plan_t) *P) { free(P->mem); }

/* The plan of a complex FFT of length M (and the post-processing table of a real FFT of length
   N = 2M when real_even). */
static int F(plan_make)(F(plan_t) *P, int64_t M, int real_even) {
    int64_t rest = M, n = M, s = 1, total = 0;
    P->nst = 0;
    while (rest > 1) {
        int p;
        if (rest % 4 == 0) p = 4;
        else if (rest % 2 == 0) p = 2;
        else if (rest % 3 == 0) p = 3;
        else if (rest % 5 == 0) p = 5;
        else {
            int64_t f = 7;
            while (f * f <= rest && rest % f) f += 2;
            p = (int)(rest % f == 0 ? f : rest);
        }
        if (P->nst == 64) return FM_ERR_ARG;
        int64_t m = n / p;
        P->p[P->nst] = p;
        P->m[P->nst] = m;
        P->s[P->nst] = s;
        total += 2 * m * (p - 1) + (p > 5 ? 2 * p : 0);
        P->nst++;
        rest /= p;
        n = m;
        s *= p;
    }
    total += real_even ? 2 * (M + 1) : 0;
    P->mem = malloc((size_t)(total ? total : 1) * sizeof(ST));
    if (!P->mem) return FM_ERR_NOMEM;
    ST *t = P->mem;
    n = M;
    for (int st = 0; st < P->nst; st++) {
        int p = P->p[st];
        int64_t m = P->m[st];
        P->tw[st] = t;
        for (int64_t j = 0; j < m; j++)
            for (int k = 1; k < p; k++) {
                /* exact angle from the integer product reduced mod n */
                double a = -2.0 * M_PI * (double)((j * k) % n) / (double)n;
                *t++ = (ST)cos(a);
                *t++ = (ST)sin(a);
            }
        P->wp[st] = NULL;
        if (p > 5) {
            P->wp[st] = t;
            for (int r = 0; r < p; r++) {
                double a = -2.0 * M_PI * r / p;
                *t++ = (ST)cos(a);
                *t++ = (ST)sin(a);
            }
        }
        n = m;
    }
    P->post = NULL;
    if (real_even) {
        P->post = t;
        for (int64_t k = 0; k <= M; k++) {
            double a = -M_PI * (double)k / (double)M;
            *t++ = (ST)cos(a);
            *t++ = (ST)sin(a);
        }
    }
    return FM_OK;
}

typedef ST F(vec) __attribute__((vector_size(NL * sizeof(ST))));
#define VT F(vec)
#define LD(p) (*(const VT *)(p))
#define SV(p) (*(VT *)(p))
#define LANES for (int l = 0; l < NL; l++)

/* Two-vector shuffles: interleave the low / high halves, pick even / odd elements. */
#if NL == 16
#define IDX_LO 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define IDX_HI 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
#define IDX_EV 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define IDX_OD 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
typedef int32_t F(ivec) __attribute__((vector_size(64)));
#else
#define IDX_LO 0, 8, 1, 9, 2, 10, 3, 11
#define IDX_HI 4, 12, 5, 13, 6, 14, 7, 15
#define IDX_EV 0, 2, 4, 6, 8, 10, 12, 14
#define IDX_OD 1, 3, 5, 7, 9, 11, 13, 15
typedef int64_t F(ivec) __attribute__((vector_size(64)));
#endif
#ifdef __clang__
#define SHUF(a, b, idx) __builtin_shufflevector(a, b, idx)
#else
#define SHUF(a, b, idx) __builtin_shuffle(a, b, (F(ivec)){idx})
#endif

static inline __attribute__((always_inline)) VT F(ldu)(const ST *p) {
    VT v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* r[i][l] <- r[l][i] for an NL x NL tile: log2(NL) rounds of interleaving row i with row
   i + NL/2. */
static inline __attribute__((always_inline)) void F(transpose)(VT *r) {
    for (int round = 1; round < NL; round *= 2) {
        VT t[NL];
        for (int i = 0; i < NL / 2; i++) {
            t[2 * i] = SHUF(r[i], r[i + NL / 2], IDX_LO);
            t[2 * i + 1] = SHUF(r[i], r[i + NL / 2], IDX_HI);
        }
        for (int i = 0; i < NL; i++) r[i] = t[i];
    }
}

/* store (br, bi) * w at output offset o */
#define CSTORE(o, br, bi, w)                                               \
    do {                                                                   \
        const ST wr_ = (w)[0], wi_ = (w)[1];                               \
        SV(yr + (o)) = (br) * wr_ - (bi) * wi_;                            \
        SV(yi + (o)) = (br) * wi_ + (bi) * wr_;                            \
    } while (0)

FM_CLONES static void F(stage)(const F(plan_t) *P, int st, const ST *FM_RESTRICT xr,
                               const ST *FM_RESTRICT xi, ST *FM_RESTRICT yr,
                               ST *FM_RESTRICT yi) {
    const int p = P->p[st];
    const int64_t m = P->m[st], s = P->s[st];
    const ST *tw = P->tw[st];
    const int64_t di = s * m * NL, dout = s * NL;
    for (int64_t j = 0; j < m; j++) {
        const ST *w = tw + j * (p - 1) * 2;
        for (int64_t q = 0; q < s; q++) {
            const int64_t i0 = (q + s * j) * NL, o0 = (q + s * p * j) * NL;
            if (p == 4) {
                VT a0r = LD(xr + i0), a0i = LD(xi + i0);
                VT a1r = LD(xr + i0 + di), a1i = LD(xi + i0 + di);
                VT a2r = LD(xr + i0 + 2 * di), a2i = LD(xi + i0 + 2 * di);
                VT a3r = LD(xr + i0 + 3 * di), a3i = LD(xi + i0 + 3 * di);
                VT t0r = a0r + a2r, t0i = a0i + a2i, t1r = a0r - a2r, t1i = a0i - a2i;
                VT t2r = a1r + a3r, t2i = a1i + a3i, t3r = a1r - a3r, t3i = a1i - a3i;
                SV(yr + o0) = t0r + t2r;
                SV(yi + o0) = t0i + t2i;
                CSTORE(o0 + dout, t1r + t3i, t1i - t3r, w);
                CSTORE(o0 + 2 * dout, t0r - t2r, t0i - t2i, w + 2);
                CSTORE(o0 + 3 * dout, t1r - t3i, t1i + t3r, w + 4);
            } else if (p == 2) {
                VT ar = LD(xr + i0), ai = LD(xi + i0);
                VT br = LD(xr + i0 + di), bi = LD(xi + i0 + di);
                SV(yr + o0) = ar + br;
                SV(yi + o0) = ai + bi;
                CSTORE(o0 + dout, ar - br, ai - bi, w);
            } else if (p == 3) {
                const ST h = (ST)0.5, s3 = (ST)0.86602540378443864676;
                VT a0r = LD(xr + i0), a0i = LD(xi + i0);
                VT a1r = LD(xr + i0 + di), a1i = LD(xi + i0 + di);
                VT a2r = LD(xr + i0 + 2 * di), a2i = LD(xi + i0 + 2 * di);
                VT tr = a1r + a2r, ti = a1i + a2i, dr = a1r - a2r, dd = a1i - a2i;
                VT cr = a0r - h * tr, ci = a0i - h * ti;
                SV(yr + o0) = a0r + tr;
                SV(yi + o0) = a0i + ti;
                /* b1 = c - i s3 d, b2 = c + i s3 d */
                CSTORE(o0 + dout, cr + s3 * dd, ci - s3 * dr, w);
                CSTORE(o0 + 2 * dout, cr - s3 * dd, ci + s3 * dr, w + 2);
            } else if (p == 5) {
                const ST c1 = (ST)0.30901699437494742410, c2 = (ST)-0.80901699437494742410;
                const ST s1 = (ST)0.95105651629515357212, s2 = (ST)0.58778525229247312917;
                VT a0r = LD(xr + i0), a0i = LD(xi + i0);
                VT a1r = LD(xr + i0 + di), a1i = LD(xi + i0 + di);
                VT a2r = LD(xr + i0 + 2 * di), a2i = LD(xi + i0 + 2 * di);
                VT a3r = LD(xr + i0 + 3 * di), a3i = LD(xi + i0 + 3 * di);
                VT a4r = LD(xr + i0 + 4 * di), a4i = LD(xi + i0 + 4 * di);
                VT t1r = a1r + a4r, t1i = a1i + a4i, d1r = a1r - a4r, d1i = a1i - a4i;
                VT t2r = a2r + a3r, t2i = a2i + a3i, d2r = a2r - a3r, d2i = a2i - a3i;
                VT e1r = a0r + c1 * t1r + c2 * t2r, e1i = a0i + c1 * t1i + c2 * t2i;
                VT e2r = a0r + c2 * t1r + c1 * t2r, e2i = a0i + c2 * t1i + c1 * t2i;
                VT f1r = s1 * d1r + s2 * d2r, f1i = s1 * d1i + s2 * d2i;
                VT f2r = s2 * d1r - s1 * d2r, f2i = s2 * d1i - s1 * d2i;
                SV(yr + o0) = a0r + t1r + t2r;
                SV(yi + o0) = a0i + t1i + t2i;
                /* b1 = e1 - i f1, b4 = e1 + i f1, b2 = e2 - i f2, b3 = e2 + i f2 */
                CSTORE(o0 + dout, e1r + f1i, e1i - f1r, w);
                CSTORE(o0 + 2 * dout, e2r + f2i, e2i - f2r, w + 2);
                CSTORE(o0 + 3 * dout, e2r - f2i, e2i + f2r, w + 4);
                CSTORE(o0 + 4 * dout, e1r - f1i, e1i + f1r, w + 6);
            } else {
                const ST *wp = P->wp[st];
                for (int k = 0; k < p; k++) {
                    VT accr = LD(xr + i0), acci = LD(xi + i0);
                    for (int r = 1; r < p; r++) {
                        const ST *wk = wp + 2 * ((int64_t)r * k % p);
                        const ST wr = wk[0], wi = wk[1];
                        VT ar = LD(xr + i0 + r * di), ai = LD(xi + i0 + r * di);
                        accr += ar * wr - ai * wi;
                        acci += ar * wi + ai * wr;
                    }
                    if (k)
                        CSTORE(o0 + k * dout, accr, acci, w + 2 * (k - 1));
                    else {
                        SV(yr + o0) = accr;
                        SV(yi + o0) = acci;
                    }
                }
            }
        }
    }
}

/* Run every stage; returns the buffer pair that holds the result. */
static void F(cfft)(const F(plan_t) *P, ST *ar, ST *ai, ST *br, ST *bi, ST **rr, ST **ri) {
    for (int st = 0; st < P->nst; st++) {
        F(stage)(P, st, ar, ai, br, bi);
        ST *tr = ar, *ti = ai;
        ar = br; ai = bi;
        br = tr; bi = ti;
    }
    *rr = ar;
    *ri = ai;
}

/* Index of padded sample i in the signal of length L (-1: a zero of constant padding). */
static inline int64_t F(src)(int64_t i, int64_t pad, int64_t L, int mode) {
    int64_t j = i - pad;
    if (j >= 0 && j < L) return j;
    switch (mode) {
    case FM_STFT_PAD_REFLECT: return j < 0 ? -j : 2 * (L - 1) - j;
    case FM_STFT_PAD_REPLICATE: return j < 0 ? 0 : L - 1;
    case FM_STFT_PAD_CIRCULAR: return ((j % L) + L) % L;
    default: return -1;
    }
}

/* Load NL frames (t0.., `nl` valid) of one row, windowed, into the FFT input. Even N: packed
   pairs into M = N/2 complex values; odd N: N complex values with zero imaginary parts. */
FM_CLONES static void F(gather)(const ST *FM_RESTRICT x, int64_t L, int64_t N, int64_t hop,
                                int64_t pad, int pmode, const ST *FM_RESTRICT win, int64_t t0,
                                int nl, ST *FM_RESTRICT ar, ST *FM_RESTRICT ai) {
    const int even = N % 2 == 0;
    const int64_t M = even ? N / 2 : N;
    int64_t e1 = 0;  /* elements [0, e1) of every lane done by the tiled path */
    if (nl == NL && t0 * hop - pad >= 0 && (t0 + NL - 1) * hop - pad + N <= L) {
        const ST *x0 = x + t0 * hop - pad;
        e1 = M / NL * NL;
        for (int64_t e0 = 0; e0 < e1; e0 += NL) {
            VT R[NL], I[NL];
            if (even) {
                VT w0 = win ? F(ldu)(win + 2 * e0) : (VT){} + 1, w1 = win ? F(ldu)(win + 2 * e0 + NL) : (VT){} + 1;
                for (int l = 0; l < NL; l++) {
                    VT v0 = F(ldu)(x0 + l * hop + 2 * e0) * w0;
                    VT v1 = F(ldu)(x0 + l * hop + 2 * e0 + NL) * w1;
                    R[l] = SHUF(v0, v1, IDX_EV);
                    I[l] = SHUF(v0, v1, IDX_OD);
                }
                F(transpose)(I);
            } else {
                VT w0 = win ? F(ldu)(win + e0) : (VT){} + 1;
                for (int l = 0; l < NL; l++) {
                    R[l] = F(ldu)(x0 + l * hop + e0) * w0;
                    I[l] = (VT){};
                }
            }
            F(transpose)(R);
            for (int i = 0; i < NL; i++) {
                SV(ar + (e0 + i) * NL) = R[i];
                SV(ai + (e0 + i) * NL) = I[i];
            }
        }
    }
    for (int l = 0; l < NL; l++) {
        if (l >= nl) {
            for (int64_t e = 0; e < M; e++) ar[e * NL + l] = ai[e * NL + l] = 0;
            continue;
        }
        const int64_t start = (t0 + l) * hop;
        const int inside = start - pad >= 0 && start - pad + N <= L;
        const ST *xs = x + (start - pad);
        if (even) {
            for (int64_t e = e1; e < M; e++) {
                ST v0, v1;
                if (inside) {
                    v0 = xs[2 * e];
                    v1 = xs[2 * e + 1];
                } else {
                    int64_t j0 = F(src)(start + 2 * e, pad, L, pmode);
                    int64_t j1 = F(src)(start + 2 * e + 1, pad, L, pmode);
                    v0 = j0 < 0 ? 0 : x[j0];
                    v1 = j1 < 0 ? 0 : x[j1];
                }
                ar[e * NL + l] = win ? v0 * win[2 * e] : v0;
                ai[e * NL + l] = win ? v1 * win[2 * e + 1] : v1;
            }
        } else {
            for (int64_t e = e1; e < M; e++) {
                ST v;
                if (inside) {
                    v = xs[e];
                } else {
                    int64_t j = F(src)(start + e, pad, L, pmode);
                    v = j < 0 ? 0 : x[j];
                }
                ar[e * NL + l] = win ? v * win[e] : v;
                ai[e * NL + l] = 0;
            }
        }
    }
}

/* Store bin k of the block (lanes xr, xi) into the output. */
static inline __attribute__((always_inline)) void F(store_bin)(int mode, int64_t k, VT xr, VT xi, int64_t T, int64_t t0,
                                int nl, ST sc, ST *FM_RESTRICT out) {
    if (mode == FM_STFT_POWER) {
        VT pw = (xr * xr + xi * xi) * (sc * sc);
        ST *o = out + k * T + t0;
        if (nl == NL)
            memcpy(o, &pw, sizeof pw);
        else
            for (int l = 0; l < nl; l++) o[l] = pw[l];
    } else {
        ST *o = out + (k * T + t0) * 2;
        xr *= sc;
        xi *= sc;
        if (nl == NL) {
            VT lo = SHUF(xr, xi, IDX_LO), hi = SHUF(xr, xi, IDX_HI);
            memcpy(o, &lo, sizeof lo);
            memcpy(o + NL, &hi, sizeof hi);
        } else {
            for (int l = 0; l < nl; l++) {
                o[2 * l] = xr[l];
                o[2 * l + 1] = xi[l];
            }
        }
    }
}

/* From the complex FFT result (zr, zi) of the block to the output bins of its frames. */
FM_CLONES static void F(emit)(const F(plan_t) *P, int64_t N, int onesided, int mode,
                              const ST *FM_RESTRICT zr, const ST *FM_RESTRICT zi, int64_t T,
                              int64_t t0, int nl, ST sc, ST *FM_RESTRICT out) {
    const int64_t nf = onesided ? N / 2 + 1 : N;
    if (N % 2) {
        for (int64_t k = 0; k < nf; k++)
            F(store_bin)(mode, k, LD(zr + k * NL), LD(zi + k * NL), T, t0, nl, sc, out);
        return;
    }
    const int64_t M = N / 2;
    const ST h = (ST)0.5;
    for (int64_t k = 0; k <= M; k++) {
        const int64_t a = (k % M) * NL, b = ((M - k) % M) * NL;
        const ST wr = P->post[2 * k], wi = P->post[2 * k + 1];
        VT zar = LD(zr + a), zai = LD(zi + a), zbr = LD(zr + b), zbi = LD(zi + b);
        /* E = (Z_k + conj Z_{M-k}) / 2, O = -i (Z_k - conj Z_{M-k}) / 2 */
        VT er = (zar + zbr) * h, ei = (zai - zbi) * h;
        VT orr = (zai + zbi) * h, oi = (zbr - zar) * h;
        VT xr = er + orr * wr - oi * wi, xi = ei + orr * wi + oi * wr;
        F(store_bin)(mode, k, xr, xi, T, t0, nl, sc, out);
        if (!onesided && k > 0 && k < M) F(store_bin)(mode, N - k, xr, -xi, T, t0, nl, sc, out);
    }
}

static int F(run)(int mode, int64_t B, int64_t L, const ST *x, int64_t N, int64_t hop,
                  int64_t T, int64_t pad, int pmode, const ST *win, int onesided, double scale,
                  ST *out) {
    const int even = N % 2 == 0;
    const int64_t M = even ? N / 2 : N;
    const int64_t nf = onesided ? N / 2 + 1 : N;
    const int64_t per_row = (mode == FM_STFT_POWER ? 1 : 2) * nf * T;
    F(plan_t) P;
    int rc = F(plan_make)(&P, M, even);
    if (rc) return rc;
    const int64_t nblk = (T + NL - 1) / NL, items = B * nblk;
    double lg = 1;
    for (int64_t v = M; v > 1; v >>= 1) lg += 1;
    int nt = fm_par_threads((double)items * NL * (double)M * lg * 4.0, 2e6);
    if (nt > items) nt = (int)(items > 0 ? items : 1);
    int err = FM_OK;
#pragma omp parallel num_threads(nt)
    {
        ST *buf = aligned_alloc(64, (size_t)4 * M * NL * sizeof(ST));
        if (!buf) {
#pragma omp atomic write
            err = FM_ERR_NOMEM;
        }
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; it++) {
            if (!buf) continue;
            const int64_t b = it / nblk, t0 = (it % nblk) * NL;
            const int nl = (int)(T - t0 < NL ? T - t0 : NL);
            ST *ar = buf, *ai = buf + M * NL, *br = buf + 2 * M * NL, *bi = buf + 3 * M * NL;
            ST *zr, *zi;
            F(gather)(x + b * L, L, N, hop, pad, pmode, win, t0, nl, ar, ai);
            F(cfft)(&P, ar, ai, br, bi, &zr, &zi);
            F(emit)(&P, N, onesided, mode, zr, zi, T, t0, nl, (ST)scale, out + b * per_row);
        }
        free(buf);
    }
    F(plan_free)(&P);
    return err;
}

#undef LANES
#undef IDX_LO
#undef IDX_HI
#undef IDX_EV
#undef IDX_OD
#undef SHUF
#undef CSTORE
#undef LD
#undef SV
#undef VT
