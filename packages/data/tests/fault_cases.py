"""The DataLoader fault matrix, run in a child process by test_faults.py:
``python fault_cases.py STRATEGY CONTEXT CASE[,CASE...]``.

Each case makes a loader fail (or stop early) one way and prints one JSON line: the exception
it ended with, the shared-memory names (``fiamma_mp_*`` of this process or of a worker, and the
queues' named semaphores) still in /dev/shm after a short settle, and how long it took. Cases
run one after another in this process; each is bounded by a watchdog that dumps every thread's
stack and exits if it hangs. The case ``exit_*`` leave work for interpreter exit: the test
checks /dev/shm after this process is gone.
"""

import faulthandler
import json
import multiprocessing.process
import multiprocessing.synchronize as mps
import os
import signal
import sys
import threading
import time

import fiamma
import fiamma.multiprocessing as fmp
from fiamma import data as D

CASE_TIMEOUT_S = 40

# every semaphore name this process makes (spawn/forkserver name them in /dev/shm; fork unlinks
# them at once): names cannot say which process made them, so they are recorded here
_sem_names = []
_make_name = mps.SemLock._make_name


def _recording_make_name():
    name = _make_name()
    _sem_names.append(name)
    return name


mps.SemLock._make_name = staticmethod(_recording_make_name)
_worker_pids = set()  # every process this one started: their shared-memory names are ours too
_start = multiprocessing.process.BaseProcess.start


def _recording_start(self):
    _start(self)
    _worker_pids.add(self.pid)


multiprocessing.process.BaseProcess.start = _recording_start


class Raises(D.Dataset):
    """Sample ``at`` raises ValueError; the others are float tensors of ``shape``."""

    def __init__(self, at, shape=(2,), n=100):
        self.at, self.shape, self.n = at, shape, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.at:
            raise ValueError(f"sample {i} is broken")
        return fiamma.full(self.shape, float(i))


class KillsItself(D.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        if i == 9:
            os.kill(os.getpid(), signal.SIGKILL)
        return fiamma.full((4,), float(i))


class Rows(D.Dataset):
    """Float rows; with ``sleep``, each takes that long in a worker."""

    def __init__(self, n=40, shape=(16,), sleep=0.0):
        self.n, self.shape, self.sleep = n, shape, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep and D.get_worker_info() is not None:
            time.sleep(self.sleep)
        return fiamma.full(self.shape, float(i))


class Ragged(D.Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, i):
        return fiamma.zeros(i % 3 + 1)


class NonTensor(D.Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, i):
        return object() if i == 5 else fiamma.zeros(2)


def _loader(ds, ctx, **kw):
    kw.setdefault("num_workers", 2)
    return D.DataLoader(ds, multiprocessing_context=ctx, **kw)


# ---- the cases: each returns normally or raises what the user would see ----------------------

def case_worker_raises(ctx):
    list(_loader(Raises(7), ctx, batch_size=2))


def case_worker_raises_batches_kept(ctx):
    # issue 18, defect 4: 64x64 samples, the batches kept (each takes a fresh slab)
    list(_loader(Raises(37, (64, 64)), ctx))


def case_worker_sigkilled(ctx):
    list(_loader(KillsItself(), ctx, batch_size=2))


def case_early_break(ctx):
    dl = _loader(Rows(), ctx, batch_size=2)
    for _ in dl:
        break


def case_iterator_dropped(ctx):
    it = iter(_loader(Rows(), ctx, batch_size=2))
    next(it), next(it)
    del it


def case_persistent_break(ctx):
    dl = _loader(Rows(), ctx, batch_size=2, persistent_workers=True)
    assert len(list(dl)) == 20
    for _ in dl:
        break
    del dl


def case_inconsistent_shapes(ctx):
    list(_loader(Ragged(), ctx, batch_size=2))


def case_non_tensor_sample(ctx):
    list(_loader(NonTensor(), ctx, batch_size=2))


def case_timeout(ctx):
    list(_loader(Rows(4, sleep=5.0), ctx, num_workers=1, timeout=0.5))


def case_keyboard_interrupt(ctx):
    # Python's Ctrl-C handler, also where this process was started with SIGINT ignored (a
    # command put in the background by a non-interactive shell inherits that, and Python then
    # installs no handler: the interrupt would be ignored, not raised)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGINT)).start()
        list(_loader(Rows(8, sleep=2.0), ctx, batch_size=2))
    finally:
        signal.signal(signal.SIGINT, old)


def case_more_batches_kept_than_slabs(ctx):
    # past the slab pool, batches travel as ordinary shared tensors: the worker must keep each
    # until the main process has it, even when the main process reads late
    dl = _loader(Rows(80, (64,)), ctx, num_workers=1)
    kept = []
    for b in dl:
        kept.append(b)
        time.sleep(0.01)
    assert [int(b[0, 0].item()) for b in kept] == list(range(80))


_kept = []


def case_exit_persistent(ctx):
    dl = _loader(Rows(), ctx, batch_size=2, persistent_workers=True)
    assert len(list(dl)) == 20
    _kept.append(dl)  # alive at exit: its workers are stopped at interpreter exit


def case_exit_mid_epoch(ctx):
    it = iter(_loader(Rows(40, sleep=0.05), ctx, batch_size=2))
    next(it)
    _kept.append(it)


# ---- reporting ---------------------------------------------------------------------------------

def _ours(name, pids):
    if name.startswith("sem."):
        return "/" + name[4:] in _sem_names
    if not name.startswith("fiamma_mp_"):
        return False
    parts = name.split("_")
    return len(parts) > 3 and parts[2].isdigit() and int(parts[2]) in pids


def _left(pids):
    return sorted(n for n in os.listdir("/dev/shm") if _ours(n, pids))


def run(strategy, ctx, cases):
    fmp.set_sharing_strategy(strategy)
    for name in cases:
        faulthandler.dump_traceback_later(CASE_TIMEOUT_S, exit=True)
        t0 = time.monotonic()
        err = None
        try:
            globals()["case_" + name](ctx)
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt is a case's result
            err = {"type": type(e).__name__, "msg": str(e)}
            del e
        took = time.monotonic() - t0
        pids = {os.getpid()} | _worker_pids
        left = _left(pids)
        deadline = time.monotonic() + 3.0
        while left and time.monotonic() < deadline:  # settle: workers finishing their exit
            time.sleep(0.1)
            left = _left(pids)
        faulthandler.cancel_dump_traceback_later()
        print(json.dumps({"case": name, "error": err, "left": left, "seconds": round(took, 2),
                          "sems": list(_sem_names), "pid": os.getpid(),
                          "workers": sorted(_worker_pids)}), flush=True)


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], sys.argv[3].split(","))
