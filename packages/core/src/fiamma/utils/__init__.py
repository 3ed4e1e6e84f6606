"""fiamma.utils: helpers around core. Submodules are imported on use:

* ``fiamma.utils.cext``: write a C kernel, compile it with cffi and call it on tensors.
"""

_SUBMODULES = {"cext"}


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module("fiamma.utils." + name)
    raise AttributeError(f"module 'fiamma.utils' has no attribute {name!r}")
