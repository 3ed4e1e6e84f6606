"""Key-value stores (PyTorch's ``torch.distributed.Store`` API): the rendezvous of
``init_method="tcp://..."`` / ``"file://..."`` and a tool for programs of their own.

``TCPStore``: one process (``is_master=True``) serves the keys from a thread; every process
(the master too) talks to it through a socket. ``FileStore``: the keys live in a file that all
processes can open (a shared file system), guarded by ``fcntl`` locks. ``HashStore``: in one
process. ``PrefixStore``: a name space in another store.

Values are bytes (str values are stored UTF-8 encoded); ``get`` and ``wait`` block until the
keys exist, up to the store's timeout, then raise ``DistStoreError``.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
import struct
import subprocess
import sys
import threading
import time

from fiamma.distributed._group import DistError, _seconds
from fiamma.distributed._store_server import _OPS, _recv, _send, _Table

DEFAULT_STORE_TIMEOUT = datetime.timedelta(seconds=300)


class DistStoreError(DistError):
    """A store operation failed or timed out (a key never appeared)."""


DistStoreError.__module__ = "fiamma.distributed"


def _bytes(value, what):
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what}: value must be str or bytes, got {type(value).__name__}")


def _key(key, what):
    if not isinstance(key, str):
        raise TypeError(f"{what}: key must be a str, got {type(key).__name__}")
    return key


class Store:
    """The interface every store implements (PyTorch's names and semantics)."""

    def __init__(self, timeout=None):
        self._timeout = (_seconds(timeout, "Store") if timeout is not None
                         else DEFAULT_STORE_TIMEOUT.total_seconds())

    @property
    def timeout(self):
        return datetime.timedelta(seconds=self._timeout)

    def set_timeout(self, timeout):
        self._timeout = _seconds(timeout, "Store.set_timeout")

    def _limit(self, timeout, what):
        return self._timeout if timeout is None else _seconds(timeout, what)

    # subclasses implement _set, _get (None when absent), _add, _cas, _delete, _keys, _wait

    def set(self, key, value):
        """Store ``value`` (str or bytes) under ``key``, replacing what was there."""
        self._set(_key(key, "Store.set"), _bytes(value, "Store.set"))

    def get(self, key):
        """The value of ``key`` as bytes, waiting (up to the timeout) until it is set."""
        key = _key(key, "Store.get")
        self.wait([key])
        value = self._get(key)
        if value is None:
            raise DistStoreError(f"Store.get: key {key!r} was deleted while being read")
        return value

    def add(self, key, amount):
        """Add ``amount`` to the integer stored under ``key`` (0 when absent); returns the new
        value."""
        return self._add(_key(key, "Store.add"), int(amount))

    def compare_set(self, key, expected_value, desired_value):
        """Set ``key`` to ``desired_value`` if its value is ``expected_value`` (or if it is
        absent and ``expected_value`` is empty); returns the value it holds afterwards."""
        return self._cas(_key(key, "Store.compare_set"),
                         _bytes(expected_value, "Store.compare_set"),
                         _bytes(desired_value, "Store.compare_set"))

    def append(self, key, value):
        """Append ``value`` to the bytes of ``key`` (creating it)."""
        self._append(_key(key, "Store.append"), _bytes(value, "Store.append"))

    def multi_get(self, keys):
        return [self.get(k) for k in keys]

    def multi_set(self, keys, values):
        if len(keys) != len(values):
            raise ValueError(f"Store.multi_set: {len(keys)} keys but {len(values)} values")
        for k, v in zip(keys, values):
            self.set(k, v)

    def delete_key(self, key):
        """Remove ``key``; True if it existed."""
        return self._delete(_key(key, "Store.delete_key"))

    def check(self, keys):
        """Whether every key of ``keys`` is set (without waiting)."""
        return self._check([_key(k, "Store.check") for k in keys])

    def num_keys(self):
        return self._num_keys()

    def wait(self, keys, timeout=None):
        """Block until every key of ``keys`` is set; ``DistStoreError`` after ``timeout`` (a
        timedelta; default: the store's)."""
        keys = [_key(k, "Store.wait") for k in keys]
        limit = self._limit(timeout, "Store.wait")
        if not self._wait(keys, limit):
            missing = [k for k in keys if not self._check([k])]
            raise DistStoreError(f"{type(self).__name__}.wait: timed out after "
                                 f"{datetime.timedelta(seconds=limit)} waiting for keys "
                                 f"{missing}")


class HashStore(Store):
    """A store inside one process (threads share it).

    >>> from fiamma.distributed import HashStore
    >>> s = HashStore(); s.set("a", "1"); s.add("a", 2)
    3
    """

    def __init__(self):
        super().__init__()
        self._t = _Table()

    def _set(self, k, v):
        self._t.set(k, v)

    def _get(self, k):
        return self._t.get(k)

    def _add(self, k, n):
        try:
            return self._t.add(k, n)
        except ValueError as e:
            raise DistStoreError(str(e)) from None

    def _cas(self, k, e, d):
        return self._t.cas(k, e, d)

    def _append(self, k, v):
        self._t.append(k, v)

    def _delete(self, k):
        return self._t.delete(k)

    def _check(self, keys):
        return self._t.check(keys)

    def _num_keys(self):
        return len(self._t.data)

    def _wait(self, keys, seconds):
        return self._t.wait(keys, seconds)


class PrefixStore(Store):
    """The keys of ``store`` that start with ``prefix + "/"``, seen without the prefix.

    >>> from fiamma.distributed import HashStore, PrefixStore
    >>> base = HashStore(); PrefixStore("job", base).set("k", "v"); base.get("job/k")
    b'v'
    """

    def __init__(self, prefix, store):
        super().__init__()
        if not isinstance(store, Store):
            raise TypeError(f"PrefixStore: store must be a Store, got {type(store).__name__}")
        self._prefix, self.underlying_store = str(prefix), store
        self._timeout = store._timeout

    def _k(self, key):
        return f"{self._prefix}/{key}"

    def _set(self, k, v):
        self.underlying_store._set(self._k(k), v)

    def _get(self, k):
        return self.underlying_store._get(self._k(k))

    def _add(self, k, n):
        return self.underlying_store._add(self._k(k), n)

    def _cas(self, k, e, d):
        return self.underlying_store._cas(self._k(k), e, d)

    def _append(self, k, v):
        self.underlying_store._append(self._k(k), v)

    def _delete(self, k):
        return self.underlying_store._delete(self._k(k))

    def _check(self, keys):
        return self.underlying_store._check([self._k(k) for k in keys])

    def _num_keys(self):
        return self.underlying_store._num_keys()

    def _wait(self, keys, seconds):
        return self.underlying_store._wait([self._k(k) for k in keys], seconds)


# ---- TCPStore -----------------------------------------------------------------------------

class TCPStore(Store):
    """A store served over TCP by the process created with ``is_master=True``.

    ``TCPStore(host_name, port, world_size=None, is_master=False, timeout=timedelta(seconds=
    300), wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=True)``.
    ``port=0`` on the master picks a free port (read it back from ``.port``). With
    ``wait_for_workers`` and a ``world_size``, the master's constructor returns once
    ``world_size`` stores (the master's included) have connected.

    >>> from fiamma.distributed import TCPStore
    >>> store = TCPStore("127.0.0.1", 0, 1, is_master=True)
    >>> store.set("first", "value"); store.get("first")
    b'value'
    """

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=None,
                 wait_for_workers=True, multi_tenant=False, master_listen_fd=None,
                 use_libuv=True):
        super().__init__(timeout)
        if master_listen_fd is not None:
            raise ValueError("TCPStore: master_listen_fd is not supported")
        self.host, self.world_size = str(host_name), world_size
        self._server = None
        self.port = int(port)
        if is_master:
            self._server = self._serve()
        self._lock = threading.Lock()
        self._sock = self._connect()
        n = self._add("__fiamma_tcpstore_workers", 1)
        if is_master and wait_for_workers and world_size and n < world_size:
            try:
                deadline = time.monotonic() + self._timeout
                while self._get("__fiamma_tcpstore_workers") is not None and int(
                        self._get("__fiamma_tcpstore_workers")) < world_size:
                    if time.monotonic() > deadline:
                        raise DistStoreError(
                            f"TCPStore: timed out after {self.timeout} waiting for "
                            f"{world_size} workers to connect to {self.host}:{self.port}")
                    time.sleep(0.01)
            except BaseException:
                self.close()
                raise

    def _serve(self):
        """Start the server process (see _store_server.py) and read back its port."""
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_store_server.py")
        proc = subprocess.Popen([sys.executable, "-I", "-S", script, self.host, str(self.port)],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline().strip()
        if not line.isdigit():
            err = proc.stderr.read() if proc.wait(timeout=10) is not None else ""
            last = err.strip().splitlines()[-1] if err.strip() else f"exit code {proc.returncode}"
            raise DistStoreError(f"TCPStore: cannot serve on {self.host}:{self.port}: {last}")
        self.port = int(line)
        return proc

    def _connect(self):
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                s = socket.create_connection((self.host, self.port),
                                             timeout=max(deadline - time.monotonic(), 0.1))
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistStoreError(f"TCPStore: could not connect to {self.host}:"
                                         f"{self.port} within {self.timeout}: {e}") from None
                time.sleep(0.05)

    def _call(self, op, parts, wait=None):
        with self._lock:
            try:
                self._sock.settimeout(None if wait is None else wait + 30)
                _send(self._sock, _OPS[op], parts)
                code, out = _recv(self._sock)
            except (ConnectionError, OSError) as e:
                raise DistStoreError(f"TCPStore.{op}: lost the connection to the store at "
                                     f"{self.host}:{self.port} (did its master process "
                                     f"exit?): {e}") from None
        if code != 0:
            raise DistStoreError(f"TCPStore.{op}: {out[0].decode()}")
        return out

    def _set(self, k, v):
        self._call("set", [k.encode(), v])

    def _get(self, k):
        found, v = self._call("get", [k.encode()])
        return v if found == b"1" else None

    def _add(self, k, n):
        return int(self._call("add", [k.encode(), str(n).encode()])[0])

    def _cas(self, k, e, d):
        return self._call("cas", [k.encode(), e, d])[0]

    def _append(self, k, v):
        self._call("append", [k.encode(), v])

    def _delete(self, k):
        return self._call("delete", [k.encode()])[0] == b"1"

    def _check(self, keys):
        return self._call("check", [k.encode() for k in keys])[0] == b"1"

    def _num_keys(self):
        return int(self._call("num_keys", [])[0]) - 1  # less the worker counter

    def _wait(self, keys, seconds):
        return self._call("wait", [repr(seconds).encode()] + [k.encode() for k in keys],
                          wait=seconds)[0] == b"1"

    @property
    def libuvBackend(self):  # noqa: N802  (PyTorch's name)
        return False

    def close(self):
        """Close this process's connection (and stop serving, on the master)."""
        try:
            self._sock.close()
        finally:
            if self._server is not None:
                self._server.terminate()
                self._server.wait()
                self._server = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass


# ---- FileStore ----------------------------------------------------------------------------

class FileStore(Store):
    """A store in a file every process can open (e.g. on a shared file system): an append-only
    log of records, read and written under an exclusive ``fcntl`` lock. ``world_size`` (or -1)
    is accepted for PyTorch's signature. The file is not removed when the store is dropped;
    ``init_process_group(init_method="file://...")`` removes it when every rank has left.

    >>> import os, tempfile
    >>> from fiamma.distributed import FileStore
    >>> path = os.path.join(tempfile.mkdtemp(), "store")
    >>> s = FileStore(path, 1); s.set("k", b"v"); s.get("k"), s.add("n", 5)
    (b'v', 5)
    """

    def __init__(self, file_name, world_size=-1):
        super().__init__()
        self.path = os.fspath(file_name)
        self.world_size = world_size
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DistStoreError(f"FileStore: cannot open {self.path!r}: {e}") from None
        os.close(fd)

    def _locked(self, fn):
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                return fn(f)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @staticmethod
    def _read(f):
        f.seek(0)
        data, table, off = f.read(), {}, 0
        while off + 9 <= len(data):
            op, kn, vn = struct.unpack_from("!BII", data, off)
            off += 9
            k = data[off:off + kn].decode()
            v = data[off + kn:off + kn + vn]
            off += kn + vn
            if op == 1:
                table[k] = v
            else:
                table.pop(k, None)
        return table

    @staticmethod
    def _write(f, op, k, v=b""):
        kb = k.encode()
        f.seek(0, os.SEEK_END)
        f.write(struct.pack("!BII", op, len(kb), len(v)) + kb + v)
        f.flush()

    def _set(self, k, v):
        self._locked(lambda f: self._write(f, 1, k, v))

    def _get(self, k):
        return self._locked(lambda f: self._read(f).get(k))

    def _add(self, k, n):
        def run(f):
            old = self._read(f).get(k, b"0")
            try:
                value = int(old) + n
            except ValueError:
                raise DistStoreError(f"FileStore.add: the value of {k!r} is not an integer "
                                     f"({old[:40]!r})") from None
            self._write(f, 1, k, str(value).encode())
            return value
        return self._locked(run)

    def _cas(self, k, e, d):
        def run(f):
            cur = self._read(f).get(k)
            if (cur is None and e == b"") or cur == e:
                self._write(f, 1, k, d)
                return d
            return cur if cur is not None else e
        return self._locked(run)

    def _append(self, k, v):
        self._locked(lambda f: self._write(f, 1, k, self._read(f).get(k, b"") + v))

    def _delete(self, k):
        def run(f):
            if k not in self._read(f):
                return False
            self._write(f, 2, k)
            return True
        return self._locked(run)

    def _check(self, keys):
        table = self._locked(self._read)
        return all(k in table for k in keys)

    def _num_keys(self):
        return len(self._locked(self._read))

    def _wait(self, keys, seconds):
        deadline = time.monotonic() + seconds
        pause = 1e-3
        while not self._check(keys):
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return True
