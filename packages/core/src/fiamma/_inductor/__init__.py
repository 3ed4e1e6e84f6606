"""``torch._inductor``'s user-facing pieces for programs that touch them around
``torch.compile``: ``config`` (flags, settable without effect: fiamma compiles nothing),
``utils.fresh_inductor_cache`` (a context manager with no cache to isolate), and AOTInductor's
packaging calls for exported programs (``aoti_compile_and_package`` / ``aoti_load_package``:
no ahead-of-time compiler; the package is the program saved by ``fiamma.export.save``, loaded
as its runnable module; they need fiamma-export)."""

import importlib
import os
import tempfile

from fiamma._inductor import config, utils  # noqa: F401

__all__ = ["config", "utils", "aoti_compile_and_package", "aoti_load_package"]


def _export():
    try:
        return importlib.import_module("fiamma.export")
    except ModuleNotFoundError as e:
        raise ImportError("AOTInductor packages are fiamma.export programs: pip install "
                          "fiamma-export") from e


def aoti_compile_and_package(exported_program, _deprecated_unused_args=None,
                             _deprecated_unused_kwargs=None, *, package_path=None,
                             inductor_configs=None):
    """Write ``exported_program`` to ``package_path`` (default: a new ``.pt2`` file in the
    temporary directory) and return the path. fiamma compiles nothing ahead of time: the
    package is ``fiamma.export.save``'s archive (graph and weights; not PyTorch's AOTInductor
    format), which :func:`aoti_load_package` runs."""
    ex = _export()
    if not isinstance(exported_program, ex.ExportedProgram):
        raise TypeError(f"aoti_compile_and_package: expected an ExportedProgram, got "
                        f"{type(exported_program).__name__}")
    if package_path is None:
        fd, package_path = tempfile.mkstemp(suffix=".pt2")
        os.close(fd)
    ex.save(exported_program, package_path)
    return package_path


def aoti_load_package(path, run_single_threaded=False, device_index=-1):
    """The runnable module of the program saved by :func:`aoti_compile_and_package` (called
    with the inputs the exported module took; the input checks of ``ExportedProgram.module()``
    apply)."""
    return _export().load(path).module()
