/* Per-dtype body of sample.c, included once per floating type with ST (the scalar type, also
 * the type coordinates and weights are computed in, as PyTorch does) and F(name) defined.
 * Both upsampling and grid_sample work from tap tables: for each output position a few
 * (element offset, weight) pairs, so one gather loop and one scatter loop serve every mode. */

/* ---- upsampling: one table per spatial dim ------------------------------------------------ */

static void F(up_table)(int mode, int ac, int64_t in, int64_t out, double sc, int64_t stride,
                        int64_t *off, ST *w) {
    if (mode == FM_SAMPLE_NEAREST || mode == FM_SAMPLE_NEAREST_EXACT) {
        ST scale = sc > 0 ? (ST)(1.0 / sc) : (ST)in / (ST)out;
        for (int64_t o = 0; o < out; o++) {
            float v = mode == FM_SAMPLE_NEAREST ? (float)((ST)o * scale)
                                                : (float)(((double)o + 0.5) * (double)scale);
            int64_t i = (int64_t)floorf(v);
            if (i > in - 1) i = in - 1;
            if (i < 0) i = 0;
            off[o] = i * stride;
            w[o] = 1;
        }
        return;
    }
    ST scale;
    if (ac) scale = out > 1 ? (ST)(in - 1) / (ST)(out - 1) : (ST)0;
    else scale = sc > 0 ? (ST)(1.0 / sc) : (ST)in / (ST)out;
    int cubic = mode == FM_SAMPLE_CUBIC;
    for (int64_t o = 0; o < out; o++) {
        ST r = ac ? scale * (ST)o : scale * ((ST)o + (ST)0.5) - (ST)0.5;
        if (!cubic) {
            if (in == out) {
                off[2 * o] = off[2 * o + 1] = o * stride;
                w[2 * o] = 1;
                w[2 * o + 1] = 0;
                continue;
            }
            if (!ac && r < 0) r = 0;
        }
        int64_t i = (int64_t)floorf((float)r);
        if (i > in - 1) i = in - 1;
        ST t = r - (ST)i;
        if (t < 0) t = 0;
        if (t > 1) t = 1;
        if (!cubic) {
            off[2 * o] = i * stride;
            off[2 * o + 1] = (i < in - 1 ? i + 1 : i) * stride;
            w[2 * o] = 1 - t;
            w[2 * o + 1] = t;
        } else {
            const ST A = (ST)-0.75;
            ST x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
            w[4 * o] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
            w[4 * o + 1] = ((A + 2) * t - (A + 3)) * t * t + 1;
            w[4 * o + 2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
            w[4 * o + 3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
            for (int k = 0; k < 4; k++) {
                int64_t j = i - 1 + k;
                j = j < 0 ? 0 : (j > in - 1 ? in - 1 : j);
                off[4 * o + k] = j * stride;
            }
        }
    }
}

/* one output row: y[ow] = sum_k rw[k] * sum_t ww[ow,t] * rp[k][wo[ow,t]] */
static inline __attribute__((always_inline)) void F(up_row)(
        ST *FM_RESTRICT y, int64_t n, const ST *const *rp, const ST *rw, int K,
        const int64_t *wo, const ST *ww, int TW) {
    for (int64_t o = 0; o < n; o++) {
        ST acc = 0;
        for (int k = 0; k < K; k++) {
            const ST *r = rp[k];
            ST s = 0;
            for (int t = 0; t < TW; t++) s += ww[o * TW + t] * r[wo[o * TW + t]];
            acc += rw[k] * s;
        }
        y[o] = acc;
    }
}

static inline __attribute__((always_inline)) void F(up_row_back)(
        const ST *FM_RESTRICT g, int64_t n, ST *const *rp, const ST *rw, int K,
        const int64_t *wo, const ST *ww, int TW) {
    for (int64_t o = 0; o < n; o++) {
        ST v = g[o];
        for (int k = 0; k < K; k++) {
            ST *r = rp[k];
            ST s = rw[k] * v;
            for (int t = 0; t < TW; t++) r[wo[o * TW + t]] += ww[o * TW + t] * s;
        }
    }
}

/* Separable forward for linear/cubic: each input row the output rows need is interpolated
   along W once into a slot of `hb` (slots keyed by the row's address, 2K of them, reused in
   least-recently-used order), then an output row is a weighted sum of K such rows (contiguous,
   vectorized). The arithmetic is the same as F(up_row)'s, so results are identical. */
typedef struct {
    ST *hb;             /* nslots * on */
    const ST *key[32];
    int64_t stamp[32];
    int nslots;
} F(rowcache);

static inline void F(combine)(ST *FM_RESTRICT y, int64_t n, ST *const *h, const ST *rw, int K) {
    if (K == 2) {
        const ST *FM_RESTRICT a = h[0], *FM_RESTRICT b = h[1];
        ST w0 = rw[0], w1 = rw[1];
        for (int64_t o = 0; o < n; o++) y[o] = w0 * a[o] + w1 * b[o];
    } else if (K == 4) {
        const ST *FM_RESTRICT a = h[0], *FM_RESTRICT b = h[1], *FM_RESTRICT c = h[2],
                 *FM_RESTRICT d = h[3];
        ST w0 = rw[0], w1 = rw[1], w2 = rw[2], w3 = rw[3];
        for (int64_t o = 0; o < n; o++) y[o] = ((w0 * a[o] + w1 * b[o]) + w2 * c[o]) + w3 * d[o];
    } else {
        for (int64_t o = 0; o < n; o++) {
            ST acc = 0;
            for (int k = 0; k < K; k++) acc += rw[k] * h[k][o];
            y[o] = acc;
        }
    }
}

static ST *F(cached_row)(F(rowcache) *rc, const ST *r, int64_t now, int64_t on,
                         const int64_t *wo, const ST *ww, int TW) {
    int j, best = -1;
    for (j = 0; j < rc->nslots; j++)
        if (rc->key[j] == r) {
            rc->stamp[j] = now;
            return rc->hb + j * on;
        }
    for (j = 0; j < rc->nslots; j++)
        if (rc->stamp[j] != now && (best < 0 || rc->stamp[j] < rc->stamp[best])) best = j;
    ST *h = rc->hb + best * on;
    rc->key[best] = r;
    rc->stamp[best] = now;
    if (TW == 2) {
        for (int64_t o = 0; o < on; o++)
            h[o] = ww[2 * o] * r[wo[2 * o]] + ww[2 * o + 1] * r[wo[2 * o + 1]];
    } else {
        for (int64_t o = 0; o < on; o++) {
            ST s = 0;
            for (int t = 0; t < TW; t++) s += ww[o * TW + t] * r[wo[o * TW + t]];
            h[o] = s;
        }
    }
    return h;
}

typedef struct {
    int64_t n;
    int T;
    int64_t *off;
    void *w;
} F(dimtab);

static void F(up_plane)(int nearest, int back, ST *xp, ST *yp, const F(dimtab) *tb,
                        F(rowcache) *rc) {
    const F(dimtab) *D = &tb[0], *H = &tb[1], *W = &tb[2];
    const ST *dw = (const ST *)D->w, *hw = (const ST *)H->w, *ww = (const ST *)W->w;
    ST *rp[16];
    ST rw[16];
    int64_t on = W->n;
    for (int64_t od = 0; od < D->n; od++) {
        for (int64_t oh = 0; oh < H->n; oh++) {
            int K = 0;
            for (int a = 0; a < D->T; a++)
                for (int b = 0; b < H->T; b++) {
                    rp[K] = xp + D->off[od * D->T + a] + H->off[oh * H->T + b];
                    rw[K++] = dw[od * D->T + a] * hw[oh * H->T + b];
                }
            ST *row = yp + (od * H->n + oh) * on;
            const int64_t *wo = W->off;
            if (!back) {
                if (nearest) {
                    /* an output row reading the same input row as the one before is a copy */
                    if (oh > 0 && H->off[oh] == H->off[oh - 1]) {
                        memcpy(row, row - on, sizeof(ST) * on);
                        continue;
                    }
                    const ST *r = rp[0];
                    for (int64_t o = 0; o < on; o++) row[o] = r[wo[o]];
                } else if (rc) {
                    ST *h[16];
                    int64_t now = od * H->n + oh + 1;
                    for (int k = 0; k < K; k++)
                        h[k] = F(cached_row)(rc, rp[k], now, on, wo, ww, W->T);
                    /* the products rw[k] * s match F(up_row)'s order: acc += rw[k] * s */
                    F(combine)(row, on, h, rw, K);
                } else if (K == 1 && W->T == 2) F(up_row)(row, on, (const ST *const *)rp, rw, 1, wo, ww, 2);
                else if (K == 2 && W->T == 2) F(up_row)(row, on, (const ST *const *)rp, rw, 2, wo, ww, 2);
                else if (K == 4 && W->T == 2) F(up_row)(row, on, (const ST *const *)rp, rw, 4, wo, ww, 2);
                else if (K == 4 && W->T == 4) F(up_row)(row, on, (const ST *const *)rp, rw, 4, wo, ww, 4);
                else F(up_row)(row, on, (const ST *const *)rp, rw, K, wo, ww, W->T);
            } else {
                if (nearest) {
                    ST *r = rp[0];
                    for (int64_t o = 0; o < on; o++) r[wo[o]] += row[o];
                } else if (K == 2 && W->T == 2) F(up_row_back)(row, on, rp, rw, 2, wo, ww, 2);
                else if (K == 4 && W->T == 4) F(up_row_back)(row, on, rp, rw, 4, wo, ww, 4);
                else F(up_row_back)(row, on, rp, rw, K, wo, ww, W->T);
            }
        }
    }
}

/* back == 0: y = upsample(x); back == 1: x (contiguous) = upsample_backward(y = grad) */
static int F(upsample)(int back, int mode, int ac, int nsp, int64_t n, int64_t c,
                       const int64_t *isize, const int64_t *osize, const double *scales,
                       ST *x, const int64_t *xs, ST *y) {
    F(dimtab) tb[3];
    int64_t isz[3] = {1, 1, 1}, osz[3] = {1, 1, 1}, st[3] = {0, 0, 0};
    double sc[3] = {0, 0, 0};
    int lead = 3 - nsp;
    for (int d = 0; d < nsp; d++) {
        isz[lead + d] = isize[d];
        osz[lead + d] = osize[d];
        st[lead + d] = xs[2 + d];
        sc[lead + d] = scales[d];
    }
    int T = mode == FM_SAMPLE_LINEAR ? 2 : (mode == FM_SAMPLE_CUBIC ? 4 : 1);
    int64_t tot = 0;
    for (int d = 0; d < 3; d++) tot += osz[d] * (d < lead ? 1 : T);
    int64_t *offs = malloc(sizeof(int64_t) * tot + 1);
    ST *ws = malloc(sizeof(ST) * tot + 1);
    if (!offs || !ws) {
        free(offs);
        free(ws);
        return FM_ERR_NOMEM;
    }
    int64_t pos = 0;
    for (int d = 0; d < 3; d++) {
        tb[d].n = osz[d];
        tb[d].off = offs + pos;
        tb[d].w = ws + pos;
        if (d < lead) {
            tb[d].T = 1;
            offs[pos] = 0;
            ws[pos] = 1;
            pos += 1;
        } else {
            tb[d].T = T;
            F(up_table)(mode, ac, isz[d], osz[d], sc[d], st[d], offs + pos, ws + pos);
            pos += osz[d] * T;
        }
    }
    int64_t planes = n * c, oplane = osz[0] * osz[1] * osz[2], iplane = isz[0] * isz[1] * isz[2];
    int nearest = T == 1;
    int taps = T;
    for (int d = 1; d < nsp; d++) taps *= T;
    int nt = fm_par_threads((double)planes * (double)oplane * taps, SAMPLE_PAR_MIN);
    /* the row cache pays off when output rows outnumber the distinct input rows they read */
    int K = 1;
    for (int d = 0; d < 2; d++) K *= tb[d].T;
    int sep = !back && !nearest && nsp >= 2 && K <= 16 && osz[1] * osz[0] >= isz[1] * isz[0];
    ST *hbuf = 0;
    if (sep) {
        hbuf = malloc(sizeof(ST) * (int64_t)nt * 2 * K * osz[2] + 1);
        if (!hbuf) sep = 0;
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t p = 0; p < planes; p++) {
        if (!back) {
            ST *xp = x + (p / c) * xs[0] + (p % c) * xs[1];
            F(rowcache) rc;
            if (sep) {
                rc.nslots = 2 * K;
                rc.hb = hbuf + (int64_t)omp_get_thread_num() * 2 * K * osz[2];
                for (int j = 0; j < rc.nslots; j++) {
                    rc.key[j] = 0;
                    rc.stamp[j] = 0;
                }
            }
            F(up_plane)(nearest, 0, xp, y + p * oplane, tb, sep ? &rc : 0);
        } else {
            ST *xp = x + p * iplane;
            memset(xp, 0, sizeof(ST) * iplane);
            F(up_plane)(nearest, 1, xp, y + p * oplane, tb, 0);
        }
    }
    free(hbuf);
    free(offs);
    free(ws);
    return FM_OK;
}

/* ---- grid_sample: taps per (batch, output point) ------------------------------------------ */

static inline ST F(unnorm)(ST v, int64_t size, int ac, ST *g) {
    if (ac) {
        *g = (ST)(size - 1) / 2;
        return (v + 1) / 2 * (ST)(size - 1);
    }
    *g = (ST)size / 2;
    return ((v + 1) * (ST)size - 1) / 2;
}

static inline ST F(clip)(ST v, int64_t size, ST *g) {
    if (v <= 0) {
        *g = 0;
        return 0;
    }
    ST m = (ST)(size - 1);
    if (v >= m) {
        *g = 0;
        return m;
    }
    *g = 1;
    return v;
}

static inline ST F(reflect)(ST v, ST twice_low, ST twice_high, ST *g) {
    if (twice_low == twice_high) {
        *g = 0;
        return 0;
    }
    ST lo = twice_low / 2, span = (twice_high - twice_low) / 2, s = 1;
    v = v - lo;
    if (v < 0) {
        s = -1;
        v = -v;
    }
    ST extra = (ST)fmod((double)v, (double)span);
    int64_t flips = (int64_t)floor((double)(v / span));
    if (flips % 2 == 0) {
        *g = s;
        return extra + lo;
    }
    *g = -s;
    return span - extra + lo;
}

/* padding applied to an unnormalized coordinate; *g gets d(result)/d(v) */
static inline ST F(pad)(ST v, int64_t size, int padding, int ac, ST *g) {
    ST g1 = 1, g2 = 1;
    if (padding == FM_PAD_BORDER) {
        v = F(clip)(v, size, &g1);
    } else if (padding == FM_PAD_REFLECTION) {
        if (ac) v = F(reflect)(v, 0, (ST)(2 * (size - 1)), &g1);
        else v = F(reflect)(v, -1, (ST)(2 * size - 1), &g1);
        v = F(clip)(v, size, &g2);
    }
    *g = g1 * g2;
    /* NaN, inf and huge coordinates fall outside the input (as PyTorch's int-range guard) */
    if (!(v > -1e15 && v < 1e15)) v = -100;
    return v;
}

static inline void F(cubic_coeffs)(ST t, ST *c, ST *dc) {
    const ST A = (ST)-0.75;
    ST x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
    c[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
    c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
    dc[0] = (3 * A * x1 - 10 * A) * x1 + 8 * A;
    dc[1] = (3 * (A + 2) * t - 2 * (A + 3)) * t;
    dc[2] = -((3 * (A + 2) * x2 - 2 * (A + 3)) * x2);
    dc[3] = -((3 * A * x3 - 10 * A) * x3 + 8 * A);
}

/* Taps of one point with coordinates g[0..nsp) (x, y[, z]): K offsets (spatial strides ss,
   ordered like isz: [z,] y, x), weights, and when dw != 0 the weights' derivatives w.r.t. the
   grid coordinates (K * nsp, grid order x, y, z). Out-of-range taps get offset 0, weight 0. */
static void F(grid_taps)(int nsp, int mode, int padding, int ac, const int64_t *isz,
                         const int64_t *ss, const ST *gc, int64_t *off, ST *w, ST *dw) {
    /* per grid axis a (0 = x = last spatial dim) */
    int64_t sz[3], sd[3];
    for (int a = 0; a < nsp; a++) {
        sz[a] = isz[nsp - 1 - a];
        sd[a] = ss[nsp - 1 - a];
    }
    if (mode == FM_SAMPLE_CUBIC) { /* 2-D only */
        ST cf[2][4], dcf[2][4], gm[2];
        int64_t base[2];
        for (int a = 0; a < 2; a++) {
            ST v = F(unnorm)(gc[a], sz[a], ac, &gm[a]);
            /* far coordinates stay far (border padding clamps them), NaN falls outside */
            if (!(v > -1e15 && v < 1e15)) v = v != v ? (ST)-100 : (v > 0 ? (ST)1e15 : (ST)-1e15);
            ST f = (ST)floor((double)v);
            base[a] = (int64_t)f;
            F(cubic_coeffs)(v - f, cf[a], dcf[a]);
        }
        int k = 0;
        for (int i = 0; i < 4; i++) {       /* y tap */
            for (int j = 0; j < 4; j++) {   /* x tap */
                ST gd;
                int64_t ix = (int64_t)F(pad)((ST)(base[0] - 1 + j), sz[0], padding, ac, &gd);
                int64_t iy = (int64_t)F(pad)((ST)(base[1] - 1 + i), sz[1], padding, ac, &gd);
                int in = ix >= 0 && ix < sz[0] && iy >= 0 && iy < sz[1];
                off[k] = in ? ix * sd[0] + iy * sd[1] : 0;
                w[k] = in ? cf[1][i] * cf[0][j] : 0;
                if (dw) {
                    dw[2 * k] = in ? cf[1][i] * dcf[0][j] * gm[0] : 0;
                    dw[2 * k + 1] = in ? dcf[1][i] * cf[0][j] * gm[1] : 0;
                }
                k++;
            }
        }
        return;
    }
    ST v[3], gm[3];
    for (int a = 0; a < nsp; a++) {
        ST g1, g2;
        ST u = F(unnorm)(gc[a], sz[a], ac, &g1);
        v[a] = F(pad)(u, sz[a], padding, ac, &g2);
        gm[a] = g1 * g2;
    }
    if (mode == FM_SAMPLE_NEAREST) {
        int in = 1;
        int64_t o = 0;
        for (int a = 0; a < nsp; a++) {
            int64_t i = (int64_t)nearbyint((double)v[a]);
            in = in && i >= 0 && i < sz[a];
            o += i * sd[a];
        }
        off[0] = in ? o : 0;
        w[0] = in ? 1 : 0;
        if (dw)
            for (int a = 0; a < nsp; a++) dw[a] = 0;
        return;
    }
    /* (bi/tri)linear: tap k has bit a set when it takes the upper corner along axis a */
    int64_t i0[3];
    ST t[3];
    for (int a = 0; a < nsp; a++) {
        ST f = (ST)floor((double)v[a]);
        i0[a] = (int64_t)f;
        t[a] = v[a] - f;
    }
    int K = 1 << nsp;
    for (int k = 0; k < K; k++) {
        int in = 1;
        int64_t o = 0;
        ST wk = 1, wa[3];
        for (int a = 0; a < nsp; a++) {
            int up = (k >> a) & 1;
            int64_t i = i0[a] + up;
            in = in && i >= 0 && i < sz[a];
            o += i * sd[a];
            wa[a] = up ? t[a] : 1 - t[a];
            wk *= wa[a];
        }
        off[k] = in ? o : 0;
        w[k] = in ? wk : 0;
        if (dw) {
            for (int a = 0; a < nsp; a++) {
                ST d = in ? (((k >> a) & 1) ? 1 : -1) * gm[a] : 0;
                for (int b = 0; b < nsp; b++)
                    if (b != a) d *= wa[b];
                dw[k * nsp + a] = d;
            }
        }
    }
}

static int F(grid_ntaps)(int nsp, int mode) {
    if (mode == FM_SAMPLE_NEAREST) return 1;
    if (mode == FM_SAMPLE_CUBIC) return 16;
    return 1 << nsp;
}

static inline __attribute__((always_inline)) void F(gather_pts)(
        ST *FM_RESTRICT y, const ST *xp, int64_t P, const int64_t *off, const ST *w, int K) {
    if (K == 4) { /* two independent chains: the adds do not wait on each other */
        for (int64_t p = 0; p < P; p++) {
            const int64_t *o = off + 4 * p;
            const ST *ww = w + 4 * p;
            y[p] = (ww[0] * xp[o[0]] + ww[1] * xp[o[1]]) + (ww[2] * xp[o[2]] + ww[3] * xp[o[3]]);
        }
        return;
    }
    for (int64_t p = 0; p < P; p++) {
        ST acc = 0;
        for (int k = 0; k < K; k++) acc += w[p * K + k] * xp[off[p * K + k]];
        y[p] = acc;
    }
}

static inline __attribute__((always_inline)) void F(scatter_pts)(
        const ST *FM_RESTRICT g, ST *xp, int64_t P, const int64_t *off, const ST *w, int K) {
    for (int64_t p = 0; p < P; p++) {
        ST v = g[p];
        for (int k = 0; k < K; k++) xp[off[p * K + k]] += w[p * K + k] * v;
    }
}

/* taps for every (batch, point): offsets with strides ss, optional derivative weights */
/* Points are processed in blocks: the taps of a block are computed once and reused for every
   channel while they sit in L1, and one parallel region covers the whole op (a second region
   or a barrier costs a scheduler slice on a loaded machine). */
#define GS_BLOCK 512

static int F(grid_sample)(int nsp, int mode, int padding, int ac, int64_t n, int64_t c,
                          const int64_t *isz, const int64_t *osz, const ST *x, const int64_t *xs,
                          const ST *grid, ST *y) {
    int64_t P = 1;
    for (int d = 0; d < nsp; d++) P *= osz[d];
    int K = F(grid_ntaps)(nsp, mode);
    int64_t nb = (P + GS_BLOCK - 1) / GS_BLOCK;
    int nt = fm_par_threads((double)n * c * P * K, SAMPLE_PAR_MIN);
    /* per-thread scratch: the taps of one block */
    int64_t *offs = malloc(sizeof(int64_t) * GS_BLOCK * K * nt);
    ST *ws = malloc(sizeof(ST) * GS_BLOCK * K * nt);
    if (!offs || !ws) {
        free(offs);
        free(ws);
        return FM_ERR_NOMEM;
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t q = 0; q < n * nb; q++) {
        int64_t *off = offs + (int64_t)omp_get_thread_num() * GS_BLOCK * K;
        ST *w = ws + (int64_t)omp_get_thread_num() * GS_BLOCK * K;
        int64_t b = q / nb, p0 = (q % nb) * GS_BLOCK;
        int64_t np = P - p0 < GS_BLOCK ? P - p0 : GS_BLOCK;
        const ST *gp = grid + (b * P + p0) * nsp;
        for (int64_t p = 0; p < np; p++)
            F(grid_taps)(nsp, mode, padding, ac, isz, xs + 2, gp + p * nsp, off + p * K,
                         w + p * K, 0);
        for (int64_t ch = 0; ch < c; ch++) {
            const ST *xp = x + b * xs[0] + ch * xs[1];
            ST *yp = y + (b * c + ch) * P + p0;
            if (K == 1) F(gather_pts)(yp, xp, np, off, w, 1);
            else if (K == 4) F(gather_pts)(yp, xp, np, off, w, 4);
            else if (K == 8) F(gather_pts)(yp, xp, np, off, w, 8);
            else F(gather_pts)(yp, xp, np, off, w, 16);
        }
    }
    free(offs);
    free(ws);
    return FM_OK;
}

/* Backward: work items are (batch, channel group); a group scatters into its own channels of
   gx, and its partial grid gradient goes to its own slice of a buffer summed at the end. */
static int F(grid_sample_backward)(int nsp, int mode, int padding, int ac, int64_t n,
                                   int64_t c, const int64_t *isz, const int64_t *osz,
                                   const ST *gy, const ST *x, const int64_t *xs, const ST *grid,
                                   ST *gx, ST *gg) {
    int64_t P = 1, IP = 1;
    for (int d = 0; d < nsp; d++) {
        P *= osz[d];
        IP *= isz[d];
    }
    int K = F(grid_ntaps)(nsp, mode);
    int64_t cs[3]; /* contiguous spatial strides of gx */
    int same = 1;
    {
        int64_t s = 1;
        for (int d = nsp - 1; d >= 0; d--) {
            cs[d] = s;
            if (isz[d] > 1 && xs[2 + d] != s) same = 0;
            s *= isz[d];
        }
    }
    int need_dw = gg && mode != FM_SAMPLE_NEAREST;
    if (gg && !need_dw) memset(gg, 0, sizeof(ST) * n * P * nsp);
    if (!gx && !need_dw) return FM_OK;
    int nt = fm_par_threads((double)n * c * P * K * (need_dw ? 2 : 1), SAMPLE_PAR_MIN);
    int64_t groups = n >= nt ? 1 : (nt + n - 1) / n;
    if (groups > c) groups = c > 0 ? c : 1;
    int64_t cper = (c + groups - 1) / groups;
    ST *part = 0; /* grid gradient partials [n][groups][P][nsp] when groups > 1 */
    if (need_dw && groups > 1) {
        part = malloc(sizeof(ST) * n * groups * P * nsp + 1);
        if (!part) return FM_ERR_NOMEM;
    }
    int nb = nsp; /* taps' derivative count per tap */
    /* per-thread scratch: taps (x strides, gx strides), weights, derivatives, accumulators */
    int64_t per_i = (int64_t)GS_BLOCK * K * 2;
    int64_t per_s = (int64_t)GS_BLOCK * K * (2 + nb) + (int64_t)GS_BLOCK * nb;
    int64_t *iscr = malloc(sizeof(int64_t) * per_i * nt);
    ST *sscr = malloc(sizeof(ST) * per_s * nt);
    if (!iscr || !sscr) {
        free(iscr); free(sscr); free(part);
        return FM_ERR_NOMEM;
    }
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t q = 0; q < n * groups; q++) {
        int th = omp_get_thread_num();
        int64_t *off = iscr + th * per_i, *off2 = off + GS_BLOCK * K;
        ST *w = sscr + th * per_s, *w2 = w + GS_BLOCK * K, *dw = w2 + GS_BLOCK * K;
        ST *acc = dw + GS_BLOCK * K * nb;
        int64_t b = q / groups, g = q % groups;
        int64_t c0 = g * cper, c1 = c0 + cper < c ? c0 + cper : c;
        if (gx)
            for (int64_t ch = c0; ch < c1; ch++)
                memset(gx + (b * c + ch) * IP, 0, sizeof(ST) * IP);
        for (int64_t p0 = 0; p0 < P; p0 += GS_BLOCK) {
            int64_t np = P - p0 < GS_BLOCK ? P - p0 : GS_BLOCK;
            const ST *gp = grid + (b * P + p0) * nsp;
            for (int64_t p = 0; p < np; p++) {
                F(grid_taps)(nsp, mode, padding, ac, isz, xs + 2, gp + p * nsp, off + p * K,
                             w + p * K, need_dw ? dw + p * K * nb : 0);
                if (gx && !same)
                    F(grid_taps)(nsp, mode, padding, ac, isz, cs, gp + p * nsp, off2 + p * K,
                                 w2 + p * K, 0);
            }
            const int64_t *go = same ? off : off2;
            if (need_dw) memset(acc, 0, sizeof(ST) * np * nb);
            for (int64_t ch = c0; ch < c1; ch++) {
                const ST *gyp = gy + (b * c + ch) * P + p0;
                if (gx) {
                    ST *gxp = gx + (b * c + ch) * IP;
                    if (K == 1) F(scatter_pts)(gyp, gxp, np, go, w, 1);
                    else if (K == 4) F(scatter_pts)(gyp, gxp, np, go, w, 4);
                    else if (K == 8) F(scatter_pts)(gyp, gxp, np, go, w, 8);
                    else F(scatter_pts)(gyp, gxp, np, go, w, 16);
                }
                if (need_dw) {
                    const ST *xp = x + b * xs[0] + ch * xs[1];
                    for (int64_t p = 0; p < np; p++) {
                        ST v = gyp[p];
                        ST *a = acc + p * nb;
                        const int64_t *o = off + p * K;
                        const ST *d = dw + p * K * nb;
                        if (nb == 2) {
                            ST s0 = 0, s1 = 0;
                            for (int k = 0; k < K; k++) {
                                ST xv = xp[o[k]];
                                s0 += d[2 * k] * xv;
                                s1 += d[2 * k + 1] * xv;
                            }
                            a[0] += s0 * v;
                            a[1] += s1 * v;
                        } else {
                            for (int k = 0; k < K; k++) {
                                ST xv = xp[o[k]] * v;
                                for (int e = 0; e < nb; e++) a[e] += d[k * nb + e] * xv;
                            }
                        }
                    }
                }
            }
            if (need_dw) {
                ST *dst = part ? part + ((b * groups + g) * P + p0) * nb
                               : gg + (b * P + p0) * nb;
                memcpy(dst, acc, sizeof(ST) * np * nb);
            }
        }
    }
    free(iscr);
    free(sscr);
    if (part) {
        for (int64_t b = 0; b < n; b++) {
            ST *dst = gg + b * P * nb;
            memcpy(dst, part + b * groups * P * nb, sizeof(ST) * P * nb);
            for (int64_t g = 1; g < groups; g++) {
                const ST *src = part + (b * groups + g) * P * nb;
                for (int64_t i = 0; i < P * nb; i++) dst[i] += src[i];
            }
        }
    }
    free(part);
    return FM_OK;
}
