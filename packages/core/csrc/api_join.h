/* ---- concatenation (join.c) ----------------------------------------------------------------
 *
 * cat of contiguous parts of one dtype, as bytes: the result has `rows` rows of out_row bytes;
 * part i contributes widths[i] bytes to each row, read from rows of widths[i] bytes at ptrs[i]
 * (parts follow each other along the row in order). Used when every part is contiguous and of
 * the result's dtype; other parts go through fm_copy.
 */
int fm_cat_bytes(int nparts, int64_t rows, intptr_t out, int64_t out_row,
                 const intptr_t *ptrs, const int64_t *widths);
