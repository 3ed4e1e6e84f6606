"""Importing a sibling distribution for a PyTorch-path module of core, with an error that names
the distribution to install when it is missing."""

import importlib


def require(module, distribution, for_name):
    """Import ``module`` (from ``distribution``) or raise a ``ModuleNotFoundError`` saying that
    ``for_name`` needs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if not (e.name and (module == e.name or module.startswith(e.name + "."))):
            raise
        raise ModuleNotFoundError(
            f"{for_name} is {module}, from the {distribution} distribution, which is not "
            f"installed: pip install {distribution}", name=module) from None
