/* The time loop of a recurrent layer direction (rnn_seq.h), shared by lstm.c and gru.c: per
 * step the hidden product against the recurrent weight (packed once for the sequence:
 * gemm_plan.h) and the cell's arithmetic on blocks of rows split over the product's threads;
 * backward, the cell's backward and the product of the hidden-product gradient with the
 * weight. The weight's own gradient is one large product the caller makes from the saved
 * states. */
#include <omp.h>
#include <string.h>

#include "dtypes.h"
#include "fmath.h"
#include "gemm_plan.h"
#include "rnn_seq.h"

/* the state slots read and written at time t */
static inline int64_t slot_prev(int reverse, int64_t t) { return reverse ? t + 1 : t; }
static inline int64_t slot_next(int reverse, int64_t t) { return reverse ? t : t + 1; }

static inline char *at(const char *p, int64_t off) { return p ? (char *)p + off : NULL; }

/* threads for a step's cell: those of the product (the library's setting, one after fork,
   none for small products) when the step has rows enough to share */
static int cell_threads(const fm_gemm_plan *plan, int64_t B, int64_t H) {
    int nt = plan->nthreads;
    if (nt <= 1 || B < 2 || B * H < 8192) return 1;
    return nt < B ? nt : (int)B;
}

/* the cell forward on rows [r0, r1), which also copies the new h to the output */
static void fwd_block(const fm_rnn_cell *cell, int dtype, const fm_rnn_fwd_rows *s, int64_t r0,
                      int64_t r1, char *outt) {
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, H = s->H, n = r1 - r0;
    if (n <= 0) return;
    int64_t o = r0 * H * isz, og = o * cell->gates, ow = o * cell->ws_gates;
    fm_rnn_fwd_rows r = {H,           at(s->gates, og), at(s->xw, og), at(s->hp, o),
                         at(s->cp, o), at(s->hy, o),    at(s->cy, o),  at(s->ws, ow)};
    cell->fwd(dtype, n, &r);
    memcpy(outt + o, r.hy, (size_t)(n * H * isz));
}

/* the cell backward on rows [r0, r1), after adding the output's gradient to dh */
static void bwd_block(const fm_rnn_cell *cell, int dtype, const fm_rnn_bwd_rows *s,
                      const char *gout_t, int64_t r0, int64_t r1, char *tmp) {
    int64_t isz = dtype == FM_FLOAT32 ? 4 : 8, H = s->H, n = r1 - r0;
    if (n <= 0) return;
    int64_t o = r0 * H * isz, og = o * cell->gates, ow = o * cell->ws_gates;
    if (gout_t) {
        if (dtype == FM_FLOAT32) {
            float *d = (float *)(s->dh + o);
            const float *g = (const float *)(gout_t + o);
            for (int64_t i = 0; i < n * H; i++) d[i] += g[i];
        } else {
            double *d = (double *)(s->dh + o);
            const double *g = (const double *)(gout_t + o);
            for (int64_t i = 0; i < n * H; i++) d[i] += g[i];
        }
    }
    fm_rnn_bwd_rows r = {H,           at(s->dh, o),    at(s->sp, o),   at(s->sn, o),
                         at(s->ws, ow), at(s->gx, og), at(s->gh, og), at(s->dca, o),
                         at(s->dcb, o), tmp};
    cell->bwd(dtype, n, &r);
}

/* checks the arguments and gives the element size and the bytes of a step's state, product
   and ws blocks: -1 to go on, else the code to return (FM_OK: nothing to do) */
static int seq_sizes(const fm_rnn_cell *cell, int dtype, int64_t T, int64_t B, int64_t H,
                     int64_t *isz, int64_t *bh, int64_t *bg, int64_t *bw) {
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    if (T < 0 || B < 0 || H < 0) return FM_ERR_ARG;
    if (B == 0 || H == 0) return FM_OK;
    *isz = dtype == FM_FLOAT32 ? 4 : 8;
    *bh = B * H * *isz;
    *bg = cell->gates * *bh;
    *bw = cell->ws_gates * *bh;
    return -1;
}

