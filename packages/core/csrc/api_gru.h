/* A whole GRU layer, one direction, in C (gru.c; the time loop is rnn_seq.c's, shared with the
 * LSTM). cffi cdef rules: plain declarations and integer #defines only.
 *
 * Gate order r, z, n as PyTorch's. T time steps of B rows, time-major, every buffer
 * contiguous, dtype FM_FLOAT32 or FM_FLOAT64. Per step, with gh = h W_hh^T + b_hh:
 * r = sigmoid(xw_r + gh_r), z = sigmoid(xw_z + gh_z), n = tanh(xw_n + r gh_n),
 * h' = (1 - z) n + z h.
 * fm_gru_seq_fwd: xw (T*B, 3H) = each step's x W_ih^T + b_ih, w = W_hh (3H, H), bhh (3H) or 0
 *   (no hidden bias), h0 (B, H). Writes out (T*B, H) the hidden states in time order, hn (B, H)
 *   and for the backward: hall ((T+1)*B, H) the states in slots (forward: slot 0 the initial
 *   state, slot t+1 the state after step t; reverse: slot T the initial state, slot t the
 *   state after step t) and ws (T*B, 4H): r, z, n and gh_n.
 * fm_gru_seq_bwd: from the incoming gout (T*B, H) and ghn (B, H) (each 0: zero) and the
 *   forward's hall and ws: gxw (T*B, 3H) the gradient of xw, ggh (T*B, 3H) that of gh and
 *   gh0 (B, H). W_hh's gradient is ggh^T @ (the hall slots each step read), b_hh's the column
 *   sums of ggh: left to the caller. */
int fm_gru_seq_fwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t xw,
                   intptr_t w, intptr_t bhh, intptr_t h0, intptr_t out, intptr_t hn,
                   intptr_t hall, intptr_t ws);
int fm_gru_seq_bwd(int dtype, int64_t T, int64_t B, int64_t H, int reverse, intptr_t w,
                   intptr_t hall, intptr_t ws, intptr_t gout, intptr_t ghn, intptr_t gxw,
                   intptr_t ggh, intptr_t gh0);
