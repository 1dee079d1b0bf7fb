#!/usr/bin/env python3
"""Chaos soak: a 4-node zring ring with training clients under random faults.

    PYTHONPATH=build/python /usr/bin/python3 tests/chaos/chaos_soak.py \\
        --zringd build/daemon/zringd --duration 180 --seed 1

Starts the zringd daemons on 127.0.0.1 and one client process per rank
(chaos_client.py), and drives them round by round, as a synchronous
training loop: every rank all-reduces the round's tensors (method, shapes
and client form drawn from the seed), the driver checks every answer
(checks.py) and goes on. Between rounds that must all be exact it injects
one fault at a time (faults.py): SIGKILL of a zringd and its restart,
SIGSTOP/SIGCONT of a zringd or a client (shorter and longer than
timeout_ms), SIGKILL of a client and a new one in its place, garbage on a
ring port or an IPC socket. After each fault's repair the ring must recover
(a round exact on every rank) within a bound. At the end every process must
exit when asked, and none may be left. It prints the counts and exits 1 on
any violation, each named with its round, rank and fault.

--loop free runs free-running training loops instead (free_loop.py), which
no driver holds in step. docs/testing.md describes all of it.
"""

import argparse
import atexit
import json
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checks  # noqa: E402
from checks import Aborted  # noqa: E402
from free_loop import FreeLoop  # noqa: E402
import faults  # noqa: E402
import procs  # noqa: E402
import workload  # noqa: E402
from report import print_report  # noqa: E402
from ring import Ring  # noqa: E402

from workload import APIS, SHAPE_WEIGHTS  # noqa: E402


