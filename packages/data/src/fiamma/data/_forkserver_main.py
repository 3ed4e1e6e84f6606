"""Imported by the forkserver as its last preload module: imports the user's main module once
in the server, so that the DataLoader workers forked from it start with it.

Without this, every worker re-imports the main script (or ``-m`` module) as ``__mp_main__``
when it starts, at every epoch: whatever the script imports at top level (PyTorch, a big
model definition, a dataset read from disk) is paid ``num_workers`` times per epoch. Python
meant ``set_forkserver_preload(["__main__"])`` to do this, but the server never received the
main path until CPython fixed it in 2025 (gh-126631), and where it works a main module that
fails to import kills the server instead of letting the workers report it.

The main process hands the server what ``multiprocessing.spawn.prepare`` needs to import main
(the main module's path or name, ``sys.path``, ``sys.argv``, the working directory) in the
``_ENV`` variable, set only while it starts the server (``_start_forkserver`` in _workers.py);
the variable is acted on only in a forkserver preloading its modules whose parent wrote it.
A main module that fails to import here (a script that starts a DataLoader at import time,
without the ``if __name__ == "__main__":`` guard) is left alone: each worker then imports it
itself, as before, and reports the failure the usual way.
"""

import json
import os
import sys

_ENV = "_FIAMMA_DATA_FORKSERVER_MAIN"
# what the server may take from the main process's preparation data
KEYS = ("sys_path", "sys_argv", "dir", "orig_dir", "init_main_from_name", "init_main_from_path")

imported_main = False  # True in the server (and in its workers) once main was imported here


def _preloaded_by_forkserver():
    """Whether this import runs inside multiprocessing's forkserver, preloading modules (not
    in some other process that inherited the variable by chance)."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        f = f.f_back
    return False


def _import_main():
    global imported_main
    spec = os.environ.pop(_ENV, None)  # the workers need not see it
    if spec is None or not _preloaded_by_forkserver():
        return
    from multiprocessing import process, spawn, util

    try:
        spec = json.loads(spec)
        if spec.pop("parent", None) != os.getppid():  # the server is the main process's child
            return
        data = {k: v for k, v in spec.items() if k in KEYS}
    except (ValueError, AttributeError):
        return
    if "init_main_from_name" not in data and "init_main_from_path" not in data:
        return
    # the server closes stdin right after its preloads; close it before main's top level runs
    # (a worker importing main would read /dev/null, never the terminal)
    try:
        util._close_stdin()
    except Exception:  # noqa: BLE001 - a private helper: without it, stdin stays as it is
        pass
    me = process.current_process()
    me._inheriting = True  # as in a spawned child: starting processes now is an error
    try:
        spawn.prepare(data)
        imported_main = True
    except BaseException:  # noqa: BLE001 - the workers import main themselves and report it
        pass
    finally:
        del me._inheriting


_import_main()
