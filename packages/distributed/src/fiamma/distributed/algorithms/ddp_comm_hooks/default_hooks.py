"""PyTorch's default DDP communication hooks (``torch.distributed.algorithms.ddp_comm_hooks.
default_hooks``): the averaging all-reduce, and the same on a float16/bfloat16 copy of each
bucket (half the bytes on the wire), and wrappers that run any hook on such a copy.

The ``process_group`` argument is the hook's state (``None``: the default group).

>>> from fiamma.distributed.algorithms.ddp_comm_hooks import default_hooks
>>> ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)  # doctest: +SKIP
"""

from __future__ import annotations

import fiamma
import fiamma.distributed as dist

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook",
           "fp16_compress_wrapper", "bf16_compress_wrapper"]


def _group(process_group):
    return process_group if process_group is not None else dist.group.WORLD


def _allreduce_fut(process_group, tensor):
    """All-reduce ``tensor / world size`` in place; a future of the result."""
    g = _group(process_group)
    tensor.div_(g.size())
    return dist.all_reduce(tensor, group=g, async_op=True).get_future().then(
        lambda fut: fut.value()[0])


def allreduce_hook(process_group, bucket):
    """Average the bucket over the group with one all-reduce (what DDP does without a hook).

    >>> ddp.register_comm_hook(None, allreduce_hook)  # doctest: +SKIP
    """
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket):
    g = _group(process_group)
    buffer = bucket.buffer()
    compressed = buffer if buffer.dtype == dtype else buffer.to(dtype)
    compressed.div_(g.size())
    fut = dist.all_reduce(compressed, group=g, async_op=True).get_future()

    def decompress(fut):
        value = fut.value()[0]
        if value is buffer:
            return buffer
        buffer.copy_(value)  # back into the bucket's own tensor (no new full-size tensor)
        return buffer

    return fut.then(decompress)


def fp16_compress_hook(process_group, bucket):
    """Average a float16 copy of the bucket (divided by the world size before the
    all-reduce, against overflow), then write it back into the bucket's dtype."""
    return _compress_hook(fiamma.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """:func:`fp16_compress_hook` with bfloat16 (float32's range, 8 bits of mantissa)."""
    return _compress_hook(fiamma.bfloat16, process_group, bucket)


def _compress_wrapper(dtype, hook, name):
    def wrapped(hook_state, bucket):
        original = bucket.buffer()
        bucket.set_buffer(original.to(dtype))
        fut = hook(hook_state, bucket)

        def decompress(fut):
            value = fut.value()
            if isinstance(value, (list, tuple)):
                value = value[0]
            original.copy_(value.reshape(original.shape))
            return original

        return fut.then(decompress)

    wrapped.__name__ = f"{name}_hook"
    wrapped.__qualname__ = wrapped.__name__
    return wrapped


def fp16_compress_wrapper(hook):
    """Run ``hook`` on a float16 copy of each bucket and write its result back into the
    bucket's dtype (e.g. ``fp16_compress_wrapper(powerSGD_hook)``)."""
    return _compress_wrapper(fiamma.float16, hook, "fp16_compress_wrapper")


def bf16_compress_wrapper(hook):
    """:func:`fp16_compress_wrapper` with bfloat16."""
    return _compress_wrapper(fiamma.bfloat16, hook, "bf16_compress_wrapper")
