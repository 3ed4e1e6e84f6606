"""``fiamma.utils.data._utils``: PyTorch's private ``torch.utils.data._utils`` path, which
libraries import from (``collate.default_collate_fn_map`` to register their own tensor types,
``worker._worker_info``). ``collate`` is ``fiamma.data._collate``; ``worker`` is
``fiamma.data.dataloader`` (where the worker's ``_worker_info`` lives)."""


def __getattr__(name):
    if name in ("collate", "worker"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'fiamma.utils.data._utils' has no attribute {name!r}")
