"""Downloading and unpacking files for datasets (and pretrained weights): ``download_url``,
``check_integrity``, ``extract_archive``, ``download_and_extract_archive`` (torchvision's names).

Downloads are atomic and resumable: bytes go to ``<file>.part`` in the destination folder, an
existing ``.part`` is continued with an HTTP ``Range`` request, the hash is checked, and only
then is the file renamed into place. A file whose hash does not match is deleted and an error
raised, so the destination never holds a corrupt file under its real name. An interrupted
transfer leaves the ``.part`` for the next call to resume.

>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> open(os.path.join(root, "a.txt"), "wb").write(b"hello")
5
>>> check_integrity(os.path.join(root, "a.txt"), md5="5d41402abc4b2a76b9719d911017c592")
True
"""

import bz2
import gzip
import hashlib
import http.client
import lzma
import os
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile

__all__ = ["calculate_md5", "check_md5", "check_integrity", "download_url", "extract_archive",
           "download_and_extract_archive", "DownloadError"]

_CHUNK = 1 << 20
USER_AGENT = "fiamma-vision"


class DownloadError(RuntimeError):
    """A download failed: network error, bad HTTP status, or a hash mismatch."""


def _file_hash(fpath, algorithm, chunk_size=_CHUNK):
    h = hashlib.new(algorithm, usedforsecurity=False) if algorithm == "md5" else \
        hashlib.new(algorithm)
    with open(fpath, "rb") as f:
        for block in iter(lambda: f.read(chunk_size), b""):
            h.update(block)
    return h.hexdigest()


def calculate_md5(fpath, chunk_size=_CHUNK):
    """The md5 hex digest of a file."""
    return _file_hash(fpath, "md5", chunk_size)


def check_md5(fpath, md5, **kwargs):
    """Whether ``fpath``'s md5 is ``md5``."""
    return md5.lower() == calculate_md5(fpath, **kwargs)


def _mismatch(fpath, md5=None, sha256=None):
    """None when the hashes given match, else a description of the first mismatch."""
    for algo, want in (("md5", md5), ("sha256", sha256)):
        if want:
            got = _file_hash(fpath, algo)
            if got != want.lower():
                return f"{algo} {got}, expected {want.lower()}"
    return None


def check_integrity(fpath, md5=None, sha256=None):
    """True when ``fpath`` is a file and matches the hashes given (any file passes when none
    is given)."""
    if not os.path.isfile(fpath):
        return False
    return _mismatch(fpath, md5, sha256) is None


