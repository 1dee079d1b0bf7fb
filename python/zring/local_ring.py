"""A ring of real zringd processes on 127.0.0.1, for tests and examples.

    from zring.local_ring import LocalRing
    with LocalRing("/path/to/zringd", nodes=4) as ring:   # started and up
        ar = zring.CompressedAllReduce.connect(ring.ipc(0), "fp16")

The ring lives in a fresh temporary directory (config, IPC sockets, logs) with
ring ports picked free on 127.0.0.1. Every daemon is stopped when the ring
is closed, when the with block ends (also on an exception or Ctrl-C) and, as
a last resort, when this process exits; on Linux the kernel also kills them
if this process dies without cleaning up (PR_SET_PDEATHSIG).
"""

import atexit
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from . import daemon_status
from ._errors import Error

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child before exec: SIGKILL when the parent goes away."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def spawn(argv, log_path=None, env=None):
    """Starts argv as a child that dies with this process; output to log_path."""
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env,
                                preexec_fn=_die_with_parent)
    finally:
        if log_path:
            log.close()


def stop(process, grace_s=5.0):
    """SIGTERM, then SIGKILL after grace_s; always reaps. No-op when gone."""
    if process is None or process.poll() is not None:
        return
    try:
        process.terminate()
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    except ProcessLookupError:
        pass


def free_ports(count):
    """count TCP ports on 127.0.0.1 that nothing is bound to now.

    Picked at random below the ephemeral range (32768 and up), so an
    outgoing connection cannot take one before the daemon binds it, and
    checked by binding each.
    """
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    ports = []
    for _ in range(10000):
        if len(ports) == count:
            return ports
        port = rng.randrange(20000, 32000)
        if port in ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    raise RuntimeError(f"cannot find {count} free TCP ports on 127.0.0.1")


class LocalRing:
    """nodes zringd daemons in a ring on 127.0.0.1, local_ranks clients each.

    start=True (the default) starts them and waits until the ring is up.
    World size = nodes * local_ranks; node n's clients connect to ipc(n).
    min_nodes, when given, is the ring file's min_nodes (the smallest ring
    that may go on without the others; zringd's default is a majority).
    """

    def __init__(self, zringd, nodes=2, local_ranks=1, *, timeout_ms=5000, heartbeat_ms=200,
                 log_level="info", start=True, up_timeout_s=60.0, directory=None, min_nodes=None):
        if not os.access(zringd, os.X_OK):
            raise Error("invalid_argument", f"LocalRing: {zringd} is not an executable zringd")
        self.zringd = zringd
        self.nodes = int(nodes)
        self.local_ranks = int(local_ranks)
        self.timeout_ms = int(timeout_ms)
        self.heartbeat_ms = int(heartbeat_ms)
        self.min_nodes = None if min_nodes is None else int(min_nodes)
        self.log_level = log_level
        self._own_dir = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="zring-ring-")
        self.config = os.path.join(self.dir, "ring.yaml")
        self.ports = []
        self.daemons = [None] * self.nodes
        atexit.register(self.close)
        if start:
            try:
                self.start(up_timeout_s)
            except BaseException:
                self.close()
                raise

    @property
    def world_size(self):
        return self.nodes * self.local_ranks

    def name(self, node):
        return f"n{node}"

    def ipc(self, node):
        """The endpoint node's clients connect to."""
        return f"ipc://{self.dir}/{self.name(node)}.sock"

    def log_path(self, node):
        return os.path.join(self.dir, f"{self.name(node)}.log")

    def log(self, node):
        try:
            with open(self.log_path(node), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def _write_config(self):
        self.ports = free_ports(self.nodes)
        lines = ["nodes:"]
        for n, port in enumerate(self.ports):
            lines.append(f"  - {{name: {self.name(n)}, address: tcp://127.0.0.1:{port}, "
                         f"ipc: '{self.ipc(n)}'}}")
        lines += [f"ipc: ipc://{self.dir}/unused.sock",
                  f"local_ranks: {self.local_ranks}",
                  f"timeout_ms: {self.timeout_ms}",
                  f"heartbeat_ms: {self.heartbeat_ms}",
                  f"log_level: {self.log_level}"]
        if self.min_nodes is not None:
            lines.append(f"min_nodes: {self.min_nodes}")
        lines.append("")
        with open(self.config, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))

    def start_node(self, node):
        stop(self.daemons[node])
        self.daemons[node] = spawn([self.zringd, "--config", self.config,
                                    "--node", self.name(node)], self.log_path(node))

    def start(self, up_timeout_s=60.0, attempts=3):
        """Starts every daemon and waits for the ring; new ports if one was taken."""
        for attempt in range(attempts):
            self._write_config()
            for n in range(self.nodes):
                self.start_node(n)
            try:
                self.wait_up(up_timeout_s)
                return
            except RuntimeError:
                exited = [n for n, d in enumerate(self.daemons) if d.poll() is not None]
                self.stop_all()
                if not exited or attempt + 1 == attempts:
                    raise
                # Most likely a port taken between the check and the bind: retry.

    def _status(self, node):
        try:
            return daemon_status(self.ipc(node), 500)
        except Error as e:
            return {"error": str(e)}

    def is_up(self, node):
        return bool(self._status(node).get("ring_up"))

    def _wait_each(self, nodes, ready, timeout_s, timed_out):
        """Waits until ready(status) holds for each of nodes in turn;
        RuntimeError when one exits, or timed_out(node, its last status)
        once timeout_s has passed."""
        deadline = time.monotonic() + timeout_s
        for n in nodes:
            while not ready(status := self._status(n)):
                if self.daemons[n] is None or self.daemons[n].poll() is not None:
                    raise RuntimeError(f"zringd {self.name(n)} exited; its log:\n{self.log(n)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(timed_out(n, status))
                time.sleep(0.05)

    def wait_up(self, timeout_s=60.0):
        """Returns once every daemon reports the ring up; RuntimeError otherwise."""
        self._wait_each(range(self.nodes), lambda s: bool(s.get("ring_up")), timeout_s,
                        lambda n, _: f"the ring is not up after {timeout_s} s; log of "
                                     f"{self.name(n)}:\n{self.log(n)}")

    def wait_members(self, count, timeout_s=60.0):
        """Returns once every running daemon reports the ring up with count
        members; RuntimeError naming what the last status said otherwise."""
        running = [n for n, d in enumerate(self.daemons) if d is not None and d.poll() is None]
        self._wait_each(
            running, lambda s: bool(s.get("ring_up")) and len(s.get("ring_members", [])) == count,
            timeout_s,
            lambda n, s: f"no ring of {count} after {timeout_s} s: {self.name(n)} reports "
                         f"ring_up={s.get('ring_up')}, members={s.get('ring_members')}, "
                         f"last change: {s.get('last_change') or s.get('error')}")

    def stop_node(self, node):
        stop(self.daemons[node])

    def stop_all(self):
        for d in self.daemons:
            stop(d)

    def close(self):
        """Stops every daemon and removes the directory (if it made it)."""
        self.stop_all()
        # A daemon that had to be killed left the shared buffers that had no
        # op yet (zringd removes a buffer's file at the first op in it): those
        # in /dev/shm are named after its socket (zringd's ipc_server.cpp).
        stem = ("zring" + os.path.abspath(self.dir) + "/").replace("/", "_")
        try:
            for name in os.listdir("/dev/shm"):
                if name.startswith(stem):
                    try:
                        os.remove(os.path.join("/dev/shm", name))
                    except OSError:
                        pass
        except OSError:
            pass
        if self._own_dir and os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
