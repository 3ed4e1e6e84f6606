"""File helpers shared by fiamma's packages (not a PyTorch module).

>>> import os, tempfile
>>> from fiamma.utils.files import temp_file_beside
>>> folder = tempfile.mkdtemp()
>>> fd, name = temp_file_beside(os.path.join(folder, "out.png"), ".png")
>>> os.close(fd); os.path.dirname(name) == folder, name.endswith(".png")
(True, True)
"""

import os
import secrets

__all__ = ["temp_file_beside"]


def temp_file_beside(path, suffix=""):
    """Create an empty temporary file in ``path``'s folder (for a write-then-rename) and return
    ``(fd, name)``. Unlike ``tempfile.mkstemp`` (mode 0600) it is created with mode 0666 less
    the umask, as ``open(path, "wb")`` would create ``path`` itself, so the renamed file gets
    the permissions a direct write would have given it."""
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = os.path.join(folder, f".tmp-{os.getpid()}-{secrets.token_hex(4)}{suffix}")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {path}")
