/* Fused optimizer steps (see api_optim.h): one pass over each parameter's memory instead of the
 * eight or so passes of the op-by-op reference, which is what makes a step memory-bound at the
 * speed of one read and one write of each buffer. The arithmetic follows the reference in
 * fiamma-optim operation by operation (same formulas, same order, in the parameter's dtype), so
 * results agree with it to rounding. Large groups are split over OpenMP threads by element
 * ranges; a forked child runs single-threaded (libgomp's pool does not survive fork). */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#include "fiamma.h"
#include "api_optim.h"

#define OPT_PAR_MIN (1 << 18) /* elements: below this, one thread */
#define OPT_CHUNK (1 << 15)   /* elements per scheduled piece */

static volatile int opt_forked = 0;
static void opt_mark_forked(void) { opt_forked = 1; }
__attribute__((constructor)) static void opt_register_atfork(void) {
    pthread_atfork(NULL, NULL, opt_mark_forked);
}

typedef struct {
    double lr, b1, b2, eps, wd, mom, damp;
    int flags;
} opt_args;

#define DEF_ADAM(T)                                                                         \
    FM_CLONES static void adam_##T(int64_t n, T *FM_RESTRICT p, const T *FM_RESTRICT g,     \
                                   T *FM_RESTRICT m, T *FM_RESTRICT v, T *FM_RESTRICT vm,   \
                                   const opt_args *a, double t) {                           \
        const T lr = (T)a->lr, w1 = (T)(1.0 - a->b1), b2 = (T)a->b2, w2 = (T)(1.0 - a->b2); \
        const T eps = (T)a->eps, wd = (T)a->wd, decay = (T)(1.0 - a->lr * a->wd);          \
        const T step_size = (T)(-(a->lr / (1.0 - pow(a->b1, t))));                         \
        const T bc2s = (T)sqrt(1.0 - pow(a->b2, t));                                       \
        const int maximize = a->flags & FM_OPT_MAXIMIZE, ams = a->flags & FM_OPT_AMSGRAD;   \
        const int decoupled = a->flags & FM_OPT_DECOUPLED;                                  \
        (void)lr;                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T gi = maximize ? -g[i] : g[i], pi = p[i];                                      \
            if (wd != 0) {                                                                  \
                if (decoupled) pi = pi * decay;                                             \
                else gi = gi + wd * pi;                                                     \
            }                                                                               \
            T mi = m[i] + w1 * (gi - m[i]);                                                 \
            T vi = v[i] * b2 + w2 * (gi * gi);                                              \
            m[i] = mi;                                                                      \
            v[i] = vi;                                                                      \
            if (ams) {                                                                      \
                vi = vm[i] > vi ? vm[i] : vi;                                               \
                vm[i] = vi;                                                                 \
            }                                                                               \
            T denom = sqrt##T(vi) / bc2s + eps;                                             \
            p[i] = pi + step_size * (mi / denom);                                           \
        }                                                                                   \
    }

#define sqrtfloat sqrtf
#define sqrtdouble sqrt
DEF_ADAM(float)
DEF_ADAM(double)

