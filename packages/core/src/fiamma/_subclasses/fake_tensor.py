"""``torch._subclasses.fake_tensor``. fiamma has no fake tensors (its tracers run the real ops
on meta or real data), so no tensor is fake: :func:`is_fake` answers False for everything,
which is PyTorch's answer for every tensor outside a fake-tensor trace."""

__all__ = ["is_fake"]


def is_fake(x):
    """Whether ``x`` is a fake tensor: always False in fiamma.

    >>> import fiamma
    >>> from fiamma._subclasses.fake_tensor import is_fake
    >>> is_fake(fiamma.zeros(2)), is_fake(fiamma.zeros(2, device="meta"))
    (False, False)
    """
    return False
