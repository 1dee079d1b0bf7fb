"""How each implementation runs: one process per rank, timings per rank.

Every runner writes rank-R.csv files (see bench/allreduce/harness.hpp) into
a directory and returns it; the clients stop on their own when the plan is
done. zring also needs its daemons: `ZringRing` starts one zringd per node
from a config it writes, and is kept up for every method of a series.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

from . import procs


class Binaries:
    """Where the build put the programs (bench/run.sh builds them)."""

    def __init__(self, build_dir):
        self.build_dir = build_dir
        self.zringd = os.path.join(build_dir, "daemon", "zringd")
        self.zringctl = os.path.join(build_dir, "tools", "zringctl")
        self.zring_client = os.path.join(build_dir, "bench", "zring_allreduce_client")
        self.gloo_client = os.path.join(build_dir, "bench", "gloo_allreduce_client")
        self.mpi_client = os.path.join(build_dir, "bench", "mpi_allreduce_client")

    def missing_for_zring(self):
        return [p for p in (self.zringd, self.zringctl, self.zring_client) if not os.access(p, os.X_OK)]

    def gloo_unavailable(self):
        if not os.access(self.gloo_client, os.X_OK):
            return "not built (libgloo-dev was missing when the build was configured)"
        return None

    def mpi_unavailable(self):
        if not os.access(self.mpi_client, os.X_OK):
            return "not built (libopenmpi-dev was missing when the build was configured)"
        if not _which("mpirun"):
            return "mpirun not found (apt-get install openmpi-bin)"
        return None


def _which(name):
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def _free_ports(count):
    """Ports on 127.0.0.1 nothing listens on now (asked of the kernel)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _thread_cpu(pid):
    """(name, CPU seconds) of every thread of pid: user + system time."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = []
    task = f"/proc/{pid}/task"
    for tid in os.listdir(task) if os.path.isdir(task) else []:
        try:
            with open(f"{task}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{task}/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # a thread that ended meanwhile
            continue
        out.append((name, (int(fields[11]) + int(fields[12])) / ticks))
    return out


def client_peak_memory(directory, ranks):
    """Per size, the largest peak resident size of the ranks' clients
    (their rank-R.csv.rss files), in bytes."""
    peaks = {}
    for r in range(ranks):
        path = os.path.join(directory, f"rank-{r}.csv.rss")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                size, peak = (int(x) for x in line.split())
                peaks[size] = max(peaks.get(size, 0), peak)
    return peaks


# Every rank's allocator (--malloc of both benchmarks). glibc hands blocks
# from 128 KiB up (growing with the largest freed, up to 32 MiB) back to the
# kernel when freed: a fresh result or gradient larger than that is a fresh
# mapping every op or step, whose pages the kernel faults in and zeroes
# again. "keep" makes every rank's malloc keep freed memory, as jemalloc or
# tcmalloc would.
MALLOC_ENV = {
    "keep": {"MALLOC_MMAP_THRESHOLD_": str(1 << 30), "MALLOC_TRIM_THRESHOLD_": str(1 << 31)},
    "system": {},
}


class Series:
    """One rank count on one network: what every runner needs."""

    def __init__(self, bins, net, nodes, local_ranks, work_dir, plan, timeout, rank_env=None):
        self.bins = bins
        self.net = net
        self.nodes = nodes
        self.local_ranks = local_ranks
        self.work_dir = work_dir
        self.plan = plan          # BYTES:WARMUP:ITERS,...
        self.timeout = timeout    # seconds for one implementation/method to finish
        self.rank_env = rank_env or {}  # added to every rank's environment (MALLOC_ENV)

    @property
    def ranks(self):
        return self.nodes * self.local_ranks

    def node_of(self, rank):
        return rank // self.local_ranks

    def out_dir(self, name):
        d = os.path.join(self.work_dir, name)
        os.makedirs(d, exist_ok=True)
        return d


def spread_cpu(n):
    """The n-th (mod their count) of the CPUs this process may use."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[n % len(cpus)]


# The benchmarks' --busy-poll-us (ZringRing's busy_poll_us).
BUSY_POLL_HELP = ("zringd busy_poll_us (default: zringd's, 200; 0: the ring thread sleeps at "
                  "once when it waits)")


