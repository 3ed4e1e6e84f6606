"""fiamma.multiprocessing: Python's ``multiprocessing`` with tensors passed through shared memory.

Everything of the standard module is here (``Process``, ``Queue``, ``Pool``, ``Pipe``,
``get_context``, ``set_start_method``, ...). Importing this module (as you would
``torch.multiprocessing``) registers reducers so that a tensor sent to another process through a
Queue, a Pipe, Pool arguments or ``Process(args=...)`` travels as a handle to shared memory, not
as a copy: the receiver maps the same memory and in-place writes are seen by both sides. A
tensor that is not yet shared is moved to shared memory when it is sent (``share_memory_()``;
views of it keep working). A tensor pickled by ``multiprocessing`` is shared even where this
module was never imported (a Pool worker returning a tensor). With the ``file_descriptor``
strategy the sending process serves the descriptors until they are fetched: keep it alive
until its receivers have the tensors (importing this module in a worker makes it wait for
them at exit, for up to 5 s, best effort).

Hogwild (several processes training one model in place)::

    import fiamma, fiamma.multiprocessing as mp

    def worker(w):
        for _ in range(100):
            w.add_(1.0)             # lands in the parent's tensor

    if __name__ == "__main__":
        w = fiamma.zeros(10).share_memory_()
        ps = [mp.get_context("spawn").Process(target=worker, args=(w,)) for _ in range(2)]
        for p in ps: p.start()
        for p in ps: p.join()

Sharing strategies (``set_sharing_strategy``): ``"file_descriptor"`` (default) creates anonymous
shared files (memfd) and passes their descriptors over Unix sockets; nothing ever appears in
/dev/shm and the kernel frees the memory when the last process holding it exits or lets go,
even if it was killed. Each shared storage keeps one descriptor open per process that maps it
(raise ``ulimit -n`` if you share many thousands of storages). ``"file_system"`` names the files
(/dev/shm/fiamma_mp_*) and passes names; whoever lets go last unlinks the name (at exit too,
after multiprocessing stopped the daemonic children), and names left by a killed process are
swept when a process that used the strategy exits normally (or by ``sweep_shared_memory``).

In flight, a tensor must stay alive in the sender until the receiver has it (with
``file_system`` the name goes away when the last holder lets go).

Start methods: all three work. A forked child runs fiamma's OpenMP kernels on one thread
(libgomp's thread pool does not survive ``fork``; OpenBLAS handles ``fork`` itself), so forking
after the parent ran threaded kernels is safe; a forked child also takes its own lock on each
``file_system`` name it inherits. As in PyTorch, the random generator's state is copied into a
forked child, not reseeded: reseed each worker.

``data_ptr()`` of a tensor over a small storage changes when it moves to shared memory (as in
PyTorch); storages of 2 MiB and more keep their address.
"""

import multiprocessing
from multiprocessing import *  # noqa: F401,F403

from fiamma.multiprocessing._reductions import init_reductions
from fiamma.multiprocessing._shm import (  # noqa: F401
    get_all_sharing_strategies,
    get_sharing_strategy,
    set_sharing_strategy,
    sweep as _sweep,
)
from fiamma.multiprocessing.spawn import (  # noqa: F401
    ProcessContext,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)

__all__ = list(multiprocessing.__all__) + [
    "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies",
    "init_reductions", "sweep_shared_memory", "spawn", "start_processes", "ProcessContext",
    "SpawnContext", "ProcessRaisedException", "ProcessExitedException",
]


def sweep_shared_memory(pid=None):
    """Unlink the ``/dev/shm/fiamma_mp_*`` names (``file_system`` strategy) that no live process
    holds, or with ``pid`` only those that process created: what a process killed before its
    receivers mapped its tensors leaves behind. A name some process still holds is never
    touched. Every process that used the strategy does this when it exits normally; the
    DataLoader does it for a worker it found dead.

    >>> import os, fiamma.multiprocessing as mp
    >>> mp.sweep_shared_memory(os.getpid())
    """
    _sweep(pid)


init_reductions()
