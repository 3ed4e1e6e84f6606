"""PowerSGD gradient compression for DDP (Vogels et al., NeurIPS 2019), with PyTorch's API
(``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``).

Each gradient matrix ``M`` (n x m; a parameter of more than one dimension seen as
``shape[0] x rest``) is sent as two thin factors: ``P = M Q`` is all-reduced and orthogonalized,
then ``Q = M^T P`` is all-reduced, and the average is approximated by ``P Q^T / world``. With
error feedback the part the approximation missed is added to the next step's gradient; with
warm start ``Q`` is kept from the step before. Vectors (biases, norms' weights) and matrices
too small to gain ``min_compression_rate`` are averaged exactly in one all-reduce. For the
first ``start_powerSGD_iter`` steps the hook is the plain averaging all-reduce.

:func:`batched_powerSGD_hook` compresses the whole bucket as one square matrix instead.

>>> from fiamma.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
>>> state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=1,
...                                start_powerSGD_iter=10)                 # doctest: +SKIP
>>> ddp.register_comm_hook(state, powerSGD.powerSGD_hook)                  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math

import numpy as np

import fiamma
import fiamma.distributed as dist
from fiamma.distributed.algorithms.ddp_comm_hooks import default_hooks as _default

__all__ = ["PowerSGDState", "powerSGD_hook", "batched_powerSGD_hook"]

logger = logging.getLogger(__name__)


def _orthogonalize(matrix, epsilon=0):
    """Orthonormal columns spanning those of ``matrix`` (n x r, r <= n), in place.

    One column is divided by its norm (plus ``epsilon``: a zero column is otherwise divided by
    zero, as in PyTorch). Several go through a Householder QR (in float32 for 16-bit
    matrices) rather than Gram-Schmidt: a gradient of lower rank than r leaves a column that is
    only rounding noise, which Gram-Schmidt normalizes into a vector that is not orthogonal to
    the others (the approximation is then wrong), and QR completes the basis exactly."""
    if matrix.shape[1] == 1:
        norm = fiamma.linalg.vector_norm(matrix)
        matrix.div_(norm + epsilon if epsilon else norm)
        return
    work = matrix if matrix.dtype in (fiamma.float32, fiamma.float64) else matrix.float()
    matrix.copy_(fiamma.linalg.qr(work)[0])


def _should_compress(num_rows, num_cols, rank, min_compression_rate):
    """(compress?, elements uncompressed, elements of the two factors)."""
    uncompressed = num_rows * num_cols
    compressed = (num_rows + num_cols) * rank
    return compressed * min_compression_rate < uncompressed, uncompressed, compressed


class PowerSGDState:
    """The settings and the memory (error feedback, warm-start factors, step count) that
    :func:`powerSGD_hook` keeps between steps, per bucket.

    ``matrix_approximation_rank``: the rank of the factors (1 compresses most; 2-4 for
    accuracy). ``start_powerSGD_iter``: plain all-reduce for the first steps.
    ``min_compression_rate``: matrices compressed only when the factors are that many times
    smaller. ``random_seed`` seeds the initial ``Q`` the same way on every rank (the global
    random stream is not touched). ``batch_tensors_with_same_shape`` is accepted for
    PyTorch's signature: matrices are compressed one by one either way (the results are the
    same)."""

    __slots__ = ["process_group", "matrix_approximation_rank", "start_powerSGD_iter",
                 "min_compression_rate", "orthogonalization_epsilon", "use_error_feedback",
                 "warm_start", "batch_tensors_with_same_shape", "rng", "error_dict",
                 "p_memory_dict", "q_memory_dict", "iter", "total_numel_before_compression",
                 "total_numel_after_compression", "compression_stats_logging_frequency",
                 "next_stats_report"]

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True,
                 orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000,
                 batch_tensors_with_same_shape=False):
        if int(matrix_approximation_rank) < 1:
            raise ValueError(f"PowerSGDState: matrix_approximation_rank must be >= 1, got "
                             f"{matrix_approximation_rank}")
        if start_powerSGD_iter < 0:
            raise ValueError(f"PowerSGDState: start_powerSGD_iter must be >= 0, got "
                             f"{start_powerSGD_iter}")
        self.process_group = process_group
        self.matrix_approximation_rank = int(matrix_approximation_rank)
        self.start_powerSGD_iter = int(start_powerSGD_iter)
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = bool(use_error_feedback)
        self.warm_start = bool(warm_start)
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.batch_tensors_with_same_shape = bool(batch_tensors_with_same_shape)
        self.rng = np.random.RandomState(random_seed)
        self.error_dict = {}
        self.p_memory_dict = {}
        self.q_memory_dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, compression_stats_logging_frequency)
        self.next_stats_report = 0

    def __getstate__(self):
        """For checkpoints: everything but the process group (not picklable)."""
        return {k: getattr(self, k) for k in self.__slots__ if k != "process_group"}

    def __setstate__(self, state):
        self.process_group = None  # the default group, after loading
        for k, v in state.items():
            setattr(self, k, v)

    def maybe_increase_iter(self, bucket):
        """Count a step once its last bucket is reduced."""
        if bucket.is_last():
            self.iter += 1
            if self.iter == self.start_powerSGD_iter:
                logger.info("Start to apply PowerSGD after %d iterations.", self.iter)

    def compression_stats(self):
        """(compression rate, elements before, elements after) over the compressed steps."""
        after = self.total_numel_after_compression
        rate = self.total_numel_before_compression / after if after > 0 else 0
        return rate, self.total_numel_before_compression, after

    def _maybe_log(self):
        if self.iter >= self.next_stats_report:
            rate, before, after = self.compression_stats()
            logger.info("Compression stats: iter %d, total before compression %d, total after "
                        "compression %d, rate %.2f", self.iter, before, after, rate)
            self.next_stats_report += self.compression_stats_logging_frequency


def _random_q(state, rows, cols, dtype, device):
    seed = state.rng.randint(1_000_000_000)
    q = np.random.RandomState(seed).standard_normal((rows, cols)).astype(np.float32)
    return fiamma.from_numpy(q).to(device=device, dtype=dtype)


def _allreduce_then(g, tensor, then):
    """All-reduce ``tensor`` (async) and chain ``then(result)``."""
    return dist.all_reduce(tensor, group=g, async_op=True).get_future().then(
        lambda fut: then(fut.value()[0]))


def _warm_up(state, bucket):
    """(group, world size, the bucket's tensor, the plain all-reduce's future while the steps
    before ``start_powerSGD_iter`` run, else None)."""
    g = _default._group(state.process_group)
    input_tensor = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return g, g.size(), input_tensor, _default._allreduce_fut(g, input_tensor)
    return g, g.size(), input_tensor, None


def powerSGD_hook(state, bucket):
    """Compress each gradient matrix of the bucket to rank ``state.matrix_approximation_rank``
    factors (see the module's description); vectors are averaged exactly."""
    g, world, input_tensor, plain = _warm_up(state, bucket)
    if plain is not None:
        return plain
    idx = bucket.index()
    dtype, device = input_tensor.dtype, input_tensor.device
    with fiamma.no_grad():
        if state.use_error_feedback:
            if idx in state.error_dict:
                input_tensor.add_(state.error_dict[idx])
            else:
                state.error_dict[idx] = fiamma.zeros(input_tensor.numel(), dtype=dtype,
                                                     device=device)
            input_copy = input_tensor.clone()
        flat = input_tensor.reshape(-1)
        views, offset = [], 0
        for p in bucket.parameters():
            views.append(flat[offset:offset + p.numel()].view(p.shape))
            offset += p.numel()
        plain, matrices = [], []
        for t in views:
            if t.ndim <= 1:
                plain.append(t)
                state.total_numel_before_compression += t.numel()
                state.total_numel_after_compression += t.numel()
                continue
            matrix = t.reshape(t.shape[0], -1)
            n, m = matrix.shape
            rank = min(n, m, state.matrix_approximation_rank)
            compress, before, after = _should_compress(n, m, rank, state.min_compression_rate)
            state.total_numel_before_compression += before
            if compress:
                matrices.append((t, matrix, rank))
                state.total_numel_after_compression += after
            else:
                plain.append(t)
                state.total_numel_after_compression += before
        state._maybe_log()
        ps_size = sum(mat.shape[0] * r for _, mat, r in matrices)
        qs_size = sum(mat.shape[1] * r for _, mat, r in matrices)
        fresh = not state.warm_start or idx not in state.p_memory_dict
        if fresh or state.p_memory_dict[idx].numel() != ps_size:
            state.p_memory_dict[idx] = fiamma.empty(ps_size, dtype=dtype, device=device)
            state.q_memory_dict[idx] = fiamma.empty(qs_size, dtype=dtype, device=device)
            fresh = True
        p_mem, q_mem = state.p_memory_dict[idx], state.q_memory_dict[idx]
        ps, qs, po, qo = [], [], 0, 0
        for _, mat, r in matrices:
            n, m = mat.shape
            ps.append(p_mem[po:po + n * r].view(n, r))
            qs.append(q_mem[qo:qo + m * r].view(m, r))
            po, qo = po + n * r, qo + m * r
        if fresh:
            for q in qs:
                q.copy_(_random_q(state, q.shape[0], q.shape[1], dtype, device))
                _orthogonalize(q, state.orthogonalization_epsilon)
        for (_, mat, _), p, q in zip(matrices, ps, qs):
            p.copy_(mat @ q)
        plain_flat = (fiamma.cat([t.reshape(-1) for t in plain]) if plain
                      else fiamma.zeros(0, dtype=dtype, device=device))
        plain_flat.div_(world)

    def unpack_plain_then_ps(reduced):
        with fiamma.no_grad():
            o = 0
            for t in plain:
                t.copy_(reduced[o:o + t.numel()].view(t.shape))
                o += t.numel()
        if not matrices:  # (the same on every rank: the buckets' layouts are equal)
            return decompress(None)
        return _allreduce_then(g, p_mem, compute_qs).wait()

    def compute_qs(p_reduced):
        with fiamma.no_grad():
            for p in ps:
                _orthogonalize(p, state.orthogonalization_epsilon)
            for (_, mat, _), p, q in zip(matrices, ps, qs):
                q.copy_(mat.t() @ p)
        return _allreduce_then(g, q_mem, decompress).wait()

    def decompress(q_reduced):
        with fiamma.no_grad():
            q_mem.div_(world)
            for (t, _, _), p, q in zip(matrices, ps, qs):
                t.copy_((p @ q.t()).view(t.shape))
            if state.use_error_feedback:
                state.error_dict[idx] = input_copy - input_tensor
        if not state.warm_start:
            state.p_memory_dict.pop(idx, None)
            state.q_memory_dict.pop(idx, None)
        state.maybe_increase_iter(bucket)
        return input_tensor

    return dist.all_reduce(plain_flat, group=g, async_op=True).get_future().then(
        lambda fut: unpack_plain_then_ps(fut.value()[0]))


def batched_powerSGD_hook(state, bucket):
    """Compress the whole bucket as one square matrix (its elements zero-padded to the next
    square) to rank ``state.matrix_approximation_rank``: fewer, larger products than
    :func:`powerSGD_hook`, usually less accurate at the same rank."""
    g, world, input_tensor, plain = _warm_up(state, bucket)
    if plain is not None:
        return plain
    idx = bucket.index()
    dtype, device = input_tensor.dtype, input_tensor.device
    total = input_tensor.numel()
    side = math.ceil(math.sqrt(total))
    rank = min(side, state.matrix_approximation_rank)
    state.total_numel_before_compression += side * side
    state.total_numel_after_compression += side * rank * 2
    state._maybe_log()
    with fiamma.no_grad():
        padded = fiamma.zeros(side * side, dtype=dtype, device=device)
        padded[:total].copy_(input_tensor.reshape(-1))
        if state.use_error_feedback:
            if idx in state.error_dict:
                padded.add_(state.error_dict[idx])
            else:
                state.error_dict[idx] = fiamma.zeros(side * side, dtype=dtype, device=device)
            padded_copy = padded.clone()
        matrix = padded.view(side, side)
        fresh = not state.warm_start or idx not in state.p_memory_dict
        if fresh or tuple(state.p_memory_dict[idx].shape) != (side, rank):
            state.p_memory_dict[idx] = fiamma.empty(side, rank, dtype=dtype, device=device)
            state.q_memory_dict[idx] = _random_q(state, side, rank, dtype, device)
            _orthogonalize(state.q_memory_dict[idx], state.orthogonalization_epsilon)
        p, q = state.p_memory_dict[idx], state.q_memory_dict[idx]
        p.copy_(matrix @ q)

    def compute_q(p_reduced):
        with fiamma.no_grad():
            _orthogonalize(p, state.orthogonalization_epsilon)
            q.copy_(matrix.t() @ p)
        return _allreduce_then(g, q, decompress).wait()

    def decompress(q_reduced):
        with fiamma.no_grad():
            q.div_(world)
            approx = (p @ q.t()).reshape(-1)
            if state.use_error_feedback:
                state.error_dict[idx] = padded_copy - approx
            input_tensor.reshape(-1).copy_(approx[:total])
        if not state.warm_start:
            state.p_memory_dict.pop(idx, None)
            state.q_memory_dict.pop(idx, None)
        state.maybe_increase_iter(bucket)
        return input_tensor

    return _allreduce_then(g, p, compute_q)