class _Progress:
    """A one-line progress bar on stderr (redrawn at most ten times a second)."""

    def __init__(self, name, total, start, enabled):
        self.name, self.total, self.done, self.enabled = name, total, start, enabled
        self.last = 0.0

    def update(self, n, force=False):
        self.done += n
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < 0.1):
            return
        self.last = now
        mb = self.done / 1e6
        if self.total:
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            sys.stderr.write(f"\r{self.name}: [{bar:<30}] {frac:6.1%} {mb:.1f}/"
                             f"{self.total / 1e6:.1f} MB")
        else:
            sys.stderr.write(f"\r{self.name}: {mb:.1f} MB")
        sys.stderr.flush()

    def close(self):
        if self.enabled:
            self.update(0, force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()


def _range_starts_at(resp, start):
    # Content-Range: bytes START-END/TOTAL
    value = resp.headers.get("Content-Range", "")
    try:
        return int(value.split()[1].split("-")[0]) == start
    except (IndexError, ValueError):
        return False


def _fetch(url, part, progress, timeout):
    """Download ``url`` into ``part``, continuing an existing partial file with Range."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    headers = {"User-Agent": USER_AGENT}
    if have:
        headers["Range"] = f"bytes={have}-"
    req = urllib.request.Request(url, headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:
            return  # the server has nothing past what we hold: the part is complete
        raise
    with resp:
        if have and resp.status == 206 and not _range_starts_at(resp, have):
            os.unlink(part)
            raise DownloadError(f"download of {url}: the server answered the resume request "
                                f"with the range {resp.headers.get('Content-Range')!r}, not "
                                f"bytes {have}-; the partial file was deleted")
        if have and resp.status != 206:
            have = 0  # the server ignored the Range request: start over
        length = resp.headers.get("Content-Length")
        length = int(length) if length is not None and length.isdigit() else None
        total = have + length if length is not None else None
        bar = _Progress(os.path.basename(part[:-5]), total, have, progress)
        got = 0
        with open(part, "ab" if have else "wb") as f:
            try:
                while True:
                    block = resp.read(_CHUNK)
                    if not block:
                        break
                    f.write(block)
                    got += len(block)
                    bar.update(len(block))
            finally:
                bar.close()
        if length is not None and got < length:
            raise DownloadError(f"download of {url} was interrupted after {have + got} of "
                                f"{total} bytes; the partial file {part} is kept and the next "
                                "call resumes it")


def download_url(url, root, filename=None, md5=None, max_redirect_hops=3, *, sha256=None,
                 progress=True, timeout=60):
    """Download ``url`` to ``root/filename`` (default: the URL's last path component), unless a
    file with the expected hash (``md5`` and/or ``sha256``) is already there. Returns the path.

    Atomic (``.part`` then rename), resumable (HTTP Range on an existing ``.part``), verified:
    on a hash mismatch the downloaded bytes are deleted and :class:`DownloadError` is raised.
    ``progress`` draws a bar on stderr. Redirects are followed (``max_redirect_hops`` is
    accepted for torchvision compatibility; urllib follows up to its own limit).
    """
    root = os.path.expanduser(os.fspath(root))
    if not filename:
        filename = os.path.basename(urllib.parse.urlparse(url).path)
    if not filename:
        raise ValueError(f"download_url: cannot name the file of {url!r}: pass filename=")
    fpath = os.path.join(root, filename)
    if check_integrity(fpath, md5, sha256):
        return fpath
    os.makedirs(root, exist_ok=True)
    part = fpath + ".part"
    try:
        _fetch(url, part, progress, timeout)
    except DownloadError:
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        kept = (f"; the partial file {part} is kept and the next call resumes it"
                if os.path.exists(part) and os.path.getsize(part) else "")
        if os.path.exists(part) and not os.path.getsize(part):
            os.unlink(part)
        raise DownloadError(f"download of {url} failed: {e}{kept}") from e
    bad = _mismatch(part, md5, sha256)
    if bad is not None:
        os.unlink(part)
        raise DownloadError(f"download of {url} is corrupt ({bad}); the file was deleted")
    os.replace(part, fpath)
    return fpath


def _safe_target(base, name):
    target = os.path.realpath(os.path.join(base, name))
    if os.path.commonpath([target, os.path.realpath(base)]) != os.path.realpath(base):
        raise RuntimeError(f"extract_archive: refusing the member {name!r}, which points "
                           f"outside {base}")
    return target


_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz", ".tar.xz", ".txz")
_COMPRESSORS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def extract_archive(from_path, to_path=None, remove_finished=False):
    """Unpack ``from_path`` (.tar[.gz|.bz2|.xz], .tgz, .zip, or a single compressed file:
    .gz, .bz2, .xz) into the folder ``to_path`` (default: the archive's folder). Members that
    would land outside ``to_path`` are refused. Returns ``to_path``."""
    from_path = os.fspath(from_path)
    if to_path is None:
        to_path = os.path.dirname(from_path)
    to_path = os.fspath(to_path)
    os.makedirs(to_path, exist_ok=True)
    low = from_path.lower()
    try:
        if low.endswith(_TAR_SUFFIXES):
            with tarfile.open(from_path, "r:*") as tar:
                for m in tar.getmembers():
                    _safe_target(to_path, m.name)
                    if not (m.isfile() or m.isdir()):
                        raise RuntimeError(f"extract_archive: refusing the member {m.name!r} "
                                           f"of {from_path} (not a file or folder)")
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(to_path, filter="data")
                else:  # older Pythons: the members were checked above
                    tar.extractall(to_path)
        elif low.endswith(".zip"):
            with zipfile.ZipFile(from_path) as z:
                for name in z.namelist():
                    _safe_target(to_path, name)
                z.extractall(to_path)
        else:
            ext = next((e for e in _COMPRESSORS if low.endswith(e)), None)
            if ext is None:
                raise ValueError(f"extract_archive: unknown archive type of {from_path}")
            out = os.path.join(to_path, os.path.basename(from_path)[:-len(ext)])
            tmp = out + ".part"
            try:
                with _COMPRESSORS[ext](from_path, "rb") as src, open(tmp, "wb") as dst:
                    shutil.copyfileobj(src, dst, _CHUNK)
                os.replace(tmp, out)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, lzma.LZMAError) as e:
        raise RuntimeError(f"extract_archive: cannot unpack {from_path}: {e}") from e
    if remove_finished:
        os.remove(from_path)
    return to_path


def download_and_extract_archive(url, download_root, extract_root=None, filename=None, md5=None,
                                 remove_finished=False, *, sha256=None, progress=True):
    """:func:`download_url` then :func:`extract_archive` into ``extract_root`` (default:
    ``download_root``)."""
    path = download_url(url, download_root, filename, md5, sha256=sha256, progress=progress)
    return extract_archive(path, extract_root or download_root, remove_finished)
