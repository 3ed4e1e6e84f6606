/* Shape simplification shared by the strided iterators (iter.c's fm_iterate, index.c's
   ix_iterate). */
#ifndef FIAMMA_DIMS_H
#define FIAMMA_DIMS_H

#include <stdint.h>

/* Drops the size-1 dimensions of shape (ndim of them) and merges a dimension into the next
   when every one of the nops operands steps through both as one, into sh (the sizes) and st
   (the byte strides: strides[q][d] * isz[q], operand q's row at st + q * row). Returns the
   dimensions kept (0 for a single element), -1 when a size is 0 (nothing to visit) and -2 when
   one is negative. */
static inline int fm_collapse_dims(int nops, int ndim, const int64_t *shape,
                                   const int64_t *const *strides, const int *isz, int64_t *sh,
                                   int64_t *st, int row) {
    int nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -2;
        if (shape[d] == 0) return -1;
        if (shape[d] == 1) continue;
        sh[nd] = shape[d];
        for (int q = 0; q < nops; q++) st[q * row + nd] = strides[q][d] * isz[q];
        nd++;
    }
    if (nd > 1) {
        int out = 0;
        for (int d = 1; d < nd; d++) {
            int merge = 1;
            for (int q = 0; q < nops; q++)
                if (st[q * row + out] != st[q * row + d] * sh[d]) { merge = 0; break; }
            if (merge) {
                sh[out] *= sh[d];
            } else {
                out++;
                sh[out] = sh[d];
            }
            for (int q = 0; q < nops; q++) st[q * row + out] = st[q * row + d];
        }
        nd = out + 1;
    }
    return nd;
}

#endif
