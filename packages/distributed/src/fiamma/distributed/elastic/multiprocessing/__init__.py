"""``torch.distributed.elastic.multiprocessing``: :mod:`.errors` (``record``)."""
