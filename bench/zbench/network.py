"""Where the ranks talk: loopback, or an emulated network of namespaces.

Loopback: every process in the driver's own network namespace, on 127.0.0.1.

Emulated (--netns): one network namespace per node, each with one veth link
to a bridge in a hub namespace: a switch with one port per node. Both ends
of each link are shaped with `tc qdisc ... tbf rate RATE`, so a node sends at
most RATE and receives at most RATE (full duplex), and the link has the
given MTU. The bridge has an address too (HUB_HOST), so a launcher run in
the hub namespace (mpirun) can reach every node. Only namespaces and links the driver creates are touched; all of
them are deleted on exit, also on failure or Ctrl-C, and a later run deletes
what a killed run left behind (names carry the driver's pid).
"""

import os
import re
import signal
import subprocess
import sys

from zbench import procs

PREFIX = "zrbench-"
SUBNET = "10.213.0"
HUB_HOST = f"{SUBNET}.254"


def _run(argv):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {done.stdout.strip()}")
    return done.stdout


def parse_rate(text):
    """'1gbit', '100mbit', '2.5gbit' -> bits per second; 'none' -> None."""
    if text in ("none", "off", ""):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", text.lower())
    if not m:
        raise ValueError(f"rate '{text}' is not like 1gbit, 100mbit or none")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


class Loopback:
    """Every node on 127.0.0.1 in the driver's namespace."""

    name = "loopback"
    rate_bps = None
    mtu = None

    def __init__(self, nodes):
        self.nodes = nodes

    def host(self, node):
        return "127.0.0.1"

    def wrap(self, node, argv):
        return list(argv)

    def wrap_hub(self, argv):
        return list(argv)

    def describe(self):
        return "loopback (127.0.0.1)"

    def close(self):
        pass


class Namespaces:
    """One namespace per node behind a shaped veth link to a shared bridge."""

    def __init__(self, nodes, rate="1gbit", mtu=1500):
        self.nodes = nodes
        self.rate = rate
        self.rate_bps = parse_rate(rate)
        self.mtu = mtu
        self.tag = f"{PREFIX}{os.getpid()}-"
        self.hub = f"{self.tag}hub"
        self.created = []
        self.name = "netns-" + (rate if self.rate_bps else "unshaped") + f"-mtu{mtu}"
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def ns(self, node):
        return f"{self.tag}n{node}"

    def host(self, node):
        return f"{SUBNET}.{node + 1}"

    def wrap(self, node, argv):
        return ["ip", "netns", "exec", self.ns(node)] + list(argv)

    def wrap_hub(self, argv):
        """Runs argv in the hub namespace (the switch), reachable from every
        node at HUB_HOST: where mpirun runs, so its ranks can reach it."""
        return ["ip", "netns", "exec", self.hub] + list(argv)

    def describe(self):
        shaping = f"tbf rate {self.rate} each way" if self.rate_bps else "no shaping"
        return f"{self.nodes} network namespaces, veth to a bridge, MTU {self.mtu}, {shaping}"

    def _add_ns(self, name):
        _run(["ip", "netns", "add", name])
        self.created.append(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _shape(self, ns, dev):
        if self.rate_bps is None:
            return
        # burst must hold a whole (GSO) packet; 256 KiB is 2 ms at 1 Gbit/s.
        _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate,
              "burst", "256kb", "latency", "50ms"])

    def _build(self):
        hub = self.hub
        self._add_ns(hub)
        _run(["ip", "-n", hub, "link", "add", "br0", "type", "bridge"])
        _run(["ip", "-n", hub, "addr", "add", f"{HUB_HOST}/24", "dev", "br0"])
        _run(["ip", "-n", hub, "link", "set", "br0", "mtu", str(self.mtu), "up"])
        for node in range(self.nodes):
            ns = self.ns(node)
            self._add_ns(ns)
            port = f"p{node}"
            _run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth",
                  "peer", "name", port, "netns", hub])
            for where, dev in ((ns, "eth0"), (hub, port)):
                _run(["ip", "-n", where, "link", "set", dev, "mtu", str(self.mtu)])
            _run(["ip", "-n", hub, "link", "set", port, "master", "br0"])
            _run(["ip", "-n", hub, "link", "set", port, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.host(node)}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            self._shape(ns, "eth0")
            self._shape(hub, port)

    def close(self):
        for name in reversed(self.created):
            subprocess.run(["ip", "netns", "del", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        self.created = []


def remove_stale():
    """Deletes namespaces a killed earlier run of the driver left behind.

    Only names of the form zrbench-PID-... whose PID is no longer running.
    Returns the names deleted.
    """
    try:
        listing = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout
    except FileNotFoundError:
        return []
    removed = []
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)-\w+", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        subprocess.run(["ip", "netns", "del", name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        removed.append(name)
    return removed


def run_driver(bench, netns):
    """How both drivers run: the namespaces a killed earlier run left go
    first (with --netns, as root); SIGTERM, SIGHUP and SIGINT (also when it
    was ignored, as in a background job) end the run through
    KeyboardInterrupt, so every namespace and process is cleaned up. Returns
    the exit status: 0, 130 when interrupted, 1 when bench.run() raised
    procs.Failed."""
    if netns and os.geteuid() == 0:
        stale = remove_stale()
        if stale:
            print(f"removed namespaces a killed earlier run left: {', '.join(stale)}")

    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, stop)
    try:
        bench.run()
    except KeyboardInterrupt:
        print(f"\ninterrupted; partial results in {bench.out}", file=sys.stderr)
        return 130
    except procs.Failed as e:
        print(f"\nFAILED: {e}\npartial results in {bench.out}", file=sys.stderr)
        return 1
    return 0