class Interrupted(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(description="zring chaos soak: random faults against a live ring")
    p.add_argument("--zringd", required=True, help="the zringd executable")
    p.add_argument("--duration", type=float, default=180.0, help="seconds of faults (default 180)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--local-ranks", type=int, default=1, choices=(1, 2))
    p.add_argument("--timeout-ms", type=int, default=2000, help="the ring's timeout_ms")
    p.add_argument("--heartbeat-ms", type=int, default=200)
    p.add_argument("--client-timeout-ms", type=int, default=None,
                   help="the clients' ConnectOptions timeout (default: 4 x timeout_ms)")
    p.add_argument("--margin", type=float, default=2.0,
                   help="seconds past the deadline before a late error is a violation")
    p.add_argument("--faults", default=",".join(faults.KINDS), help="fault kinds to inject")
    p.add_argument("--methods", default=",".join(workload.METHODS))
    p.add_argument("--loop", choices=("lockstep", "free"), default="lockstep",
                   help="lockstep: the driver hands every rank each round; free: every client "
                        "runs its own loop, skipping failed steps (free_loop.py)")
    p.add_argument("--on-error", choices=("retry", "skip"), default="retry",
                   help="free loop: what a client does after a failed step")
    p.add_argument("--step-ms", type=float, default=10.0,
                   help="free loop: each client's pause between steps (its compute)")
    p.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
    args = p.parse_args(argv)
    args.client_timeout_ms = args.client_timeout_ms or 4 * args.timeout_ms
    args.faults = [k for k in args.faults.split(",") if k]
    args.methods = [m for m in args.methods.split(",") if m]
    for k in args.faults:
        if k not in faults.KINDS:
            p.error(f"unknown fault kind {k!r}; known: {', '.join(faults.KINDS)}")
    if ("daemon_stop_long" in args.faults and
            args.client_timeout_ms / 1000.0 <= faults.long_stop_s(args.timeout_ms, args.margin) + 0.5):
        p.error("daemon_stop_long stops a zringd for up to "
                f"{faults.long_stop_s(args.timeout_ms, args.margin):.1f} s: it needs a longer "
                "--client-timeout-ms (the clients must not give up meanwhile)")
    world = args.nodes * args.local_ranks
    if world & (world - 1):
        p.error("nodes x local ranks must be a power of two (exact averages)")
    return args


class Deck:
    """Draws every item once, in a seeded shuffled order, then again."""

    def __init__(self, items, rng):
        self.items, self.rng, self.left = list(items), rng, []

    def draw(self):
        if not self.left:
            self.left = self.items[:]
            self.rng.shuffle(self.left)
        return self.left.pop()


class Soak:
    def __init__(self, args):
        self.args = args
        # Faults and rounds draw from generators of their own, so the faults
        # (kinds, targets, timings) depend on the seed alone, not on how many
        # rounds the machine ran between them.
        self.rng = random.Random(args.seed)
        self.round_rng = random.Random(args.seed ^ 0x5EED)
        self.registry = procs.Registry()
        sweep_dead_runs()
        self.dir = tempfile.mkdtemp(prefix=f"zring-chaos-{os.getpid()}-")
        self.ring = Ring(self.registry, args.zringd, self.dir, args.nodes, args.local_ranks,
                         args.timeout_ms, args.heartbeat_ms, args.client_timeout_ms, args.seed)
        self.runner = faults.FaultRunner(self.ring, args.seed)
        self.deadline_s = args.timeout_ms / 1000.0 + 1.0
        self.client_deadline_s = args.client_timeout_ms / 1000.0 + 1.0
        self.hang_s = 3 * max(self.deadline_s, self.client_deadline_s) + 10.0
        self.recovery_s = max(30.0, 10 * self.deadline_s)
        self.tally = checks.Tally()
        self.checker = checks.RoundChecker(self.tally, self.ring.world_size, args.seed,
                                           self.deadline_s, self.client_deadline_s, args.margin)
        self.residuals = checks.Residuals(self.ring.world_size)
        self.round = 0
        self.last_clients = [None] * self.ring.world_size
        self.prev_sent_at = 0.0
        self.method = args.methods[0]
        self.elapsed = 0.0
        self.final_status = []
        self.left_behind = ""
        self.quiet_label = None
        self.free = None
        self.current = None  # the free loop's episode in progress

    # --- the loop ------------------------------------------------------------------

    def run(self):
        a = self.args
        print(f"chaos soak: run directory {self.dir}; seed {a.seed}; faults {', '.join(a.faults)}",
              flush=True)
        self.ring.start()
        for rank in range(self.ring.world_size):
            self.ring.start_client(rank)
        for method in a.methods:  # every method works before any fault
            self.method = method
            if not self.play_round(None):
                raise Aborted(self.tally.violation(f"{method}: the first round was not exact on every rank"))
        kinds, methods = Deck(a.faults, self.rng), Deck(a.methods, self.rng)
        began = time.monotonic()
        if a.loop == "free":
            self.run_free(kinds, began)
            return
        number = 0
        try:
            while time.monotonic() - began < a.duration and a.faults:
                number += 1
                self.method = methods.draw()
                episode = faults.plan(number, kinds.draw(), self.method, self.rng, self.ring, a.margin)
                self.play_episode(episode, began)
                for _ in range(self.rng.randint(2, 4)):  # quiet rounds: all must be exact
                    self.play_round(None, after=episode)
        finally:
            self.elapsed = time.monotonic() - began

    def run_free(self, kinds, began):
        methods = [m for m in self.args.methods if not workload.has_feedback(m)]
        self.free = FreeLoop(self, methods)
        self.free.start(self.round)
        number = 0
        try:
            while time.monotonic() - began < self.args.duration and self.args.faults:
                number += 1
                episode = faults.plan(number, kinds.draw(), "free", self.rng, self.ring, self.args.margin)
                self.current = episode
                self.free.play_episode(episode, began)
                self.current = None
                self.quiet_label = f"after {episode}"
                self.free.run_for(self.rng.uniform(1.0, 2.5))
        finally:
            self.elapsed = time.monotonic() - began
            self.free.stop(self.current)

    def play_episode(self, episode, began):
        for rank in range(self.ring.world_size):
            self.residuals.forget(rank)  # a fresh connection each: zero residuals
        stats = self.tally.faults[episode.kind]
        episode.begin(time.monotonic())
        print(f"[{time.monotonic() - began:6.1f} s] {episode} under {episode.method}", flush=True)
        while True:
            sent_at = time.monotonic()
            exact = self.play_round(episode)
            now = time.monotonic()
            if episode.finished and exact and sent_at >= episode.repaired_at:
                episode.recovered_after = now - episode.repaired_at
                stats["recovered"] += 1
                stats["worst_recovery_s"] = max(stats["worst_recovery_s"], episode.recovered_after)
                break
            if episode.finished and now - episode.repaired_at > self.recovery_s:
                raise Aborted(self.tally.violation(
                    f"{episode}: no round was exact on every rank within {self.recovery_s:.0f} s of "
                    f"the repair: the ring did not recover"))
        stats["mid_op"] += any(t0 <= episode.injected_at <= t1 for t0, t1 in episode.intervals)
        print(f"           recovered {episode.recovered_after:.2f} s after the repair", flush=True)

    def tick(self, episode):
        """Runs the fault actions that are due; notices processes that died."""
        if episode is not None:
            for action in episode.due(time.monotonic()):
                self.runner.run(action)
                if episode.injected_at is None:
                    episode.injected_at = action.done_at
                    self.tally.faults[episode.kind]["injected"] += 1
                if episode.finished:
                    episode.repaired_at = action.done_at
        for n, daemon in enumerate(self.ring.daemons):
            if not daemon.running() and not daemon.killed:
                daemon.killed = True
                self.tally.violation(f"zringd {self.ring.name(n)} exited by itself with status "
                                     f"{daemon.popen.returncode} ({episode or 'no fault'}); its log:\n"
                                     f"{daemon.log_tail()}")
                self.ring.start_daemon(n)

    def wait_clients(self, episode):
        """Until every rank has a ready client (new ones take a moment to start)."""
        since = time.monotonic()
        while True:
            self.tick(episode)
            waiting = False
            for rank, client in enumerate(self.ring.clients):
                if client.ready and client.running():
                    continue
                if client.killed and not client.running():
                    waiting = True  # its replacement is a fault action to come
                    continue
                ready, ended = self.ring.poll_ready(client)
                if ended and not ready:
                    self.tally.violation(f"client rank {rank} exited before it was ready "
                                         f"(status {client.popen.poll()}):\n{client.log_tail()}")
                    self.ring.start_client(rank)
                waiting = waiting or not ready
            if not waiting:
                return
            if time.monotonic() - since > 60:
                raise Aborted(self.tally.violation("a client was not ready within 60 s of its start"))
            time.sleep(0.02)

    def play_round(self, episode, after=None):
        """One round on every rank, checked; True when exact on every rank."""
        self.wait_clients(episode)
        r, self.round = self.round, self.round + 1
        feedback = workload.has_feedback(self.method)
        command = {"cmd": "round", "round": r, "method": self.method,
                   "shapes": self.round_rng.choices(list(SHAPE_WEIGHTS), list(SHAPE_WEIGHTS.values()))[0],
                   "api": self.round_rng.choice(APIS)}
        clients = list(self.ring.clients)
        for rank, client in enumerate(clients):
            if client is not self.last_clients[rank]:
                self.residuals.forget(rank)  # a new process: zringd reset its residuals
        self.last_clients = clients
        sent_at = time.monotonic()
        for rank, client in enumerate(clients):
            fresh = feedback and self.residuals.state[rank] is None
            client.send_line(json_line(dict(command, fresh=fresh)))
            if fresh:
                self.residuals.state[rank] = {}
        answers = self.collect(r, clients, episode, sent_at)
        # A zringd killed since the last round began (in it, or between the
        # two) may or may not have held this round's residuals.
        killed = {n for t, n in self.runner.killed_daemons if t >= self.prev_sent_at}
        self.prev_sent_at = sent_at
        ambiguous = {rank for rank in range(self.ring.world_size) if self.ring.node_of(rank) in killed}
        label = episode if episode is not None else (f"after {after}" if after else None)
        return self.checker.check(r, command, answers, episode, self.runner, self.residuals,
                                  ambiguous, label)

    def collect(self, r, clients, episode, sent_at):
        answers, pending = {}, set(range(len(clients)))
        while pending:
            self.tick(episode)
            fds = [clients[k].popen.stdout.fileno() for k in pending if not clients[k].popen.stdout.closed]
            select.select(fds, [], [], 0.02)
            for rank in sorted(pending):
                client = clients[rank]
                lines, ended = client.read_lines()
                for line in lines:
                    answer = json_load(line)
                    if answer.get("round") == r:
                        answers[rank] = answer
                if rank in answers:
                    pending.discard(rank)
                    continue
                if ended:
                    client.popen.wait()
                    pending.discard(rank)
                    answers[rank] = None
                    if not client.killed:
                        self.tally.violation(f"round {r}: client rank {rank} exited with status "
                                             f"{client.popen.returncode} without answering:\n{client.log_tail()}")
                        self.ring.start_client(rank)
                    continue
                last = self.runner.last_event_before(time.monotonic()) or sent_at
                if time.monotonic() - max(sent_at, last) > self.hang_s and not client.stopped:
                    self.tally.violation(f"round {r} ({episode or 'no fault'}): rank {rank} gave no answer "
                                         f"within {self.hang_s:.0f} s: a hang")
                    client.signal(signal.SIGKILL)
                    client.popen.wait()
                    self.ring.start_client(rank)
                    pending.discard(rank)
                    answers[rank] = None
        return answers

    # --- the end ---------------------------------------------------------------------

    def finish(self):
        """Stops everything, checking that each process goes when asked."""
        self.runner.flood_stop(None)
        for child in self.registry.children:
            if child.running() and child.stopped:
                child.signal(signal.SIGCONT)
        for client in self.ring.quit_clients(10.0):
            self.tally.violation(f"{client.name} did not exit within 10 s of quit")
        self.final_status = [self.ring.status(n) for n in range(self.ring.nodes)]
        for n, daemon in enumerate(self.ring.daemons):
            status, in_time = daemon.stop(5.0)
            if not in_time or status != 0:
                self.tally.violation(f"zringd {self.ring.name(n)} on SIGTERM: exit status {status}"
                                     f"{'' if in_time else ', not within 5 s (killed)'}; log:\n{daemon.log_tail()}")
        left = procs.processes_mentioning(self.dir)
        for pid, cmdline in left:
            self.tally.violation(f"process {pid} left behind: {cmdline}")
            os.kill(pid, signal.SIGKILL)
        files = leftover_files(self.dir)
        for path in files:
            self.tally.violation(f"file left behind: {path}")
        self.left_behind = "; ".join([f"pid {p}" for p, _ in left] + files)


KEPT = "KEPT"  # in a run directory kept on purpose (--keep, or a failure)


def sweep_dead_runs():
    """Removes what a soak that was killed outright (SIGKILL) left: its run
    directory and its daemons' shared buffers, named after its pid."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        parts = name.split("-")
        if not (name.startswith("zring-chaos-") and len(parts) >= 4 and parts[2].isdigit()):
            continue
        run_dir = os.path.join(tmp, name)
        if os.path.exists(f"/proc/{parts[2]}") or os.path.exists(os.path.join(run_dir, KEPT)):
            continue
        for path in leftover_files(run_dir):
            os.remove(path)
        shutil.rmtree(run_dir, ignore_errors=True)
        print(f"chaos soak: removed {run_dir}, left by a soak that is gone", flush=True)


def leftover_files(run_dir):
    """Shared buffers of the run's daemons still in /dev/shm or the run directory."""
    stem = "zring" + run_dir.replace("/", "_") + "_"
    out = [os.path.join("/dev/shm", f) for f in os.listdir("/dev/shm") if f.startswith(stem)]
    if os.path.isdir(run_dir):
        out += [os.path.join(run_dir, f) for f in os.listdir(run_dir) if ".shm." in f]
    return out


def json_line(obj):
    return json.dumps(obj)


def json_load(line):
    try:
        return json.loads(line)
    except ValueError:
        return {"unparsed": line}


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    soak = Soak(args)
    atexit.register(soak.registry.stop_all)

    def interrupt(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupt)
    status = 0
    try:
        try:
            soak.run()
        except Aborted:
            pass
        except workload.ToolError as e:
            print(f"chaos soak: its own assumption broke: {e}", file=sys.stderr)
            status = 2
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the cleanup finish
            soak.finish()
        print_report(soak)
    except Interrupted as e:
        print(f"chaos soak: interrupted ({e}); everything it started is stopped", file=sys.stderr)
        soak.registry.stop_all()
        return 130
    finally:
        soak.registry.stop_all()
        if args.keep or soak.tally.violations:
            with open(os.path.join(soak.dir, KEPT), "w") as f:
                f.write("kept on purpose: the next soak leaves this directory alone\n")
            print(f"chaos soak: logs kept in {soak.dir}")
        else:
            shutil.rmtree(soak.dir, ignore_errors=True)
    return status or (1 if soak.tally.violations else 0)


if __name__ == "__main__":
    sys.exit(main())