#define DEF_SGD(T)                                                                          \
    FM_CLONES static void sgd_##T(int64_t n, T *FM_RESTRICT p, const T *FM_RESTRICT g,      \
                                  T *FM_RESTRICT b, const opt_args *a) {                    \
        const T lr = (T)a->lr, mom = (T)a->mom, w = (T)(1.0 - a->damp), wd = (T)a->wd;     \
        const int maximize = a->flags & FM_OPT_MAXIMIZE, nest = a->flags & FM_OPT_NESTEROV; \
        const int first = a->flags & FM_OPT_FIRST;                                          \
        /* the common cases without the general loop's per-element branches, so that they  \
           vectorise (the same arithmetic in the same order as the general loop)           */ \
        if (!maximize && wd == 0 && !nest && !first) {                                      \
            if (b) {                                                                        \
                for (int64_t i = 0; i < n; i++) {                                           \
                    T bi = b[i] * mom + w * g[i];                                           \
                    b[i] = bi;                                                              \
                    p[i] = p[i] + (-lr) * bi;                                               \
                }                                                                           \
            } else {                                                                        \
                for (int64_t i = 0; i < n; i++) p[i] = p[i] + (-lr) * g[i];                 \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T gi = maximize ? -g[i] : g[i];                                                 \
            if (wd != 0) gi = gi + wd * p[i];                                               \
            if (b) {                                                                        \
                T bi = first ? gi : b[i] * mom + w * gi;                                    \
                b[i] = bi;                                                                  \
                gi = nest ? gi + mom * bi : bi;                                             \
            }                                                                               \
            p[i] = p[i] + (-lr) * gi;                                                       \
        }                                                                                   \
    }
DEF_SGD(float)
DEF_SGD(double)

/* The (tensor, element range) pieces of a group, in order; piece k covers elements
   [off, off + len) of tensor idx. */
typedef struct {
    int64_t idx, off, len;
} opt_piece;

static opt_piece *plan(int64_t nt, const int64_t *numel, int64_t *npieces, int64_t *total) {
    int64_t np = 0, tot = 0;
    for (int64_t i = 0; i < nt; i++) {
        if (numel[i] < 0) return NULL;
        np += (numel[i] + OPT_CHUNK - 1) / OPT_CHUNK;
        tot += numel[i];
    }
    opt_piece *pc = malloc((size_t)(np ? np : 1) * sizeof(opt_piece));
    if (!pc) return NULL;
    int64_t k = 0;
    for (int64_t i = 0; i < nt; i++)
        for (int64_t o = 0; o < numel[i]; o += OPT_CHUNK) {
            pc[k].idx = i;
            pc[k].off = o;
            pc[k].len = numel[i] - o < OPT_CHUNK ? numel[i] - o : OPT_CHUNK;
            k++;
        }
    *npieces = np;
    *total = tot;
    return pc;
}

static int check_common(int64_t nt, int dtype, const intptr_t *p, const intptr_t *g,
                        const int64_t *numel) {
    if (nt < 0 || !p || !g || !numel) return FM_ERR_ARG;
    if (dtype != FM_FLOAT32 && dtype != FM_FLOAT64) return FM_ERR_DTYPE;
    for (int64_t i = 0; i < nt; i++)
        if (numel[i] < 0 || (numel[i] && (!p[i] || !g[i]))) return FM_ERR_ARG;
    return FM_OK;
}

int fm_adam_step(int64_t nt, int dtype, const intptr_t *p, const intptr_t *g, const intptr_t *m,
                 const intptr_t *v, const intptr_t *vmax, const int64_t *numel,
                 const double *step, double lr, double beta1, double beta2, double eps,
                 double weight_decay, int flags) {
    int rc = check_common(nt, dtype, p, g, numel);
    if (rc) return rc;
    if (!m || !v || !step || ((flags & FM_OPT_AMSGRAD) && !vmax)) return FM_ERR_ARG;
    for (int64_t i = 0; i < nt; i++)
        if (numel[i] && (!m[i] || !v[i] || ((flags & FM_OPT_AMSGRAD) && !vmax[i]) ||
                         !(step[i] >= 1)))
            return FM_ERR_ARG;
    int64_t np, total;
    opt_piece *pc = plan(nt, numel, &np, &total);
    if (!pc) return FM_ERR_NOMEM;
    opt_args a = {lr, beta1, beta2, eps, weight_decay, 0, 0, flags};
    int nth = total >= OPT_PAR_MIN && !opt_forked ? omp_get_max_threads() : 1;
#define ADAM_PIECE(k)                                                                       \
    do {                                                                                    \
        int64_t i = pc[k].idx, o = pc[k].off, n = pc[k].len;                                \
        if (dtype == FM_FLOAT32)                                                            \
            adam_float(n, (float *)p[i] + o, (const float *)g[i] + o, (float *)m[i] + o,     \
                       (float *)v[i] + o, vmax && vmax[i] ? (float *)vmax[i] + o : NULL, &a, \
                       step[i]);                                                            \
        else                                                                                \
            adam_double(n, (double *)p[i] + o, (const double *)g[i] + o, (double *)m[i] + o, \
                        (double *)v[i] + o, vmax && vmax[i] ? (double *)vmax[i] + o : NULL,  \
                        &a, step[i]);                                                       \
    } while (0)
    if (nth > 1) {
#pragma omp parallel for num_threads(nth) schedule(static)
        for (int64_t k = 0; k < np; k++) ADAM_PIECE(k);
    } else {
        for (int64_t k = 0; k < np; k++) ADAM_PIECE(k);
    }
#undef ADAM_PIECE
    free(pc);
    return FM_OK;
}

int fm_sgd_step(int64_t nt, int dtype, const intptr_t *p, const intptr_t *g, const intptr_t *buf,
                const int64_t *numel, double lr, double momentum, double dampening,
                double weight_decay, int flags) {
    int rc = check_common(nt, dtype, p, g, numel);
    if (rc) return rc;
    if (momentum != 0 && !buf) return FM_ERR_ARG;
    for (int64_t i = 0; i < nt; i++)
        if (momentum != 0 && numel[i] && !buf[i]) return FM_ERR_ARG;
    int64_t np, total;
    opt_piece *pc = plan(nt, numel, &np, &total);
    if (!pc) return FM_ERR_NOMEM;
    opt_args a = {lr, 0, 0, 0, weight_decay, momentum, dampening, flags};
    int nth = total >= OPT_PAR_MIN && !opt_forked ? omp_get_max_threads() : 1;
#define SGD_PIECE(k)                                                                        \
    do {                                                                                    \
        int64_t i = pc[k].idx, o = pc[k].off, n = pc[k].len;                                \
        if (dtype == FM_FLOAT32)                                                            \
            sgd_float(n, (float *)p[i] + o, (const float *)g[i] + o,                         \
                      momentum != 0 ? (float *)buf[i] + o : NULL, &a);                      \
        else                                                                                \
            sgd_double(n, (double *)p[i] + o, (const double *)g[i] + o,                      \
                       momentum != 0 ? (double *)buf[i] + o : NULL, &a);                    \
    } while (0)
    if (nth > 1) {
#pragma omp parallel for num_threads(nth) schedule(static)
        for (int64_t k = 0; k < np; k++) SGD_PIECE(k);
    } else {
        for (int64_t k = 0; k < np; k++) SGD_PIECE(k);
    }
#undef SGD_PIECE
    free(pc);
    return FM_OK;
}
