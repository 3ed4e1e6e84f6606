"""Graph utilities: the Node type and saved-tensor hooks (``torch.autograd.graph``).

>>> import fiamma
>>> from fiamma.autograd.graph import saved_tensors_hooks
>>> packed = []
>>> def pack(t):
...     packed.append(t.shape)
...     return t.clone()
>>> x = fiamma.tensor([1.0, 2.0], requires_grad=True)
>>> with saved_tensors_hooks(pack, lambda p: p):
...     y = (x * x).sum()
>>> y.backward()
>>> x.grad.tolist(), len(packed)
([2.0, 4.0], 2)
"""

from fiamma.autograd._node import Node, hooks_active, saved_hooks

__all__ = ["Node", "saved_tensors_hooks", "save_on_cpu", "increment_version"]


class saved_tensors_hooks:
    """Within this context, tensors that op formulas save for backward are passed to
    ``pack_hook(tensor) -> obj`` and restored by ``unpack_hook(obj) -> tensor`` when backward
    needs them (thread-local; the innermost context wins)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        saved_hooks.stack = saved_hooks.stack + ((self.pack_hook, self.unpack_hook),)
        hooks_active[0] += 1
        return self

    def __exit__(self, *exc):
        saved_hooks.stack = saved_hooks.stack[:-1]
        hooks_active[0] -= 1
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept on the CPU and moved back to their device for backward."""

    def __init__(self, pin_memory=False):
        def pack(t):
            return t.device, t.cpu()

        def unpack(p):
            dev, t = p
            return t.to(dev)

        super().__init__(pack, unpack)


def increment_version(tensor):
    """Mark ``tensor`` as modified in place (saved copies of it become invalid)."""
    tensor._bump()
