"""``LinearCrossEntropyOptions``: how ``F.linear_cross_entropy`` chunks its batch
(``torch.nn.LinearCrossEntropyOptions``, PyTorch 2.13's fields, defaults and checks)."""

import dataclasses

import fiamma

__all__ = ["LinearCrossEntropyOptions"]

_POLICIES = ("auto", "accurate", "balanced", "compact")


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """Options of the chunked ``linear_cross_entropy``: passing an instance (even
    ``LinearCrossEntropyOptions()``) selects the chunked computation, which never holds more
    than one ``(batch_chunk_size, num_classes)`` block of logits; ``options=None`` is the
    reference ``cross_entropy(linear(input, weight), target)``.

    ``batch_chunk_size``: rows per chunk (None: from ``chunking_method``, else one chunk).
    ``chunking_method``: ``"auto"`` (``"aspect_ratio:2"``), ``"aspect_ratio"`` or
    ``"aspect_ratio:N"`` (chunks whose logits are about as large as the input, divided by
    ``N``: ``next_pow2(ceil(N_rows / ceil(num_classes / in_features))) // N``), or None.
    Giving both ``batch_chunk_size`` and a ``chunking_method`` other than ``"auto"`` that
    disagree is a ValueError, as in PyTorch. ``acc_dtype``: the dtype of the logits and
    gradient accumulation (None: under ``acc_policy="auto"`` float32 for float16/bfloat16
    input, else the input's dtype).
    ``acc_policy`` is accepted and validated (fiamma has one CPU policy: ``"accurate"``'s
    float32 accumulation). ``allow_retain_graph`` is accepted; fiamma's chunked backward never
    consumes its buffers, so a second backward works either way.

    >>> from fiamma.nn import LinearCrossEntropyOptions
    >>> LinearCrossEntropyOptions(batch_chunk_size=256).batch_chunk_size
    256
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in _POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = str(self.chunking_method).partition(":")
            if not sep:
                factor = "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None or (
                isinstance(self.batch_chunk_size, int)
                and not isinstance(self.batch_chunk_size, bool) and self.batch_chunk_size > 0)):
            raise ValueError("batch_chunk_size must be positive int or None, got "
                             f"{self.batch_chunk_size!r}")
        allowed = (fiamma.float16, fiamma.bfloat16, fiamma.float32, fiamma.float64)
        if self.acc_dtype is not None and self.acc_dtype not in allowed:
            raise ValueError("acc_dtype must be one of {None, fiamma.float16, fiamma.bfloat16, "
                             f"fiamma.float32, fiamma.float64}}, got {self.acc_dtype!r}. Pass "
                             "acc_dtype=None to let the op pick automatically.")

    def _chunk_rows(self, rows, in_features, num_classes):
        """The number of rows per chunk for this call (PyTorch's resolution)."""
        method = self.chunking_method
        if method == "auto":
            method = None if self.batch_chunk_size is not None else "aspect_ratio:2"
        size = rows if self.batch_chunk_size is None else min(self.batch_chunk_size, rows)
        if method is not None:
            name, _, factor = method.partition(":")
            factor = int(factor) if factor else 1
            per = -(-num_classes // max(in_features, 1))
            target = max(-(-rows // per), 1)
            chunk = 1 << (target - 1).bit_length()
            size = min(chunk // factor, rows)
            if self.batch_chunk_size is not None and self.batch_chunk_size != size:
                raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and "
                                 f"chunking_method ('{method}') give different chunk sizes "
                                 f"({self.batch_chunk_size} vs {size}); pass only one.")
        return max(1, size)

    def _acc_dtype(self, dtype):
        if self.acc_dtype is not None:
            return self.acc_dtype
        if self.acc_policy == "auto" and dtype in (fiamma.float16, fiamma.bfloat16):
            return fiamma.float32
        return dtype
