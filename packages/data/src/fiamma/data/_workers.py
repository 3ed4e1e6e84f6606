"""Multi-process loading: worker processes fetch and collate batches and hand them back through
``fiamma.multiprocessing`` (tensors travel as shared memory, not pickled copies).

Protocol. Each worker has its own index queue; all share one result queue. The main process
keeps ``prefetch_factor * num_workers`` tasks in flight, dealt round-robin, each task a
(task number, indices, task numbers received from this worker since the last task) triple; a
worker answers (task number, batch), or an _ExceptionWrapper (re-raised in the main process
with the worker's traceback), or an _IterableEnd when its shard of an iterable dataset is
exhausted, and keeps a batch sent without a slab until it is acknowledged. ``None`` on an index
queue stops a worker. The main process never blocks forever: it waits on the result queue in
short slices and checks between them that every worker is alive (a worker killed by a signal
is named in the error) and that ``timeout`` has not passed. Workers watch their parent and exit
if it disappears. Everything the iterator holds outside its memory is released by
``_Resources.shutdown`` (see there for when it runs)."""

import itertools
import os
import queue
import random
import signal
import sys
import time
import traceback
import weakref

import numpy as np

import fiamma
from fiamma.data import _slabs, dataloader as _dl
from fiamma.profiler import hook as _profiler

_POLL = 0.2  # seconds between liveness checks while waiting for a batch
_STOP_GRACE_S = 2.5  # how long stopping workers may take before they are terminated
# as PyTorch on Linux: fork (fast, and a script without a main guard works); core's OpenMP
# kernels run on one thread in a forked child, so fork is safe after they ran here
_DEFAULT_CONTEXT = "fork" if sys.platform.startswith("linux") else "forkserver"


class _ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as text."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.msg}"
        if self.exc_type is KeyError:
            msg = KeyError.__str__(KeyError(msg))  # KeyError quotes its message
        try:
            exc = self.exc_type(msg)
        except Exception:  # an exception type whose constructor wants other arguments
            exc = RuntimeError(msg)
        try:
            raise exc
        finally:
            del exc  # no cycle through this frame: the failed iterator is freed with the error


class _IterableEnd:
    def __init__(self, worker_id):
        self.worker_id = worker_id


_SKIP = object()  # a task answered with the end of an iterable shard


class _Resume:
    """Sent to persistent workers at the start of a new epoch (iterable datasets restart)."""

    def __init__(self, seed):
        self.seed = seed


def _seed_worker(base_seed, worker_id):
    seed = (base_seed + worker_id) % (1 << 63)
    random.seed(seed)
    fiamma.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(1)[0])
    return seed


def _make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last, shard):
    if iterable:
        return _dl._IterFetcher(dataset, auto_collation, collate_fn, drop_last, shard)
    return _dl._MapFetcher(dataset, auto_collation, collate_fn, drop_last)


