/* Greedy non-maximum suppression (see api_detection.h). The boxes are copied in score order
 * into structure-of-arrays buffers so the inner suppression loop reads memory sequentially. */
#include <stdlib.h>
#include <string.h>
#include "fiamma.h"
#include "api_detection.h"

typedef struct {
    double score;
    int64_t idx;
} fm_scored;

static int cmp_scored(const void *pa, const void *pb) {
    const fm_scored *a = (const fm_scored *)pa, *b = (const fm_scored *)pb;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

#define FM_NMS_IMPL(NAME, T)                                                                  \
    static int NAME(int64_t n, const T *bx, const T *sc, double thr, int64_t *keep,           \
                    int64_t *nkeep) {                                                          \
        fm_scored *order = malloc((size_t)(n ? n : 1) * sizeof(fm_scored));                   \
        T *buf = malloc((size_t)(n ? n : 1) * 5 * sizeof(T));                                  \
        unsigned char *dead = calloc((size_t)(n ? n : 1), 1);                                  \
        if (!order || !buf || !dead) {                                                         \
            free(order); free(buf); free(dead);                                                \
            return FM_ERR_NOMEM;                                                               \
        }                                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                      \
            order[i].score = (double)sc[i];                                                    \
            order[i].idx = i;                                                                  \
        }                                                                                      \
        qsort(order, (size_t)n, sizeof(fm_scored), cmp_scored);                                \
        T *x1 = buf, *y1 = buf + n, *x2 = buf + 2 * n, *y2 = buf + 3 * n, *ar = buf + 4 * n;   \
        for (int64_t i = 0; i < n; i++) {                                                      \
            const T *b = bx + 4 * order[i].idx;                                                \
            x1[i] = b[0]; y1[i] = b[1]; x2[i] = b[2]; y2[i] = b[3];                            \
            ar[i] = (b[2] - b[0]) * (b[3] - b[1]);                                             \
        }                                                                                      \
        const T t = (T)thr;                                                                    \
        int64_t k = 0;                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                      \
            if (dead[i]) continue;                                                             \
            keep[k++] = order[i].idx;                                                          \
            const T ix1 = x1[i], iy1 = y1[i], ix2 = x2[i], iy2 = y2[i], ia = ar[i];            \
            for (int64_t j = i + 1; j < n; j++) {                                              \
                if (dead[j]) continue;                                                         \
                T w = (ix2 < x2[j] ? ix2 : x2[j]) - (ix1 > x1[j] ? ix1 : x1[j]);               \
                T h = (iy2 < y2[j] ? iy2 : y2[j]) - (iy1 > y1[j] ? iy1 : y1[j]);               \
                if (w <= 0 || h <= 0) continue;                                                \
                T inter = w * h;                                                               \
                T iou = inter / (ia + ar[j] - inter);                                          \
                if (iou > t) dead[j] = 1;                                                      \
            }                                                                                  \
        }                                                                                      \
        *nkeep = k;                                                                            \
        free(order); free(buf); free(dead);                                                    \
        return FM_OK;                                                                          \
    }

FM_NMS_IMPL(nms_f32, float)
FM_NMS_IMPL(nms_f64, double)

int fm_nms(int dtype, int64_t n, intptr_t boxes, intptr_t scores, double iou_threshold,
           intptr_t keep, int64_t *nkeep) {
    if (n < 0 || !nkeep) return FM_ERR_ARG;
    if (dtype == FM_FLOAT32)
        return nms_f32(n, (const float *)boxes, (const float *)scores, iou_threshold,
                       (int64_t *)keep, nkeep);
    if (dtype == FM_FLOAT64)
        return nms_f64(n, (const double *)boxes, (const double *)scores, iou_threshold,
                       (int64_t *)keep, nkeep);
    return FM_ERR_DTYPE;
}
