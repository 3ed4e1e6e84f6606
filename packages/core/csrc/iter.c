/* The strided N-d iterator every elementwise kernel runs on. */
#include "dims.h"
#include "fiamma.h"

int64_t fm_numel(int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > FM_MAX_DIMS) return -1;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        n *= shape[i];
    }
    return n;
}

int fm_iterate(int nops, int ndim, const int64_t *shape, char **base,
               const int64_t *const *strides, const int *itemsizes,
               fm_inner_fn fn, const void *ctx) {
    if (nops < 1 || nops > FM_MAX_OPERANDS) return FM_ERR_ARG;
    if (ndim < 0 || ndim > FM_MAX_DIMS) return FM_ERR_NDIM;
    int64_t sh[FM_MAX_DIMS + 1];
    int64_t st[FM_MAX_OPERANDS][FM_MAX_DIMS + 1]; /* byte strides */
    /* size-1 dimensions dropped; d merged into d+1 when every operand steps through them as one */
    int nd = fm_collapse_dims(nops, ndim, shape, strides, itemsizes, sh, &st[0][0],
                              FM_MAX_DIMS + 1);
    if (nd == -2) return FM_ERR_ARG;
    if (nd == -1) return FM_OK;
    if (nd == 0) { /* a single element */
        sh[0] = 1;
        for (int k = 0; k < nops; k++) st[k][0] = itemsizes[k];
        nd = 1;
    }
    int inner = nd - 1;
    int64_t istr[FM_MAX_OPERANDS];
    char *ptrs[FM_MAX_OPERANDS];
    for (int k = 0; k < nops; k++) istr[k] = st[k][inner];
    if (nd == 1) {
        for (int k = 0; k < nops; k++) ptrs[k] = base[k];
        fn(sh[0], ptrs, istr, ctx);
        return FM_OK;
    }
    /* odometer over the outer dimensions */
    int64_t idx[FM_MAX_DIMS];
    memset(idx, 0, sizeof(idx));
    for (int k = 0; k < nops; k++) ptrs[k] = base[k];
    for (;;) {
        fn(sh[inner], ptrs, istr, ctx);
        int d = inner - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            for (int k = 0; k < nops; k++) ptrs[k] += st[k][d];
            if (idx[d] < sh[d]) break;
            for (int k = 0; k < nops; k++) ptrs[k] -= st[k][d] * sh[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    return FM_OK;
}
