/* Concatenation of contiguous parts as byte rows (see api_join.h). */
#include "fiamma.h"
#include "api_join.h"

int fm_cat_bytes(int nparts, int64_t rows, intptr_t out, int64_t out_row,
                 const intptr_t *ptrs, const int64_t *widths) {
    if (nparts < 0 || rows < 0 || out_row < 0) return FM_ERR_ARG;
    int64_t total = 0;
    for (int i = 0; i < nparts; i++) {
        if (widths[i] < 0) return FM_ERR_ARG;
        total += widths[i];
    }
    if (total != out_row) return FM_ERR_ARG;
    char *o = (char *)out;
    if (rows == 1) {
        for (int i = 0; i < nparts; i++) {
            if (widths[i]) memcpy(o, (const char *)ptrs[i], (size_t)widths[i]);
            o += widths[i];
        }
        return FM_OK;
    }
    /* row by row, so that the result is written in order */
    for (int64_t r = 0; r < rows; r++) {
        for (int i = 0; i < nparts; i++) {
            int64_t w = widths[i];
            if (w) memcpy(o, (const char *)ptrs[i] + r * w, (size_t)w);
            o += w;
        }
    }
    return FM_OK;
}
