/* Fused LSTM cell arithmetic (lstm.c): the gate nonlinearities and the cell update of one time
 * step, forward and backward, each one pass (the matrix products stay with the caller).
 * cffi cdef rules: plain declarations and integer #defines only.
 *
 * dtype is FM_FLOAT32 or FM_FLOAT64; gates (B, 4H) with row stride sg (gate order i, f, g, o
 * as PyTorch's), every other operand contiguous. With i, f, o = sigmoid and g = tanh of the
 * gate columns:
 * fm_lstm_cell_fwd: cy = f cx + i g, hy = o tanh(cy); ws (B, 4H) receives (i, f, g, o).
 * fm_lstm_cell_bwd: from the incoming ghy, gcy (either 0: zero), cx, cy and ws: the gate
 *   gradient ggates (B, 4H) and gcx (B, H) (0: not computed). */

int fm_lstm_cell_fwd(int dtype, int64_t B, int64_t H, intptr_t gates, int64_t sg, intptr_t cx,
                     intptr_t hy, intptr_t cy, intptr_t ws);
int fm_lstm_cell_bwd(int dtype, int64_t B, int64_t H, intptr_t ghy, intptr_t gcy, intptr_t cx,
                     intptr_t cy, intptr_t ws, intptr_t ggates, intptr_t gcx);

/* A whole layer, one direction, T time steps of B rows (time-major, every buffer contiguous):
 * fm_lstm_seq_fwd: xw (T*B, 4H) = each step's input projection plus both biases, w = W_hh
 *   (4H, H); h0, c0 (B, H) the initial state. Writes out (T*B, H) the hidden states in time
 *   order, hn, cn (B, H) the final state, and for the backward: hall, call ((T+1)*B, H) the
 *   states in slots (forward: slot 0 the initial state, slot t+1 the state after step t;
 *   reverse (steps T-1 .. 0): slot T the initial state, slot t the state after step t) and
 *   ws (T*B, 4H) the activated gates.
 * fm_lstm_seq_bwd: from the incoming gout (T*B, H), ghn, gcn (B, H) (each 0: zero) and the
 *   forward's call and ws: ggates (T*B, 4H) (the gradient of xw) and gh0, gc0 (B, H). The
 *   gradient of W_hh is ggates^T @ (the hall slots read by each step), left to the caller. */
int fm_lstm_seq_fwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t xw,
                    intptr_t w, intptr_t h0, intptr_t c0, intptr_t out, intptr_t hn, intptr_t cn,
                    intptr_t hall, intptr_t call, intptr_t ws);
int fm_lstm_seq_bwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t w,
                    intptr_t call, intptr_t ws, intptr_t gout, intptr_t ghn, intptr_t gcn,
                    intptr_t ggates, intptr_t gh0, intptr_t gc0);