class ZringRing:
    """One zringd per node, from a ring config written into the work dir."""

    def __init__(self, series, largest_bytes, chunk_bytes=None, gather_bytes=None,
                 direct_bytes=None, tcp_data=None, tcp_congestion=None, spread_cpus=False,
                 busy_poll_us=None):
        self.s = series
        self.spread_cpus = spread_cpus
        self.dir = series.out_dir("zringd")
        # Unix socket paths must stay short (< 100 bytes): sockets go to /tmp.
        self.sock_dir = tempfile.mkdtemp(prefix="zrbench-ipc-")
        self.group = procs.Group()
        in_netns = series.net.name != "loopback"
        ports = [7101] * series.nodes if in_netns else _free_ports(series.nodes)
        lines = ["nodes:"]
        for n in range(series.nodes):
            lines.append(f"  - {{name: n{n}, address: 'tcp://{series.net.host(n)}:{ports[n]}', "
                         f"ipc: '{self.ipc(n)}'}}")
        lines += [f"local_ranks: {series.local_ranks}",
                  "timeout_ms: 60000",
                  "heartbeat_ms: 500",
                  # The IPC values frame holds a whole op: room for the largest.
                  f"max_message_bytes: {max(256 << 20, largest_bytes + (1 << 20))}",
                  "log_level: info"]
        if chunk_bytes:
            lines.append(f"chunk_bytes: {chunk_bytes}")
        if gather_bytes is not None:
            lines.append(f"gather_bytes: {gather_bytes}")
        if direct_bytes is not None:
            lines.append(f"direct_bytes: {direct_bytes}")
        if busy_poll_us is not None:
            lines.append(f"busy_poll_us: {busy_poll_us}")
        if tcp_data is not None:
            lines.append(f"tcp_data: {'true' if tcp_data == 'on' else 'false'}")
        if tcp_congestion is not None:
            lines.append(f"tcp_congestion: {tcp_congestion}")
        self.config = os.path.join(self.dir, "ring.yaml")
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")

    def ipc(self, node):
        return f"ipc://{self.sock_dir}/n{node}.sock"

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.group.stop()
        shutil.rmtree(self.sock_dir, ignore_errors=True)

    def _start(self):
        for n in range(self.s.nodes):
            sock = self.ipc(n)[len("ipc://"):]
            if os.path.exists(sock):
                os.unlink(sock)
            argv = [self.s.bins.zringd, "--config", self.config, "--node", f"n{n}"]
            if self.spread_cpus:  # every thread of node n's zringd on one CPU
                argv = ["taskset", "-c", str(spread_cpu(n))] + argv
            argv = self.s.net.wrap(n, argv)
            self.group.spawn(f"zringd n{n}", argv, os.path.join(self.dir, f"n{n}.log"),
                             append=True)
        self._wait_up(60.0)

    def dead(self):
        """Why the ring cannot serve: the daemons that exited, or ''."""
        gone = [d for d in self.group.children if not d.running()]
        return "; ".join(f"{d.name} exited with status {d.popen.returncode}: "
                         f"{d.log_tail(3) or '(no log)'}" for d in gone)

    def ensure_up(self):
        """Restarts the whole ring when a daemon has died (something outside
        may kill it). Returns what was wrong, or '' when all was well."""
        why = self.dead()
        if why:
            self.group.stop()
            self._start()
        return why

    def _wait_up(self, timeout):
        deadline = time.monotonic() + timeout
        for n, daemon in enumerate(self.group.children):
            while True:
                if not daemon.running():
                    raise procs.Failed(f"{daemon.name} exited:\n{daemon.log_tail()}")
                if os.path.exists(self.ipc(n)[len("ipc://"):]):
                    status = subprocess.run(
                        [self.s.bins.zringctl, "status", "--endpoint", self.ipc(n), "--json"],
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
                    if '"ring_up":true' in status:
                        break
                if time.monotonic() > deadline:
                    raise procs.Failed(f"the zring ring is not up after {timeout:.0f} s; "
                                       f"{daemon.name} says:\n{daemon.log_tail()}")
                time.sleep(0.1)

    def restart(self):
        """Fresh daemons: nothing an earlier op left (buffers, heap) counts."""
        self.group.stop()
        self.group = procs.Group()
        self._start()

    def trace(self, path):
        """Every daemon's timeline of its last ops, as one Chrome trace file."""
        argv = [self.s.bins.zringctl, "trace", "--out", path]
        for n in range(self.s.nodes):
            argv += ["--endpoint", self.ipc(n)]
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise procs.Failed(f"zringctl trace: {done.stdout.strip()}")

    def peak_memory(self):
        """The largest VmHWM of the daemons, in bytes."""
        return max(_vm_hwm(d.popen.pid) for d in self.group.children)

    def cpu(self):
        """CPU seconds so far of the daemons' ring threads and of their other
        threads (summed over the nodes), and node 0's ops done."""
        ring = other = 0.0
        for d in self.group.children:
            for thread, seconds in _thread_cpu(d.popen.pid):
                if thread == "zringd-ring":
                    ring += seconds
                else:
                    other += seconds
        status = subprocess.run(
            [self.s.bins.zringctl, "status", "--endpoint", self.ipc(0), "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        ops = json.loads(status).get("ops_done", 0) if status.strip() else 0
        return ring, other, ops

    def run_method(self, method, name, layout="flat", api="shared"):
        """All ranks run the plan with `method`; returns the timings directory.
        Raises Failed when a client fails or a daemon dies meanwhile."""
        out = self.s.out_dir(name)
        clients = procs.Group()
        try:
            for r in range(self.s.ranks):
                node = self.s.node_of(r)
                argv = self.s.net.wrap(node, [
                    self.s.bins.zring_client, "--endpoint", self.ipc(node), "--method", method,
                    "--rank", str(r), "--local-rank", str(r % self.s.local_ranks),
                    "--plan", self.s.plan, "--out", os.path.join(out, f"rank-{r}.csv"),
                    "--api", api, "--layout", layout])
                clients.spawn(f"zring client rank {r}", argv, os.path.join(out, f"rank-{r}.log"),
                              self.s.rank_env)
            clients.wait(self.s.timeout, also_alive=self.group.children)
        except procs.Failed as e:
            why = self.dead()
            raise procs.Failed(f"{e}\nzringd: {why}" if why else str(e))
        finally:
            clients.stop()
        return out


def run_gloo(series, name="gloo", algorithm="ring_chunked"):
    """Gloo over its TCP transport, FileStore rendezvous: AllreduceRingChunked
    (ring_chunked) or gloo::allreduce (allreduce, what torch.distributed calls)."""
    out = series.out_dir(name)
    store = os.path.join(out, "store")
    # Gloo's FileStore refuses keys a previous run into the same --out left.
    shutil.rmtree(store, ignore_errors=True)
    os.makedirs(store)
    group = procs.Group()
    try:
        for r in range(series.ranks):
            node = series.node_of(r)
            argv = series.net.wrap(node, [
                series.bins.gloo_client, "--rank", str(r), "--size", str(series.ranks),
                "--store", store, "--host", series.net.host(node), "--algorithm", algorithm,
                "--plan", series.plan,
                "--out", os.path.join(out, f"rank-{r}.csv")])
            group.spawn(f"gloo rank {r}", argv, os.path.join(out, f"rank-{r}.log"),
                        series.rank_env)
        group.wait(series.timeout)
    finally:
        group.stop()
    return out


def mpi_version():
    try:
        text = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True).stdout
        return text.splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown"


def run_mpi(series, name="mpi"):
    """mpirun -np N over the TCP BTL only (--mca btl tcp,self)."""
    out = series.out_dir(name)
    argv = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    client = [series.bins.mpi_client, "--plan", series.plan, "--out-dir", out]
    env = {}
    if series.net.name == "loopback":
        # Open MPI leaves loopback out of the TCP BTL by default; all ranks are here.
        argv += ["--mca", "btl_tcp_if_include", "lo", "-np", str(series.ranks)] + client
    else:
        # mpirun runs in the hub namespace and each rank in its node's. The
        # ranks reach mpirun's PMIx server over the bridge (PMIx talks TCP,
        # by default on loopback only); the data goes over eth0, the shaped link.
        env = {"PMIX_MCA_ptl_tcp_remote_connections": "1", "PMIX_MCA_ptl_tcp_if_include": "br0"}
        argv = series.net.wrap_hub(argv + ["--mca", "btl_tcp_if_include", "eth0"])
        for r in range(series.ranks):
            argv += (["-np", "1"] + series.net.wrap(series.node_of(r), client) +
                     ([":"] if r + 1 < series.ranks else []))
    env.update(series.rank_env)  # mpirun's ranks inherit its environment
    group = procs.Group()
    try:
        group.spawn("mpirun", argv, os.path.join(out, "mpirun.log"), env)
        group.wait(series.timeout)
    finally:
        group.stop()
    return out