int fm_rnn_seq_fwd(const fm_rnn_cell *cell, int dtype, int64_t T, int64_t B, int64_t H,
                   int reverse, intptr_t xw, intptr_t w, intptr_t bias, intptr_t h0, intptr_t c0,
                   intptr_t out, intptr_t hn, intptr_t cn, intptr_t hall, intptr_t call,
                   intptr_t ws) {
    int64_t G = cell->gates, isz, bh, bg, bw;
    int chk = seq_sizes(cell, dtype, T, B, H, &isz, &bh, &bg, &bw);
    if (chk >= 0) return chk;
    char *Hs = (char *)hall, *Cs = cell->has_c ? (char *)call : NULL;
    int64_t init = reverse ? T : 0;
    memcpy(Hs + init * bh, (const void *)h0, (size_t)bh);
    if (Cs) memcpy(Cs + init * bh, (const void *)c0, (size_t)bh);
    int rc = FM_OK;
    if (T > 0) {
        fm_gemm_plan plan; /* gates_t += h_prev (B x H) @ W^T (H x G*H) */
        rc = fm_gemm_plan_init(&plan, dtype, B, G * H, H, (const void *)w, 1, H);
        if (rc != FM_OK) return rc;
        /* the product's buffer, and (hidden-bias cells) the rows it starts from each step */
        int64_t nbuf = cell->xw_in_product ? bg : 2 * bg;
        char *gates = (char *)fm_alloc(nbuf);
        if (!gates) {
            fm_gemm_plan_free(&plan);
            return FM_ERR_NOMEM;
        }
        char *start = cell->xw_in_product ? NULL : gates + bg;
        if (start) {
            if (bias)
                for (int64_t b = 0; b < B; b++)
                    memcpy(start + b * (bg / B), (const void *)bias, (size_t)(bg / B));
            else
                memset(start, 0, (size_t)bg);
        }
        int nt = cell_threads(&plan, B, H);
        for (int64_t s = 0; s < T; s++) {
            int64_t t = reverse ? T - 1 - s : s;
            int64_t p = slot_prev(reverse, t) * bh, q = slot_next(reverse, t) * bh;
            const char *xwt = (const char *)xw + t * bg;
            memcpy(gates, start ? start : xwt, (size_t)bg);
            rc = fm_gemm_plan_run(&plan, Hs + p, H, 1.0, gates, G * H);
            if (rc != FM_OK) break;
            fm_rnn_fwd_rows st = {H,      gates,  xwt, Hs + p, at(Cs, p),
                                  Hs + q, at(Cs, q), (char *)ws + t * bw};
            char *outt = (char *)out + t * bh;
            if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
                for (int k = 0; k < nt; k++)
                    fwd_block(cell, dtype, &st, B * k / nt, B * (k + 1) / nt, outt);
            } else {
                fwd_block(cell, dtype, &st, 0, B, outt);
            }
        }
        fm_free((intptr_t)gates, nbuf);
        fm_gemm_plan_free(&plan);
        if (rc != FM_OK) return rc;
    }
    int64_t last = reverse ? 0 : T;
    memcpy((void *)hn, Hs + last * bh, (size_t)bh);
    if (Cs) memcpy((void *)cn, Cs + last * bh, (size_t)bh);
    return FM_OK;
}

static void copy_or_zero(void *dst, intptr_t src, int64_t bytes) {
    if (src) memcpy(dst, (const void *)src, (size_t)bytes);
    else memset(dst, 0, (size_t)bytes);
}

int fm_rnn_seq_bwd(const fm_rnn_cell *cell, int dtype, int64_t T, int64_t B, int64_t H,
                   int reverse, intptr_t w, intptr_t states, intptr_t ws, intptr_t gout,
                   intptr_t ghn, intptr_t gcn, intptr_t gx, intptr_t gh, intptr_t gh0,
                   intptr_t gc0) {
    int64_t G = cell->gates, isz, bh, bg, bw;
    int chk = seq_sizes(cell, dtype, T, B, H, &isz, &bh, &bg, &bw);
    if (chk >= 0) return chk;
    copy_or_zero((void *)gh0, ghn, bh);
    if (T == 0) {
        if (cell->has_c) copy_or_zero((void *)gc0, gcn, bh);
        return FM_OK;
    }
    if (!gh) gh = gx;
    fm_gemm_plan plan; /* dh_prev (+)= gh_t (B x G*H) @ W (G*H x H) */
    int rc = fm_gemm_plan_init(&plan, dtype, B, H, G * H, (const void *)w, H, 1);
    if (rc != FM_OK) return rc;
    /* scratch: two cell-state gradient buffers (ping-pong) and a row per thread */
    int nt = cell_threads(&plan, B, H);
    int64_t sbytes = (cell->has_c ? 2 * bh : 0) + nt * H * isz;
    char *scr = (char *)fm_alloc(sbytes);
    if (!scr) {
        fm_gemm_plan_free(&plan);
        return FM_ERR_NOMEM;
    }
    char *dca = NULL, *dcb = NULL, *tmp = scr;
    if (cell->has_c) {
        dca = scr, dcb = scr + bh, tmp = scr + 2 * bh;
        copy_or_zero(dca, gcn, bh);
    }
    char *dh = (char *)gh0; /* the running hidden-state gradient lives in gh0 */
    const char *S = (const char *)states;
    double beta = cell->dh_kept ? 1.0 : 0.0;
    for (int64_t s = 0; s < T; s++) {
        int64_t t = reverse ? s : T - 1 - s;
        fm_rnn_bwd_rows st = {H,
                              dh,
                              S + slot_prev(reverse, t) * bh,
                              S + slot_next(reverse, t) * bh,
                              (const char *)ws + t * bw,
                              (char *)gx + t * bg,
                              (char *)gh + t * bg,
                              dca,
                              dcb,
                              NULL};
        const char *got = gout ? (const char *)gout + t * bh : NULL;
        if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
            for (int k = 0; k < nt; k++)
                bwd_block(cell, dtype, &st, got, B * k / nt, B * (k + 1) / nt,
                          tmp + k * H * isz);
        } else {
            bwd_block(cell, dtype, &st, got, 0, B, tmp);
        }
        char *sw = dca;
        dca = dcb, dcb = sw;
        rc = fm_gemm_plan_run(&plan, st.gh, G * H, beta, dh, H);
        if (rc != FM_OK) break;
    }
    if (cell->has_c) memcpy((void *)gc0, dca, (size_t)bh);
    fm_free((intptr_t)scr, sbytes);
    fm_gemm_plan_free(&plan);
    return rc;
}
