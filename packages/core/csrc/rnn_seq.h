/* Internal (not part of the cffi API): the time loop of one recurrent layer direction, shared
 * by the LSTM (lstm.c) and GRU (gru.c) sequence entry points. The driver (rnn_seq.c) owns what
 * is the same for every cell: the state slots, the recurrent weight packed once for the
 * sequence (gemm_plan.h), each step's hidden product, the split of a step's rows over the
 * product's threads, and the reverse loop's product with the weight; a cell (fm_rnn_cell)
 * supplies the gate arithmetic of a block of rows, forward and backward.
 *
 * Buffers are time-major and contiguous: xw (T*B, G*H), out (T*B, H), the slots hall / call
 * ((T+1)*B, H: forward, slot 0 the initial state and slot t+1 the state after step t;
 * reverse, slot T the initial state and slot t the state after step t), ws (T*B, W*H). */
#ifndef FM_RNN_SEQ_H
#define FM_RNN_SEQ_H
#include <stdint.h>

/* one step's operands for a block of n rows, each pointer at the block's first row (row
   strides: G*H for gates and xw, W*H for ws, H for the states) */
typedef struct {
    int64_t H;
    const char *gates;   /* the hidden product of the step (started from xw or the bias) */
    const char *xw;      /* the step's input projection */
    const char *hp, *cp; /* the states read (cp: NULL without a cell state) */
    char *hy, *cy;       /* the states written */
    char *ws;            /* what the backward needs */
} fm_rnn_fwd_rows;

typedef struct {
    int64_t H;
    char *dh;            /* the gradient of the step's hidden output (the output's added);
                            cells with dh_kept leave here their part of the previous state's */
    const char *sp, *sn; /* the saved slots before and after the step (the backward's states) */
    const char *ws;
    char *gx;            /* the gradient of the xw rows */
    char *gh;            /* the gradient of the hidden product (may be gx) */
    const char *dca;     /* cell state: the incoming gradient of the state after the step */
    char *dcb;           /* and the outgoing one, of the state before it */
    char *tmp;           /* H elements of scratch for this block */
} fm_rnn_bwd_rows;

typedef struct {
    int gates;         /* G: the hidden product has G*H columns */
    int ws_gates;      /* W: a row of ws holds W*H elements */
    int has_c;         /* a cell state beside h */
    int xw_in_product; /* 1: a step's product accumulates onto xw_t (the cell reads only it);
                          0: onto the hidden bias (or zero), xw_t read by the cell beside it */
    int dh_kept;       /* 1: the product with the weight adds to what the cell left in dh */
    void (*fwd)(int dtype, int64_t n, const fm_rnn_fwd_rows *s);
    void (*bwd)(int dtype, int64_t n, const fm_rnn_bwd_rows *s);
} fm_rnn_cell;

/* w = W_hh (G*H, H); bias (G*H) or 0 (used when !xw_in_product); c0, cn, call: 0 without a
   cell state. FM_OK or an FM_ERR_* code. */
int fm_rnn_seq_fwd(const fm_rnn_cell *cell, int dtype, int64_t T, int64_t B, int64_t H,
                   int reverse, intptr_t xw, intptr_t w, intptr_t bias, intptr_t h0, intptr_t c0,
                   intptr_t out, intptr_t hn, intptr_t cn, intptr_t hall, intptr_t call,
                   intptr_t ws);
/* states: the slots the cell's backward reads (sp/sn); gout, ghn, gcn may be 0 (zero); gh the
   hidden product's gradient (T*B, G*H), 0: the same as gx; gc0 0 without a cell state. */
int fm_rnn_seq_bwd(const fm_rnn_cell *cell, int dtype, int64_t T, int64_t B, int64_t H,
                   int reverse, intptr_t w, intptr_t states, intptr_t ws, intptr_t gout,
                   intptr_t ghn, intptr_t gcn, intptr_t gx, intptr_t gh, intptr_t gh0,
                   intptr_t gc0);
#endif
