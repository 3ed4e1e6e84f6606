"""A PMI-1 server: what ``mpiexec`` (Hydra) provides to MPICH's ranks, so that processes that
were started some other way (``init_method="tcp://..."``) can form one MPI world.

MPICH's ranks find their process manager through the environment: ``PMI_FD`` (a connected
socket), ``PMI_RANK``, ``PMI_SIZE``. Over that socket MPI_Init exchanges the ranks' addresses
through a key-value space (``put``/``get``) and ``barrier_in``; MPI_Finalize ends with a
barrier. Rank 0 of the rendezvous starts this server as a separate process (``python -m
fiamma.distributed._pmi SIZE HOST SECONDS``, which prints its port), so that it keeps serving
while rank 0's interpreter shuts down. It exits once every rank has finalized or closed its
connection, when no rank has connected within SECONDS, or when its parent dies.

A rank that closes its connection without finalizing (it died) or that sends ``abort`` fails
the world: barriers then answer with an error, so the others' MPI_Finalize fails instead of
waiting forever.

Each server names its key-value space uniquely (``fiamma_<pid>_<random>``, as Hydra's
``kvs_<pid>_...``): MPICH names the node's shared-memory segment after it, so a constant name
made every world on a machine open one segment, and a segment left by a killed job (or one of
a world running at the same time) broke every later world's MPI_Init ("failed to unpack
address"). When the server exits, the segments that appeared while it served and that no live
process maps (a killed rank's) are removed, as the launcher does for ``mpiexec`` jobs.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import socket
import sys
import threading
import time


class Server:
    def __init__(self, size, host="127.0.0.1", port=0):
        self.size = size
        self.kvsname = f"fiamma_{os.getpid()}_{secrets.token_hex(6)}"
        self.kvs = {}
        self.cond = threading.Condition()
        self.arrived = 0
        self.generation = 0
        self.failed = None
        self.connected = 0
        self.closed = 0
        self.sock = socket.create_server((host, port), backlog=max(size, 16))
        self.port = self.sock.getsockname()[1]

    def serve_forever(self, connect_seconds, parent=None):
        threading.Thread(target=self._accept, daemon=True).start()
        deadline = time.monotonic() + connect_seconds
        while True:
            with self.cond:
                if self.connected and self.closed >= self.connected >= self.size:
                    return 0
                if time.monotonic() > deadline and self.connected < self.size:
                    if self.connected == 0:
                        return 1
                    self.failed = self.failed or (f"only {self.connected} of {self.size} ranks "
                                                  "connected to the process manager in time")
                    self.cond.notify_all()
                self.cond.wait(0.2)
            if parent is not None and os.getppid() != parent and self.connected < self.size:
                return 1  # the rank that started us is gone before the world formed

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.cond:
                self.connected += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _fail(self, why):
        with self.cond:
            if self.failed is None:
                self.failed = why
            self.cond.notify_all()

    def _serve(self, conn):
        finalized = False
        buf = b""
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    reply, finalized = self._handle(line.decode(errors="replace"))
                    if reply is not None:
                        conn.sendall((reply + "\n").encode())
        except OSError:
            pass
        finally:
            conn.close()
            if not finalized:
                self._fail("a rank closed its connection to the process manager without "
                           "finalizing MPI (it died)")
            with self.cond:
                self.closed += 1
                self.cond.notify_all()

    def _handle(self, line):
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        cmd = fields.get("cmd")
        if cmd == "init":
            return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0", False
        if cmd == "get_maxes":
            return "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024 rc=0", False
        if cmd == "get_appnum":
            return "cmd=appnum appnum=0 rc=0", False
        if cmd == "get_my_kvsname":
            return f"cmd=my_kvsname kvsname={self.kvsname} rc=0", False
        if cmd == "get_universe_size":
            return f"cmd=universe_size size={self.size} rc=0", False
        if cmd == "put":
            with self.cond:
                self.kvs[fields.get("key", "")] = fields.get("value", "")
            return "cmd=put_result rc=0", False
        if cmd == "get":
            with self.cond:
                value = self.kvs.get(fields.get("key", ""))
            if value is None:
                return "cmd=get_result rc=-1 msg=key_not_found", False
            return f"cmd=get_result rc=0 value={value}", False
        if cmd == "barrier_in":
            return self._barrier(), False
        if cmd == "finalize":
            return "cmd=finalize_ack rc=0", True
        if cmd == "abort":
            sys.stderr.write(f"fiamma.distributed: a rank aborted the MPI job: "
                             f"{fields.get('message', '')}\n")
            self._fail("a rank aborted the job")
            return None, True
        return f"cmd={cmd}_result rc=-1 msg=unsupported_by_fiamma_pmi", False

    def _barrier(self):
        with self.cond:
            if self.failed is not None:
                return "cmd=barrier_out rc=-1 msg=a_rank_failed"
            gen = self.generation
            self.arrived += 1
            if self.arrived == self.size:
                self.arrived = 0
                self.generation += 1
                self.cond.notify_all()
            else:
                self.cond.wait_for(lambda: self.generation != gen or self.failed is not None)
            if self.generation == gen:
                return "cmd=barrier_out rc=-1 msg=a_rank_failed"
            return "cmd=barrier_out rc=0"


def _shm_sweep():
    # run as a script with -I (no package on sys.path): load the sibling module by its path
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shm_sweep.py")
    spec = importlib.util.spec_from_file_location("_fiamma_shm_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    size, host, seconds = int(argv[0]), argv[1], float(argv[2])
    parent = os.getppid()
    sweep = _shm_sweep()
    before = sweep.segments()
    server = Server(size, host)
    sys.stdout.write(f"{server.port}\n")
    sys.stdout.flush()
    try:
        return server.serve_forever(seconds, parent)
    finally:
        sweep.remove_orphans(before)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
