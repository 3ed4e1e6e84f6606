"""``torch._dynamo.eval_frame``'s :class:`OptimizedModule`, for programs that ask whether a
module came out of ``torch.compile`` (``isinstance(m, OptimizedModule)``).

``fiamma.compile`` does not wrap modules (it returns the module itself, or with a callable
backend a function), so no object is an OptimizedModule: the check is false for every module,
as it is in PyTorch for a module that was not compiled. Creating one raises
:class:`NotImplementedError`.

>>> import fiamma
>>> isinstance(fiamma.compile(lambda x: x), OptimizedModule)
False
"""

__all__ = ["OptimizedModule"]


class OptimizedModule:
    """The wrapper PyTorch's ``torch.compile`` puts around a module (``_orig_mod`` is the
    module): fiamma makes none (see the module's docstring)."""

    def __init__(self, mod=None, dynamo_ctx=None):
        raise NotImplementedError(
            "fiamma has no OptimizedModule: fiamma.compile(module) returns the module itself")
