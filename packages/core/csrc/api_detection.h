/* Detection kernels (detection.c): greedy non-maximum suppression.
 *
 * fm_nms: boxes (n, 4) contiguous (x1, y1, x2, y2) and scores (n,) contiguous, both of dtype
 * (FM_FLOAT32 or FM_FLOAT64). Writes into keep (int64, room for n) the indices of the boxes
 * kept, in decreasing score order (ties: lower index first), and their count into *nkeep. A box
 * is dropped when its IoU with a kept, higher-scored box is greater than iou_threshold. IoU is
 * computed in the boxes' dtype as inter / (area_i + area_j - inter).
 * Errors: FM_ERR_DTYPE, FM_ERR_ARG (n < 0), FM_ERR_NOMEM.
 */
int fm_nms(int dtype, int64_t n, intptr_t boxes, intptr_t scores, double iou_threshold,
           intptr_t keep, int64_t *nkeep);