def _alive(pid):
    """Whether process ``pid`` (the main process) still exists. Not ``os.getppid()``: under
    forkserver a worker's parent is the server, never the main process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _worker_loop(dataset, index_queue, result_queue, iterable, auto_collation, collate_fn,
                 drop_last, base_seed, init_fn, worker_id, num_workers, auto_shard, parent,
                 flags):
    import fiamma.multiprocessing  # noqa: F401  (registers the shared-memory reducers)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    # one thread per worker, as PyTorch does: n workers x the machine's cores would only
    # oversubscribe it (and after a fork core's OpenMP kernels run on one thread anyway)
    fiamma.set_num_threads(1)
    # at exit, do not wait for the main process to read what is still queued: it only stops
    # us once it no longer wants those batches
    result_queue.cancel_join_thread()
    where = f"in DataLoader worker process {worker_id}"
    shard = (worker_id, num_workers) if iterable and auto_shard and num_workers > 1 else None
    init_error = None
    try:
        seed = _seed_worker(base_seed, worker_id)
        _dl._worker_info = _dl.WorkerInfo(worker_id, num_workers, seed, dataset)
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = _make_fetcher(dataset, iterable, auto_collation, collate_fn, drop_last, shard)
    except Exception:
        init_error = _ExceptionWrapper(sys.exc_info(), where)
    slabs = _slabs.WorkerSlabs(worker_id, flags)
    # Batches sent without a slab, kept until the main process says it has them: their
    # tensors' shared memory must outlive the sending (with the file_system strategy the
    # name would otherwise be unlinked before the main process opens it). Bounded by the
    # tasks in flight; whatever is still held at exit was never received and goes with us.
    held = {}
    ended = False
    while True:
        try:
            task = index_queue.get(timeout=1.0)
        except queue.Empty:
            if not _alive(parent):  # the main process died: nobody will read our results
                return
            continue
        if task is None:
            return
        if isinstance(task, _Resume):
            ended = False
            if iterable:
                seed = _seed_worker(task.seed, worker_id)
                _dl._worker_info = _dl.WorkerInfo(worker_id, num_workers, seed, dataset)
                fetcher = _make_fetcher(dataset, iterable, auto_collation, collate_fn,
                                        drop_last, shard)
            continue
        idx, index, received = task
        for r in received:
            held.pop(r, None)
        if init_error is not None:
            data, init_error = init_error, None
        elif ended:
            data = _IterableEnd(worker_id)
        else:
            try:
                data = fetcher.fetch(index)
            except StopIteration:
                ended = True
                data = _IterableEnd(worker_id)
            except Exception:
                at = "" if iterable else f" (fetching indices {index!r})"
                data = _ExceptionWrapper(sys.exc_info(), where + at)
        if not isinstance(data, (_ExceptionWrapper, _IterableEnd)):
            try:
                packed = slabs.pack(data)
            except Exception:  # anything unusual travels the ordinary way
                packed = None
            if packed is not None:
                data = packed
            else:
                held[idx] = data
        try:
            result_queue.put((idx, data))
        except Exception:
            result_queue.put((idx, _ExceptionWrapper(sys.exc_info(), where + " (sending)")))
        del data


def _worker_main(payload):
    _worker_loop(*payload)


def _context(spec):
    import fiamma.multiprocessing as fmp

    if spec is None:
        # a start method the program chose (multiprocessing.set_start_method) wins, as in
        # PyTorch, whose loader uses multiprocessing's default context
        spec = fmp.get_start_method(allow_none=True) or _DEFAULT_CONTEXT
    if isinstance(spec, str):
        try:
            ctx = fmp.get_context(spec)
        except ValueError:
            raise ValueError(f"DataLoader: multiprocessing_context {spec!r} is not one of "
                             f"{fmp.get_all_start_methods()}") from None
        if spec == "forkserver":
            # the server imports these once, so every worker forked from it starts with them
            # (takes effect when the server starts; later calls change nothing); the last one
            # imports the main module there (see _forkserver_main.py)
            ctx.set_forkserver_preload(["numpy", "fiamma", "fiamma.multiprocessing",
                                        "fiamma.data", "fiamma.data._workers",
                                        "fiamma.data._forkserver_main"])
            _start_forkserver()
        return ctx
    return spec


def _start_forkserver():
    """Start multiprocessing's forkserver if it is not running, telling it how to import the
    main module (the environment variable is set only while the server starts)."""
    import json
    from multiprocessing import forkserver, process, spawn

    from fiamma.data import _forkserver_main as fm

    if getattr(process.current_process(), "_inheriting", False):
        return  # main is being imported in a child: Process.start() raises the usual error
    server = getattr(forkserver, "_forkserver", None)
    if server is None or getattr(server, "_forkserver_pid", None) is not None:
        # already started (possibly by someone else, without main: then each worker imports
        # main itself, as a server restarted by Process.start() after dying would)
        return
    data = {k: v for k, v in spawn.get_preparation_data("fiamma-data").items() if k in fm.KEYS}
    if "init_main_from_name" not in data and "init_main_from_path" not in data:
        return  # an interactive session: nothing to import
    data["parent"] = os.getpid()
    try:
        spec = json.dumps(data)
    except (TypeError, ValueError):
        return
    os.environ[fm._ENV] = spec
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(fm._ENV, None)


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _nbytes(obj):
    """Bytes of the tensors and arrays inside a sample (recursively)."""
    if isinstance(obj, fiamma.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return 0


def shared_memory_available(strategy):
    """Bytes that batches in flight can use: free space in /dev/shm for the ``file_system``
    strategy, available memory for anonymous (``file_descriptor``) shared files."""
    if strategy == "file_system":
        st = os.statvfs("/dev/shm")
        return st.f_bavail * st.f_frsize
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _check_shared_memory(loader):
    """Fail before the first batch when the batches in flight cannot fit in shared memory
    (estimated from sample 0), naming the size needed."""
    if loader._iterable or loader.batch_size is None:
        return
    try:
        if len(loader.dataset) == 0:
            return
        per_sample = _nbytes(loader.dataset[0])
    except Exception:
        return  # the workers will report a dataset that cannot be read
    import fiamma.multiprocessing as fmp

    strategy = fmp.get_sharing_strategy()
    need = per_sample * loader.batch_size * loader.prefetch_factor * loader.num_workers
    free = shared_memory_available(strategy)
    if free is not None and need > free:
        where = "/dev/shm" if strategy == "file_system" else "memory"
        batch_mib = per_sample * loader.batch_size / 2**20
        raise RuntimeError(
            f"DataLoader: {loader.num_workers} workers x prefetch_factor "
            f"{loader.prefetch_factor} x batches of about {batch_mib:.1f} MiB need about "
            f"{need / 2**20:.1f} MiB of shared memory, but only "
            f"{free / 2**20:.1f} MiB is available ({where}, sharing strategy {strategy!r}). "
            "Lower batch_size, num_workers or prefetch_factor"
            + (", or enlarge /dev/shm (docker: --shm-size)." if where == "/dev/shm" else "."))


def _release_semaphores(queues):
    """Unlink the named semaphores of ``queues`` now (spawn and forkserver contexts name them in
    /dev/shm until the Queue is garbage-collected or the process exits; fork unlinks them at
    once). Only once no worker can still be starting: a worker that had not yet opened them
    would die in ``SemLock._rebuild`` with FileNotFoundError."""
    from multiprocessing import util

    ids = set()
    for q in queues:
        for attr in ("_rlock", "_wlock", "_sem"):
            lk = getattr(q, attr, None)
            if lk is not None and getattr(getattr(lk, "_semlock", None), "name", None):
                ids.add(id(lk))
    if not ids:
        return
    for f in list(util._finalizer_registry.values()):
        ref = getattr(f, "_weakref", None)
        obj = ref() if ref is not None else None
        if obj is not None and id(obj) in ids:
            try:
                f()  # SemLock._cleanup: sem_unlink, and forget it in the resource tracker
            except Exception:  # noqa: BLE001 - already gone: nothing left to release
                pass


def _drain(q, timeout):
    """Read (and drop) one message from ``q``; False when none came. Never raises: a batch
    that cannot be rebuilt (its worker is dead) is as unwanted as the others."""
    try:
        q.get(timeout=timeout) if timeout else q.get_nowait()
    except (queue.Empty, EOFError):
        return False
    except Exception:  # noqa: BLE001
        return True
    return True


class _Resources:
    """What an iterator holds outside this process's memory: the worker processes, the queues
    (and their semaphores) and the shared slab flags. ``shutdown`` releases all of it; it runs
    when an epoch ends, on an error, when the iterator is garbage-collected, and at interpreter
    exit (a multiprocessing finalizer that runs before daemonic children are terminated and
    semaphores unlinked, so that workers are stopped, not killed half-way). It refers to
    nothing of the iterator, so that the iterator can be collected."""

    def __init__(self):
        self.workers, self.index_queues, self.result_queue = [], [], None
        self.flags, self.slabs = [], None
        self.done = False

    def shutdown(self):
        if self.done:
            return
        self.done = True
        for q in self.index_queues:
            try:
                q.put(None)
            except Exception:  # noqa: BLE001 - a closed queue: its worker is gone
                pass
        # Read what the workers still send while they stop: a worker's exit waits for its
        # shared-memory handles to be fetched (file_descriptor), and a full pipe would block
        # its last put. What is read is dropped at once.
        rq = self.result_queue
        deadline = time.monotonic() + _STOP_GRACE_S
        while any(w.is_alive() for w in self.workers) and time.monotonic() < deadline:
            if rq is None or not _drain(rq, 0.05):
                for w in self.workers:
                    w.join(timeout=0.0)
        for w in self.workers:
            if w.is_alive():
                w.terminate()
        for w in self.workers:
            w.join(timeout=2.0)
            if w.is_alive():  # ignores SIGTERM (stuck in C): it must not outlive us
                w.kill()
                w.join(timeout=2.0)
        if rq is not None:
            for _ in range(100_000):  # bounded: a broken pipe must not keep us here
                if not _drain(rq, 0):
                    break
        for q in self.index_queues + ([rq] if rq is not None else []):
            q.cancel_join_thread()
            q.close()
        _release_semaphores(self.index_queues + ([rq] if rq is not None else []))
        if self.slabs is not None:
            self.slabs.close()
        self.flags, self.slabs = [], None
        import fiamma.multiprocessing as fmp

        for w in self.workers:
            if w.pid is not None:
                # a worker killed before the main process mapped its batches left their
                # names (file_system): they are nobody's now; names we still hold stay
                fmp.sweep_shared_memory(w.pid)


class MultiProcessIter(_dl._BaseDataLoaderIter):
    """The iterator of a DataLoader with ``num_workers > 0``."""

    def __init__(self, loader):
        from multiprocessing.util import Finalize

        self._pin = loader._pin
        self._n = loader.num_workers
        _check_shared_memory(loader)
        ctx = _context(loader.multiprocessing_context)
        self._start_method = ctx.get_start_method()
        res = self._res = _Resources()
        self._shutdown = Finalize(self, res.shutdown, exitpriority=10)
        res.result_queue = self._result_queue = ctx.Queue()
        self._index_queues, self._workers = res.index_queues, res.workers
        base_seed = loader._base_seed()
        res.flags = [_slabs.new_flags() for _ in range(self._n)]
        res.slabs = self._slabs = _slabs.MainSlabs(res.flags)
        try:
            for i in range(self._n):
                iq = ctx.Queue()
                iq.cancel_join_thread()
                # the arguments travel in a list emptied once the worker started (forked or
                # pickled), so that the Process object does not keep them (the flags) alive
                payload = [loader.dataset, iq, self._result_queue, loader._iterable,
                           loader._auto_collation, loader.collate_fn, loader.drop_last,
                           base_seed, loader.worker_init_fn, i, self._n, loader.auto_shard,
                           os.getpid(), res.flags[i]]
                w = ctx.Process(target=_worker_main, args=(payload,), daemon=True)
                res.index_queues.append(iq)
                w.start()
                payload.clear()
                res.workers.append(w)
        except BaseException:
            self._shutdown()
            raise
        self._start(loader, first=True)

    @property
    def _shutdown_done(self):
        return self._res.done

    def _shutdown_workers(self):
        """Stop the workers now (PyTorch's name; also what happens at exit)."""
        self._shutdown()

    # ---- epoch state -------------------------------------------------------------------

    def _start(self, loader, first):
        # not the loader itself: a persistent loader holds its iterator, and a cycle would keep
        # both (and the workers) alive after the user dropped the loader, until a gc run
        self._loader = weakref.ref(loader)
        self._persistent = loader.persistent_workers
        self._sampler_iter = iter(loader._index_sampler)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._pending = {}       # task number -> worker id, while in flight
        self._arrived = {}       # task number -> data that came early (in-order delivery)
        self._received = [[] for _ in range(self._n)]  # task numbers to acknowledge, per worker
        self._alive = [True] * self._n  # False once an iterable worker's shard ended
        self._cycle = itertools.cycle(range(self._n))
        self._in_order = loader.in_order
        self._timeout = loader.timeout
        for _ in range(loader.prefetch_factor * self._n):
            self._put_next()

    def _reset(self, loader):
        """Next epoch with persistent workers."""
        if self._res.done:
            raise RuntimeError("DataLoader: the persistent workers have been shut down")
        while self._pending:  # drain what is still in flight from an interrupted epoch
            idx, data = self._take()
            if isinstance(data, _slabs.Packed):
                self._slabs.discard(data)
        for data in self._arrived.values():
            if isinstance(data, _slabs.Packed):
                self._slabs.discard(data)
        if loader._iterable:
            seed = loader._base_seed()
            for q in self._index_queues:
                q.put(_Resume(seed))
        self._start(loader, first=False)

    def _put_next(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._n):
            w = next(self._cycle)
            if self._alive[w]:
                break
        else:
            return
        received, self._received[w] = self._received[w], []
        self._index_queues[w].put((self._send_idx, index, received))
        self._pending[self._send_idx] = w
        self._send_idx += 1

    # ---- receiving -------------------------------------------------------------------------

    def _take(self):
        """The next (task number, data) from any worker, acknowledged to its worker."""
        idx, data = self._get()
        w = self._pending.pop(idx, None)
        if w is not None:
            self._received[w].append(idx)
        return idx, data

    def _get(self):
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _POLL if deadline is None else max(0.0, min(_POLL,
                                                               deadline - time.monotonic()))
            lost = None
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                pass
            except (OSError, EOFError) as e:
                # a batch whose worker died before this process fetched its shared memory
                lost = e
                for w in self._workers:
                    w.join(timeout=1.0 if not w.is_alive() else 0.2)
            dead = [w for w in self._workers if not w.is_alive()]
            if lost is not None and not dead:
                self._close()
                raise RuntimeError(f"DataLoader: could not receive a batch from a worker: "
                                   f"{lost!r}") from lost
            if dead:
                self._close()
                parts = []
                for w in dead:
                    code = w.exitcode
                    if code is not None and code < 0:
                        parts.append(f"DataLoader worker (pid {w.pid}) is killed by signal: "
                                     f"{_signal_name(code)}.")
                    else:
                        parts.append(f"DataLoader worker (pid {w.pid}) exited unexpectedly "
                                     f"with exit code {code}.")
                hint = " If a worker ran out of memory, lower batch_size, num_workers or " \
                       "prefetch_factor."
                if self._start_method != "fork" and any(w.exitcode == 1 for w in dead):
                    # the usual cause: the worker re-imported a main script that starts a
                    # DataLoader at import time (its traceback is printed above)
                    hint += (f" Workers start by {self._start_method!r} and import the main "
                             "script: a script must create and iterate DataLoaders with workers "
                             "under `if __name__ == \"__main__\":` (or use the default "
                             "multiprocessing_context, 'fork' on Linux).")
                raise RuntimeError(" ".join(parts) + hint) from lost
            if deadline is not None and time.monotonic() >= deadline:
                self._close()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def __iter__(self):
        return self

    def __next__(self):
        if self._res.done:  # ended, failed or interrupted: like a generator that raised
            raise StopIteration
        self._worker_error = False
        try:
            if _profiler.enabled:  # the wait for the workers' batch, as one event
                return _profiler.call(
                    "enumerate(DataLoader)#MultiProcessIter.__next__", self._next)
            return self._next()
        except StopIteration:
            raise
        except BaseException:
            if not self._worker_error:
                # an interrupt (Ctrl-C) or an error of our own half-way through a receive:
                # the queues' state is unknown, so nothing of this iterator can be used again
                self._close()
            raise

    def _next(self):
        while True:
            if self._in_order:
                while self._rcvd_idx in self._arrived:
                    data = self._arrived.pop(self._rcvd_idx)
                    self._rcvd_idx += 1
                    if data is not _SKIP:
                        return self._deliver(data)
                if self._rcvd_idx >= self._send_idx:
                    return self._finish()
            elif not self._pending:
                return self._finish()
            idx, data = self._take()
            if isinstance(data, _IterableEnd):
                # this worker's shard is exhausted; it answers its remaining tasks the same way
                self._alive[data.worker_id] = False
                data = _SKIP
            if self._in_order:
                self._arrived[idx] = data
            elif data is not _SKIP:
                return self._deliver(data)

    def _deliver(self, data):
        if isinstance(data, _ExceptionWrapper):
            if not self._persistent:
                self._close()
            else:
                self._put_next()
            self._worker_error = True  # the iterator stays usable (persistent workers)
            data.reraise()
        self._put_next()
        if isinstance(data, _slabs.Packed):
            data = self._slabs.unpack(data)
        if self._pin:
            from fiamma.data.dataloader import pin_batch

            data = pin_batch(data)
        return data

    def _close(self):
        """Shut down, and drop the batches that came early: they hold shared memory, and an
        iterator that failed may live on in a traceback."""
        self._shutdown()
        self._arrived.clear()
        self._pending.clear()

    def _finish(self):
        if not self._persistent:
            self._close()
        raise StopIteration

    def __len__(self):
        loader = self._loader()
        if loader is None:
            raise TypeError("len() of a DataLoader iterator whose DataLoader is gone")
        return len(loader)
