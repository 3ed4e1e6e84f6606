"""fiamma.hub: download checkpoints into a cache (PyTorch's ``torch.hub`` for weights).

``load_state_dict_from_url(url)`` downloads a checkpoint once into
``get_dir()/checkpoints`` and loads it with ``fiamma.load`` (which reads PyTorch's files and
never runs code from them). The cache directory is ``$FIAMMA_HOME/hub``, where
``FIAMMA_HOME`` defaults to ``$XDG_CACHE_HOME/fiamma`` or ``~/.cache/fiamma`` (PyTorch's
``$TORCH_HOME/hub`` scheme); ``set_dir`` overrides it. ``check_hash=True`` verifies the
file's SHA-256 against the hex digits after the last ``-`` in its name
(``resnet18-f37072fd.pth``), as PyTorch does. ``file://`` URLs work; without a network the
error says where to put the file by hand.

Loading models from a repository's ``hubconf.py`` (``torch.hub.load``/``list``/``help``) is
not provided: it runs the repository's code, written for PyTorch.

>>> import fiamma, os, tempfile
>>> d = tempfile.mkdtemp()
>>> fiamma.save({"w": fiamma.ones(2)}, os.path.join(d, "tiny.pth"))
>>> fiamma.hub.set_dir(os.path.join(d, "hub"))
>>> sd = fiamma.hub.load_state_dict_from_url("file://" + os.path.join(d, "tiny.pth"),
...                                          progress=False)
>>> sd["w"].tolist()
[1.0, 1.0]
"""

import hashlib
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from urllib.parse import urlparse  # noqa: F401  (re-exported, as torch.hub does; timm imports it)

__all__ = ["get_dir", "set_dir", "load_state_dict_from_url", "download_url_to_file",
           "DownloadError"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
_hub_dir = None


class DownloadError(urllib.error.URLError):
    """A download that could not be made (offline, not found, refused); an ``OSError``."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message

    def __str__(self):
        return self.message


def _fiamma_home():
    home = os.environ.get("FIAMMA_HOME")
    if home:
        return os.path.expanduser(home)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.expanduser(os.path.join(cache, "fiamma"))


# PyTorch's private name for the cache root (``$TORCH_HOME``), which libraries import
_get_torch_home = _fiamma_home


def get_dir():
    """The hub cache directory: what ``set_dir`` set, else ``$FIAMMA_HOME/hub``."""
    return _hub_dir if _hub_dir is not None else os.path.join(_fiamma_home(), "hub")


def set_dir(d):
    """Use ``d`` as the hub cache directory from now on."""
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download ``url`` to the file ``dst`` (written under a temporary name and renamed, so an
    interrupted download leaves nothing). With ``hash_prefix``, the file's SHA-256 hex digest
    must start with it, else ``RuntimeError``."""
    dst = os.path.expanduser(os.fspath(dst))
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    req = urllib.request.Request(url, headers={"User-Agent": "fiamma.hub"})
    try:
        src = urllib.request.urlopen(req, timeout=60)
    except urllib.error.HTTPError as e:
        raise DownloadError(f"fiamma.hub: cannot download {url}: HTTP {e.code} {e.reason}") \
            from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(
            f"fiamma.hub: cannot download {url}: {reason} (no network? put the file at "
            f"{dst} to use it without downloading)") from None
    total = src.headers.get("Content-Length") if hasattr(src, "headers") else None
    total = int(total) if total and total.isdigit() else None
    sha = hashlib.sha256() if hash_prefix is not None else None
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=folder)
    done = 0
    try:
        with os.fdopen(fd, "wb") as f, src:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                f.write(chunk)
                done += len(chunk)
                if sha is not None:
                    sha.update(chunk)
                if progress and total:
                    sys.stderr.write(f"\r{100 * done // total:3d}% of {total} bytes")
        if progress and total:
            sys.stderr.write("\n")
        if sha is not None:
            digest = sha.hexdigest()
            if not digest.startswith(hash_prefix):
                raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                                   f'"{digest}")')
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=False):
    """Load the checkpoint at ``url``, downloading it into ``model_dir`` (default
    ``get_dir()/checkpoints``) unless a file of that name is already there.

    ``file_name`` overrides the name taken from the URL; ``check_hash`` verifies the SHA-256
    prefix in the name on download; ``map_location`` is passed to ``fiamma.load`` (which loads
    as PyTorch's ``weights_only=True`` always does)."""
    import fiamma

    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    model_dir = os.path.expanduser(os.fspath(model_dir))
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    if not filename:
        raise ValueError(f"load_state_dict_from_url: cannot take a file name from {url!r}: "
                         "pass file_name=")
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        if progress:
            sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        hash_prefix = None
        if check_hash:
            m = HASH_REGEX.search(filename)
            hash_prefix = m.group(1) if m else None
        download_url_to_file(url, cached, hash_prefix, progress=progress)
    return fiamma.load(cached, map_location=map_location)
