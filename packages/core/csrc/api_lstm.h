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
