"""``fiamma.distributed.elastic`` (``torch.distributed.elastic``): the part scripts import,
:func:`multiprocessing.errors.record`. Ranks are started by :mod:`fiamma.distributed.run`
(MPI); restarting failed ranks (elastic membership) is not provided."""
