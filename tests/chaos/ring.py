"""The soak's ring: zringd daemons on 127.0.0.1 and one client per local rank.

Ring ports are picked free below the ephemeral range (zring.local_ring's
free_ports: random in 20000-32000, each checked by binding it), the IPC
sockets, the ring file and every log live in the run directory.
"""

import json
import os
import signal
import sys
import time

import zring
from zring.local_ring import free_ports

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "chaos_client.py")


class Ring:
    def __init__(self, registry, zringd, run_dir, nodes, local_ranks, timeout_ms, heartbeat_ms,
                 client_timeout_ms, seed):
        self.registry = registry
        self.zringd = zringd
        self.dir = run_dir
        self.nodes = nodes
        self.local_ranks = local_ranks
        self.timeout_ms = timeout_ms
        self.heartbeat_ms = heartbeat_ms
        self.client_timeout_ms = client_timeout_ms
        self.seed = seed
        self.config = os.path.join(run_dir, "ring.yaml")
        self.ports = []
        self.daemons = [None] * nodes
        self.clients = [None] * (nodes * local_ranks)  # by rank
        self.restarts = [0] * nodes
        self.client_starts = [0] * (nodes * local_ranks)

    @property
    def world_size(self):
        return self.nodes * self.local_ranks

    def name(self, node):
        return f"n{node}"

    def ipc(self, node):
        return f"ipc://{self.dir}/{self.name(node)}.sock"

    def node_of(self, rank):
        return rank // self.local_ranks

    def _write_config(self):
        self.ports = free_ports(self.nodes)
        lines = ["nodes:"]
        for n, port in enumerate(self.ports):
            lines.append(f"  - {{name: {self.name(n)}, address: tcp://127.0.0.1:{port}, ipc: '{self.ipc(n)}'}}")
        # The soak checks every op against the average of all ranks: the ring
        # must not go on without a node (min_nodes is every node).
        lines += [f"local_ranks: {self.local_ranks}", f"timeout_ms: {self.timeout_ms}",
                  f"heartbeat_ms: {self.heartbeat_ms}", f"min_nodes: {self.nodes}",
                  "log_level: " + os.environ.get("ZRING_CHAOS_LOG_LEVEL", "info"), ""]
        with open(self.config, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))

    # --- daemons -------------------------------------------------------------------

    def start_daemon(self, node):
        self.daemons[node] = self.registry.spawn(
            f"zringd {self.name(node)}", [self.zringd, "--config", self.config, "--node", self.name(node)],
            os.path.join(self.dir, f"{self.name(node)}.log"))
        self.restarts[node] += 1

    def is_up(self, node):
        try:
            return bool(zring.daemon_status(self.ipc(node), 500).get("ring_up"))
        except zring.Error:
            return False

    def wait_up(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        for n in range(self.nodes):
            while not self.is_up(n):
                if not self.daemons[n].running():
                    raise RuntimeError(f"zringd {self.name(n)} exited with status "
                                       f"{self.daemons[n].popen.returncode}:\n{self.daemons[n].log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the ring is not up after {timeout_s} s; "
                                       f"{self.name(n)}'s log:\n{self.daemons[n].log_tail()}")
                time.sleep(0.05)

    def start(self, up_timeout_s=60.0, attempts=3):
        """Every daemon, then waits for the ring; new ports if one was taken."""
        for attempt in range(attempts):
            self._write_config()
            for n in range(self.nodes):
                self.start_daemon(n)
            try:
                self.wait_up(up_timeout_s)
                self.restarts = [0] * self.nodes
                return
            except RuntimeError:
                exited = [d for d in self.daemons if not d.running()]
                for d in self.daemons:
                    d.stop(3.0)
                if not exited or attempt + 1 == attempts:
                    raise

    def status(self, node):
        try:
            return zring.daemon_status(self.ipc(node), 2000)
        except zring.Error as e:
            return {"error": str(e)}

    # --- clients -------------------------------------------------------------------

    def start_client(self, rank):
        node, local = divmod(rank, self.local_ranks)
        argv = [sys.executable, CLIENT, "--endpoint", self.ipc(node), "--rank", str(rank),
                "--local-rank", str(local), "--world-size", str(self.world_size),
                "--seed", str(self.seed), "--timeout-ms", str(self.client_timeout_ms)]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        client = self.registry.spawn(f"client rank {rank}", argv,
                                     os.path.join(self.dir, f"client-{rank}.log"), env, talking=True)
        client.ready = False
        client.started_at = time.monotonic()
        self.clients[rank] = client
        self.client_starts[rank] += 1
        return client

    def poll_ready(self, client):
        """Reads a starting client's first line: True once it said ready."""
        lines, ended = client.read_lines()
        for line in lines:
            if json.loads(line).get("ready"):
                client.ready = True
        return client.ready, ended

    def quit_clients(self, grace_s):
        """Asks every client to quit; returns those that did not in time."""
        for client in self.clients:
            if client is not None and client.running():
                client.signal(signal.SIGCONT)
                client.send_line(json.dumps({"cmd": "quit"}))
        deadline = time.monotonic() + grace_s
        late = []
        for client in self.clients:
            if client is None:
                continue
            while client.running() and time.monotonic() < deadline:
                time.sleep(0.02)
            if client.running():
                late.append(client)
            client.stop(1.0)
        return late
