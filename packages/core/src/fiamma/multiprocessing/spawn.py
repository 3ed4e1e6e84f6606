"""``spawn`` and ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` new processes, as
``torch.multiprocessing.spawn`` does (the usual way to start one training process per rank
without a launcher).

A child that raises has its traceback written to a file the parent reads; the first failure
stops the other children (SIGTERM, then SIGKILL after a grace period) and ``join`` raises
``ProcessRaisedException`` carrying the child's traceback, or ``ProcessExitedException`` when
a child exited with a non-zero code or was killed by a signal.

    import fiamma.multiprocessing as mp

    def work(rank, world):
        print(f"rank {rank} of {world}")

    if __name__ == "__main__":
        mp.spawn(work, args=(2,), nprocs=2)
"""

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings

__all__ = ["spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessException",
           "ProcessRaisedException", "ProcessExitedException"]


class ProcessException(Exception):
    """A spawned process failed: ``error_index`` is its index, ``pid`` its process id."""

    __slots__ = ["error_index", "pid"]

    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a non-zero code, or was killed by a signal."""

    __slots__ = ["exit_code", "signal_name"]

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return (type(self),
                (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name))


def _wrap(fn, i, args, error_file):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent stopped us (SIGINT): not an error of ours
    except Exception:
        with open(error_file, "w") as f:
            f.write(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes(..., join=False)`` started; ``join`` waits for them."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def _stop_all(self, grace_period):
        for p in self.processes:
            if p.is_alive():
                p.terminate()  # SIGTERM
        deadline = time.monotonic() + (30.0 if grace_period is None else grace_period)
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.processes:
            if p.is_alive():
                p.kill()
                p.join()

    def join(self, timeout=None, grace_period=None):
        """Wait up to ``timeout`` seconds (None: until something happens). True when every
        process has finished successfully, False while some are still running; if one failed,
        the others are stopped and the failure is raised."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        failed = None
        for s in ready:
            i = self.sentinels.pop(s)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0 and failed is None:
                failed = i
        if failed is None:
            return not self.sentinels
        self._stop_all(grace_period)
        self.sentinels.clear()
        p = self.processes[failed]
        path = self.error_files[failed]
        if os.path.exists(path) and os.path.getsize(path):
            with open(path) as f:
                original = f.read()
            msg = f"\n\n-- Process {failed} terminated with the following error:\n{original}"
            raise ProcessRaisedException(msg, failed, p.pid)
        if p.exitcode < 0:
            try:
                name = signal.Signals(-p.exitcode).name
            except ValueError:
                name = f"<signal {-p.exitcode}>"
            raise ProcessExitedException(f"process {failed} terminated with signal {name}",
                                         failed, p.pid, p.exitcode, name)
        raise ProcessExitedException(
            f"process {failed} terminated with exit code {p.exitcode}", failed, p.pid,
            p.exitcode)

    def __del__(self):
        for path in getattr(self, "error_files", ()):
            try:
                os.unlink(path)
            except OSError:
                pass


class SpawnContext(ProcessContext):
    """The older name of ProcessContext (kept for programs that name it)."""


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)`` (i = 0 .. nprocs - 1) with the
    given multiprocessing start method. With ``join=True`` wait for them all (raising the
    first failure); otherwise return their ProcessContext."""
    if not callable(fn):
        raise TypeError(f"start_processes: fn must be callable, got {type(fn).__name__}")
    if not isinstance(args, (tuple, list)):  # PyTorch unpacks any sequence: Lightning passes a list
        raise TypeError(f"start_processes: args must be a tuple or list, got "
                        f"{type(args).__name__}")
    args = tuple(args)
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"start_processes: nprocs must be a positive int, got {nprocs!r}")
    ctx = multiprocessing.get_context(start_method)
    error_files, processes = [], []
    for i in range(nprocs):
        fd, path = tempfile.mkstemp(prefix="fiamma_spawn_err_")
        os.close(fd)
        os.unlink(path)  # the child creates it only if it fails
        error_files.append(path)
        p = ctx.Process(target=_wrap, args=(fn, i, args, path), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """``start_processes`` with the ``spawn`` start method (fresh interpreters: ``fn`` must be
    importable, i.e. defined at a module's top level, and the program's entry point guarded by
    ``if __name__ == "__main__":``)."""
    if start_method != "spawn":  # as PyTorch: a warning, and spawn all the same
        warnings.warn(f"spawn: this function only supports start_method='spawn' (got "
                      f"{start_method!r}); to use another start method use "
                      "fiamma.multiprocessing.start_processes(...)", FutureWarning,
                      stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
