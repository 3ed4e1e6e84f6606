"""Op modules: each installs its functions as Tensor methods."""


def __getattr__(name):
    # PyTorch's torch._ops names that programs test against (``isinstance(func,
    # torch._ops.OpOverload)``): fiamma.library's operators and the ATen overloads
    # __torch_dispatch__ sees (fiamma._aten) are both instances
    if name in ("OpOverload", "OpOverloadPacket"):
        import importlib

        return importlib.import_module("fiamma._aten").ANY[name]
    raise AttributeError(f"module 'fiamma._ops' has no attribute {name!r}")
