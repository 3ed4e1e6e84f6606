"""fiamma.distributed.utils: the helpers of PyTorch's ``torch.distributed.utils`` that
libraries call: ``_sync_module_states`` (PyTorch Lightning syncs a model that DDP does not wrap,
for validation or testing on several ranks, with it)."""

import fiamma
from fiamma.distributed._collectives import broadcast

__all__ = []


def _sync_module_states(module, process_group, broadcast_bucket_size, src,
                        params_and_buffers_to_ignore, broadcast_buffers=True):
    """Broadcast ``module``'s parameters (and buffers, with ``broadcast_buffers``) from rank
    ``src`` of ``process_group`` to every rank, in place, leaving out the names in
    ``params_and_buffers_to_ignore``; one flat buffer per dtype of at most
    ``broadcast_bucket_size`` bytes at a time."""
    if not isinstance(module, fiamma.nn.Module):
        raise TypeError(f"_sync_module_states: expected an nn.Module, got "
                        f"{type(module).__name__}")
    ignore = set(params_and_buffers_to_ignore or ())
    tensors = [p for n, p in module.named_parameters() if n not in ignore]
    if broadcast_buffers:
        tensors += [b for n, b in module.named_buffers() if n not in ignore]
    cap = max(int(broadcast_bucket_size), 1)
    by_dtype = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    with fiamma.no_grad():
        for ts in by_dtype.values():
            start = 0
            while start < len(ts):  # buckets of whole tensors, each at most ~cap bytes
                end, size = start, 0
                while end < len(ts) and (end == start or size + ts[end].numel()
                                         * ts[end].element_size() <= cap):
                    size += ts[end].numel() * ts[end].element_size()
                    end += 1
                chunk = ts[start:end]
                flat = fiamma.cat([t.detach().reshape(-1) for t in chunk])
                broadcast(flat, src=src, group=process_group)
                off = 0
                for t in chunk:
                    t.copy_(flat[off:off + t.numel()].view(t.shape))
                    off += t.numel()
                start = end
