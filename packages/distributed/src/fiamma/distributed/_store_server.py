"""The server of a TCPStore, run as its own process by the master (``python _store_server.py
HOST PORT`` prints the port it listens on): a Python thread in the master could not answer
while that process is inside a long call that holds the GIL (MPI_Init does, and the other ranks
use the store while rank 0 initialises MPI). Only the standard library is imported here, so the
server starts in a few tens of milliseconds. It exits when its parent process does.

Wire format: a request is ``!BII`` (op, number of parts, payload bytes) and the parts, each a
``!I`` length and bytes; the reply has the same shape with op 0 (ok) or 1 (error text).
"""

import os
import socket
import struct
import sys
import threading
import time


class _Table:
    """The keys of a HashStore or of a TCPStore's server, with waiting."""

    def __init__(self):
        self.data = {}
        self.cond = threading.Condition()

    def set(self, key, value):
        with self.cond:
            self.data[key] = value
            self.cond.notify_all()

    def get(self, key):
        with self.cond:
            return self.data.get(key)

    def add(self, key, amount):
        with self.cond:
            old = self.data.get(key, b"0")
            try:
                value = int(old) + amount
            except ValueError:
                raise ValueError(f"Store.add: the value of {key!r} is not an integer "
                                 f"({old[:40]!r})") from None
            self.data[key] = str(value).encode()
            self.cond.notify_all()
            return value

    def cas(self, key, expected, desired):
        with self.cond:
            cur = self.data.get(key)
            if (cur is None and expected == b"") or cur == expected:
                self.data[key] = desired
                self.cond.notify_all()
                return desired
            return cur if cur is not None else expected

    def append(self, key, value):
        with self.cond:
            self.data[key] = self.data.get(key, b"") + value
            self.cond.notify_all()

    def delete(self, key):
        with self.cond:
            return self.data.pop(key, None) is not None

    def check(self, keys):
        with self.cond:
            return all(k in self.data for k in keys)

    def wait(self, keys, seconds):
        with self.cond:
            return self.cond.wait_for(lambda: all(k in self.data for k in keys), seconds)


_OPS = {"set": 1, "get": 2, "add": 3, "cas": 4, "append": 5, "delete": 6, "check": 7,
        "num_keys": 8, "wait": 9}


def _send(sock, code, parts):
    payload = b"".join(struct.pack("!I", len(p)) + p for p in parts)
    sock.sendall(struct.pack("!BII", code, len(parts), len(payload)) + payload)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the store's connection closed")
        buf += chunk
    return bytes(buf)


def _recv(sock):
    code, count, size = struct.unpack("!BII", _recv_exact(sock, 9))
    payload = _recv_exact(sock, size)
    parts, off = [], 0
    for _ in range(count):
        (n,) = struct.unpack_from("!I", payload, off)
        parts.append(payload[off + 4:off + 4 + n])
        off += 4 + n
    return code, parts


class _Server:
    """The master's side of a TCPStore: a thread accepting connections, one thread each."""

    def __init__(self, host, port):
        self.table = _Table()
        self.sock = socket.create_server((host, port), reuse_port=False, backlog=128)
        self.port = self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True,
                         name="fiamma.distributed TCPStore").start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        t = self.table
        with conn:
            while True:
                try:
                    code, p = _recv(conn)
                except (ConnectionError, OSError):
                    return
                try:
                    if code == 1:
                        t.set(p[0].decode(), p[1])
                        out = []
                    elif code == 2:
                        v = t.get(p[0].decode())
                        out = [b"1", v] if v is not None else [b"0", b""]
                    elif code == 3:
                        out = [str(t.add(p[0].decode(), int(p[1]))).encode()]
                    elif code == 4:
                        out = [t.cas(p[0].decode(), p[1], p[2])]
                    elif code == 5:
                        t.append(p[0].decode(), p[1])
                        out = []
                    elif code == 6:
                        out = [b"1" if t.delete(p[0].decode()) else b"0"]
                    elif code == 7:
                        out = [b"1" if t.check([k.decode() for k in p]) else b"0"]
                    elif code == 8:
                        out = [str(len(t.data)).encode()]
                    elif code == 9:
                        ok = t.wait([k.decode() for k in p[1:]], float(p[0]))
                        out = [b"1" if ok else b"0"]
                    else:
                        raise ValueError(f"unknown request {code}")
                    _send(conn, 0, out)
                except ValueError as e:
                    _send(conn, 1, [str(e).encode()])
                except OSError:
                    return

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def main(argv):
    # the parent is polled rather than PR_SET_PDEATHSIG'd: that signal comes when the thread
    # that started this process ends, which may be long before the process does
    parent = os.getppid()
    server = _Server(argv[0], int(argv[1]))
    sys.stdout.write(f"{server.port}\n")
    sys.stdout.flush()
    while os.getppid() == parent:
        time.sleep(0.5)
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
