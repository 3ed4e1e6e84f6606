"""Run an unmodified PyTorch program on fiamma.

    python -m fiamma.run script.py [args...]
    python -m fiamma.run -m package.module [args...]
    python -m fiamma.run -c "code" [args...]

The program runs as ``python script.py args...`` would run it (``__name__ == "__main__"``,
``sys.argv`` = ``[script.py, args...]``, the script's folder first on ``sys.path``), except that
``import torch``, ``import torchvision``, ``import torchaudio``, ``import functorch`` and every
submodule import (``torch.nn.functional``, ``torch.utils.data``, ``torchvision.transforms``,
...) give fiamma's modules at the same paths: ``torch.Tensor is fiamma.Tensor``.
``torch.__version__`` answers the PyTorch version whose API fiamma follows
(``fiamma._torch_alias.TORCH_VERSION``);
``fiamma.__version__`` and ``torch.version.fiamma`` are fiamma's own. Where no real ``torch``
distribution is installed, ``importlib.metadata.version("torch")`` answers that version too
(libraries such as Hugging Face ``transformers`` check PyTorch's version that way).

Child processes started by the program (DataLoader workers, ``multiprocessing`` with ``fork``,
``spawn`` or ``forkserver``) get the same aliasing. Python processes it starts otherwise (for
example ``subprocess.run([sys.executable, ...])``) do not.

A module or name fiamma lacks fails with an ``ImportError`` / ``AttributeError`` subclass
naming it (``torch.onnx``: "fiamma has no 'fiamma.onnx' (a gap ...)"); an uncaught
``AttributeError`` or ``ImportError`` about one of fiamma's objects gets a note saying that
the name is a gap in fiamma's coverage of PyTorch, not a bug in the program (except
``it.next()`` on an iterator, which PyTorch's iterators lack as well: the note says so).

The same from Python::

    >>> from fiamma.run import run_path      # doctest: +SKIP
    >>> run_path("train.py", ["--epochs", "1"])   # doctest: +SKIP
"""

import os
import runpy
import sys

__all__ = ["main", "run_path", "run_module"]

USAGE = """usage: python -m fiamma.run script.py [args...]
       python -m fiamma.run -m module [args...]
       python -m fiamma.run -c code [args...]

Runs a PyTorch program unmodified on fiamma: torch, torchvision, torchaudio and functorch
(and all their submodules) are fiamma's modules."""


def _gap_note(e):
    """A note for an uncaught error about a name fiamma lacks (None if it is not one)."""
    from fiamma._torch_alias import FiammaAttributeError, FiammaModuleNotFoundError

    if isinstance(e, (FiammaAttributeError, FiammaModuleNotFoundError)):
        return None  # their message says it already
    if isinstance(e, AttributeError):
        obj = getattr(e, "obj", None)
        if obj is None:
            return None
        owner = obj if isinstance(obj, type) else type(obj)
        if isinstance(obj, type(sys)):
            where = obj.__name__
        else:
            where = f"{owner.__module__}.{owner.__qualname__}"
        if not where.startswith(("fiamma", "torch")):
            return None
        what = f"{where}.{e.name}"
        if e.name == "next" and hasattr(owner, "__next__"):
            # a Python 2 style it.next(): PyTorch's own iterators (DataLoader's) lack it too
            return (f"fiamma.run: {what} does not exist in PyTorch either (Python 3 iterators, "
                    "PyTorch's DataLoader iterators included, have no .next(); the program "
                    "needs next(it)): an error in the program, not a gap in fiamma")
    elif isinstance(e, ImportError):
        if not (e.name or "").startswith(("fiamma", "torch")):
            return None
        what = str(e)
    else:
        return None
    return (f"fiamma.run: {what} is a gap in fiamma's coverage of PyTorch, not an error in "
            "the program (docs/porting.md lists the known gaps)")


def _watch_classes():
    """A tensor-like class of the program (one defining ``__torch_function__``) turns
    fiamma's ``__torch_function__`` protocol on when it is created."""
    from fiamma._torch_function import watch_class_creation

    watch_class_creation()


def _run(fn):
    try:
        return fn()
    except (AttributeError, ImportError) as e:
        note = _gap_note(e)
        if (note is not None and hasattr(e, "add_note")  # Python >= 3.11
                and note not in getattr(e, "__notes__", ())):
            e.add_note(note)
        raise


def run_path(path, args=()):
    """Run the script at ``path`` as ``__main__`` with ``sys.argv = [path, *args]`` and
    ``torch`` resolving to fiamma. Returns the script's globals."""
    from fiamma._torch_alias import install

    path = os.fspath(path)
    sys.argv = [path, *args]
    folder = os.path.dirname(os.path.realpath(path)) if os.path.isfile(path) else path
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)
    install()
    _watch_classes()
    return _run(lambda: runpy.run_path(path, run_name="__main__"))


def run_module(name, args=()):
    """Run module ``name`` as ``python -m name args...`` would, with ``torch`` resolving to
    fiamma. Returns the module's globals."""
    from fiamma._torch_alias import install

    sys.argv = [name, *args]
    install()
    _watch_classes()
    return _run(lambda: runpy.run_module(name, run_name="__main__", alter_sys=True))


def run_code(code, args=()):
    """Run ``code`` as ``python -c code args...`` would, with ``torch`` resolving to fiamma."""
    from fiamma._torch_alias import install

    sys.argv = ["-c", *args]
    install()
    _watch_classes()
    main = type(sys)("__main__")
    main.__builtins__ = __builtins__
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        return _run(lambda: exec(compile(code, "<string>", "exec"), main.__dict__))
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def main(argv=None):
    """The command line: ``python -m fiamma.run script.py args...`` (see the module doc)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] in ("-m", "-c"):
        if len(argv) < 2:
            print(f"fiamma.run: argument expected for the {argv[0]} option\n{USAGE}",
                  file=sys.stderr)
            return 2
        if argv[0] == "-m":
            run_module(argv[1], argv[2:])
        else:
            run_code(argv[1], argv[2:])
        return 0
    if argv[0].startswith("-"):
        print(f"fiamma.run: unknown option {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    if not os.path.exists(argv[0]):
        print(f"fiamma.run: can't open file {os.path.abspath(argv[0])!r}: "
              "[Errno 2] No such file or directory", file=sys.stderr)
        return 2
    run_path(argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
