"""The faults of the chaos soak: what each kind does, when, and to whom.

An episode is one fault: a few actions at set times (SIGKILL then a
restart, SIGSTOP then SIGCONT, a flood of garbage that stops by itself),
planned from the soak's seeded random generator. The driver runs the
actions as they fall due between its looks at the clients' answers, so a
fault lands at a random point: inside an op or between two. Every action
is recorded with its time, which is where the driver measures the time to
an error from.
"""

import random
import signal
import threading
import time

from garbage import burst

# daemon_stop_short: shorter than timeout_ms; daemon_stop_long: longer than
# timeout_ms (the ring fails the node's ops) but shorter than the clients'
# timeout (its own clients wait for it); daemon_stop_beyond_client: longer
# than the clients' timeout too (they give up: "zringd went silent").
KINDS = ("daemon_kill", "daemon_stop_short", "daemon_stop_long", "daemon_stop_beyond_client",
         "client_kill", "client_stop_short", "client_stop_long", "ring_garbage", "ipc_garbage")


class Action:
    def __init__(self, at, what, target, text):
        self.at = at          # seconds after the episode began
        self.what = what      # a method name of FaultRunner
        self.target = target  # node or rank
        self.text = text
        self.done_at = None


class Episode:
    def __init__(self, number, kind, target, method, description, actions):
        self.number = number
        self.kind = kind
        self.target = target
        self.method = method
        self.description = description
        self.actions = actions
        self.began = None
        self.injected_at = None   # when the first action ran
        self.repaired_at = None   # when the last one ran
        self.intervals = []       # (t0, t1) of every rank's op while it ran
        self.recovered_after = None

    def begin(self, now):
        self.began = now

    def due(self, now):
        return [a for a in self.actions if a.done_at is None and self.began + a.at <= now]

    @property
    def finished(self):
        return all(a.done_at is not None for a in self.actions)

    def __str__(self):
        return f"fault #{self.number} {self.kind} ({self.description})"


def long_stop_s(timeout_ms, margin_s):
    """The longest stop of daemon_stop_long and client_stop_long."""
    return timeout_ms / 1000.0 + 1.0 + margin_s + 2.0


def plan(number, kind, method, rng, ring, margin_s):
    """The episode of one fault of kind, its target drawn from rng."""
    t = ring.timeout_ms / 1000.0
    start = rng.uniform(0.05, 0.5)
    # Long stops last until after the errors they cause are due (plus the
    # margin), so that a late error is measured from the SIGSTOP, not from
    # the SIGCONT.
    long_s = long_stop_s(ring.timeout_ms, margin_s) - rng.uniform(0.0, 1.5)
    # Past the clients' timeout by up to as much again: the node wakes up
    # at any point of the rounds the others go on with.
    client_s = ring.client_timeout_ms / 1000.0
    beyond_s = client_s + rng.uniform(0.3, client_s)
    if kind.startswith("daemon") or kind.endswith("garbage"):
        target = rng.randrange(ring.nodes)
        who = ring.name(target)
    else:
        target = rng.randrange(ring.world_size)
        who = f"rank {target}"
    if kind == "daemon_kill":
        delay = rng.choice([0.0, rng.uniform(0.1, 0.8), rng.uniform(1.2, 2 * t)])
        actions = [Action(start, "kill_daemon", target, f"SIGKILL zringd {who}"),
                   Action(start + delay, "start_daemon", target, f"restart zringd {who}")]
        text = f"SIGKILL zringd {who}, restarted {delay:.2f} s later"
    elif kind.startswith("daemon_stop") or kind.startswith("client_stop"):
        held = {"short": rng.uniform(0.1, 0.5) * t, "long": long_s, "client": beyond_s}[kind.rsplit("_", 1)[1]]
        process = "zringd" if kind.startswith("daemon") else "client"
        actions = [Action(start, f"stop_{process}", target, f"SIGSTOP {process} {who}"),
                   Action(start + held, f"cont_{process}", target, f"SIGCONT {process} {who}")]
        text = f"SIGSTOP {process} {who} for {held:.2f} s"
    elif kind == "client_kill":
        delay = rng.uniform(0.0, 1.0)
        actions = [Action(start, "kill_client", target, f"SIGKILL client {who}"),
                   Action(start + delay, "start_client", target, f"new client for {who}")]
        text = f"SIGKILL client {who}, a new one {delay:.2f} s later"
    elif kind in ("ring_garbage", "ipc_garbage"):
        length = rng.uniform(1.5, 4.0)
        port = "ring port" if kind == "ring_garbage" else "IPC socket"
        actions = [Action(start, f"flood_{kind.split('_')[0]}", target, f"garbage to {who}'s {port}"),
                   Action(start + length, "flood_stop", target, "garbage stops")]
        text = f"garbage to {who}'s {port} for {length:.2f} s"
    else:
        raise ValueError(f"unknown fault kind {kind!r}")
    return Episode(number, kind, target, method, text, actions)


class Flood(threading.Thread):
    """Bursts of garbage to one address until stopped."""

    def __init__(self, address, nodes, seed):
        super().__init__(daemon=True)
        self.address = address
        self.nodes = nodes
        self.rng = random.Random(seed)
        self.halt = threading.Event()
        self.sent = {}

    def run(self):
        while not self.halt.is_set():
            form = burst(self.address, self.rng, self.nodes)
            if form:
                self.sent[form] = self.sent.get(form, 0) + 1
            self.halt.wait(0.02)


class FaultRunner:
    """Does the actions to the ring and records when."""

    def __init__(self, ring, seed):
        self.ring = ring
        self.seed = seed
        self.events = []        # (time, text) of every action, in order
        self.killed_daemons = []  # (time, node) of every SIGKILL of a zringd
        self.flood = None
        self.garbage_sent = {}

    def run(self, action):
        # Stamped before it is done: nothing it causes can come earlier.
        action.done_at = time.monotonic()
        self.events.append((action.done_at, action.text))
        getattr(self, action.what)(action.target)

    def last_event_before(self, t):
        last = None
        for at, _ in self.events:
            if at <= t:
                last = at
        return last

    def kill_daemon(self, node):
        daemon = self.ring.daemons[node]
        daemon.signal(signal.SIGKILL)
        daemon.popen.wait()
        self.killed_daemons.append((time.monotonic(), node))

    def start_daemon(self, node):
        self.ring.start_daemon(node)

    def stop_zringd(self, node):
        self.ring.daemons[node].signal(signal.SIGSTOP)

    def cont_zringd(self, node):
        self.ring.daemons[node].signal(signal.SIGCONT)

    def kill_client(self, rank):
        client = self.ring.clients[rank]
        client.signal(signal.SIGKILL)
        client.popen.wait()

    def start_client(self, rank):
        self.ring.start_client(rank)

    def stop_client(self, rank):
        self.ring.clients[rank].signal(signal.SIGSTOP)

    def cont_client(self, rank):
        self.ring.clients[rank].signal(signal.SIGCONT)

    def _flood(self, address, node):
        self.flood = Flood(address, self.ring.nodes, self.seed + len(self.events))
        self.flood.start()

    def flood_ring(self, node):
        self._flood(f"tcp://127.0.0.1:{self.ring.ports[node]}", node)

    def flood_ipc(self, node):
        self._flood(self.ring.ipc(node), node)

    def flood_stop(self, node):
        if self.flood is not None:
            self.flood.halt.set()
            self.flood.join()
            for form, n in self.flood.sent.items():
                self.garbage_sent[form] = self.garbage_sent.get(form, 0) + n
            self.flood = None
