"""Training that goes on when a node dies, and takes it back when it returns.

    elastic.py --zringd PATH [--steps N] [--method M] [--kill-at F] [--back-at F]   (the launcher)
    elastic.py --worker ...                                                        (one rank; internal)

The launcher starts a ring of 4 zringd on free loopback ports (timeout_ms
2000, min_nodes 3) and 4 workers, one per node, that train the MLP of
examples/digits (same initial weights, each node its own quarter of the
training set) for --steps steps. It runs twice: once undisturbed, once with
node n2's zringd and worker killed (SIGKILL) when worker 0 reaches
--kill-at x steps; a new worker starts at once (it waits for its zringd) and
a new zringd at --back-at x steps. Then it
prints the membership timeline and checks that every worker ended with the
same weights, and how far the disturbed run's accuracy is from the
undisturbed one's.

Each step is one all-reduce of the gradients plus a one-float flag, "sync".
A worker that must take the others' state (a worker that just started, or
one whose op failed, so its weights may be a step apart from the others')
submits zero gradients and sync = 1. When an op's sync is above 0 nobody
applies that step: every worker takes rank 0's weights, optimizer state and
step number (zring.torch.broadcast_state and CompressedAllReduce.broadcast)
and the step runs again. An op that meets a change of the ring runs again
on the new ring by itself (ring_change_retries); while n2 is gone each step
averages the three others. A worker whose ops keep failing for a minute
gives up (exit 1).

The digits MLP computes a step in about a millisecond; each step also waits
--step-ms (25 ms), standing in for the compute of a model worth a ring.
So that the returning node always finds the others still training, however
long its worker takes to import torch on a busy machine, the others wait at
the --back-at step until its zringd has been started again and the ring
has taken it in (the launcher says so with the file "go" in the results;
before that, "hold" names the step to wait at).
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "digits"))
import digits  # noqa: E402  (the task, the model, the checksum)

NODES = digits.NODES
VICTIM = 2
TIMEOUT_MS = 2000


# --- one worker --------------------------------------------------------------------

class Worker:
    def __init__(self, args):
        import torch

        import zring
        import zring.torch

        self.torch, self.zring, self.zring_torch = torch, zring, zring.torch
        self.args = args
        self.node = args.node
        self.task = digits.Task(args.data)
        self.model = digits.make_model()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=digits.LR,
                                         momentum=digits.MOMENTUM)
        self.events = open(os.path.join(args.results, f"events{self.node}.jsonl"), "a")
        self.ar = self.connect()
        self.world = self.ar.world_size
        self.event("connected", rank=self.ar.rank, world=self.world)

    def event(self, what, **fields):
        self.events.write(json.dumps(dict(t=time.time(), node=self.node, what=what, **fields)) + "\n")
        self.events.flush()

    def connect(self):
        """Connects as soon as this node's zringd is there (the launcher may start it later)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return self.zring.CompressedAllReduce.connect(
                    self.args.endpoint, self.args.method, timeout_ms=4 * TIMEOUT_MS,
                    ring_change_retries=3,
                    on_ring_change=lambda e: self.event("op ran again", why=e.message))
            except self.zring.Error as e:
                if e.kind != "connection_failed" or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def batch(self, step):
        shard = self.task.shards[self.node]
        rng = np.random.default_rng([digits.SEED, self.node, step])
        return shard[rng.integers(0, len(shard), digits.BATCH)]

    def lr_for(self, step):
        return digits.LR / 10 if step >= int(digits.DECAY_FROM * self.args.steps) else digits.LR

    def hold_at(self, step):
        """Waits at the launcher's hold step until it says go (the disturbed run)."""
        hold = os.path.join(self.args.results, "hold")
        go = os.path.join(self.args.results, "go")
        if os.path.exists(go) or not os.path.exists(hold):
            return
        with open(hold) as f:
            if step < int(f.read()):
                return
        while not os.path.exists(go):
            time.sleep(0.01)

    def take_state(self, step):
        """Every worker takes rank 0's model, optimizer and step; returns the step."""
        self.zring_torch.broadcast_state(self.ar, self.model, self.optimizer, root=0)
        at = np.array([float(step)], np.float32)
        self.ar.broadcast({"step": at}, 0)
        return int(at[0])

    def run(self):
        torch = self.torch
        params = [p for p in self.model.parameters()]
        names = [f"p{i}" for i in range(len(params))]
        for p in params:
            p.grad = torch.zeros_like(p)
        sync = np.zeros(1, np.float32)
        must_sync, step = self.args.joining, 0
        failing_since = None
        while step < self.args.steps:
            if failing_since is not None and time.monotonic() - failing_since > 60:
                self.event("gave up", step=step)
                raise SystemExit(f"worker {self.node}: every op failed for 60 s; giving up")
            with open(os.path.join(self.args.results, f"progress{self.node}"), "w") as f:
                f.write(str(step))
            self.hold_at(step)
            idx = self.batch(step)
            for p in params:
                p.grad.zero_()
            if not must_sync:
                loss = torch.nn.functional.cross_entropy(self.model(self.task.x_train[idx]),
                                                         self.task.y_train[idx])
                loss.backward()
                time.sleep(self.args.step_ms / 1000.0)
            sync[0] = 1.0 if must_sync else 0.0
            tensors = dict(zip(names, (p.grad for p in params)))
            tensors["sync"] = sync
            try:
                self.ar.all_reduce_in_place(tensors)
            except self.zring.Error as e:
                self.event("op failed", step=step, kind=e.kind, why=e.message)
                must_sync = True
                failing_since = failing_since or time.monotonic()
                continue
            failing_since = None
            if self.ar.world_size != self.world:
                self.world = self.ar.world_size
                self.event("ring", step=step, world=self.world, rank=self.ar.rank)
            if sync[0] > 0:
                try:
                    step = self.take_state(step)
                except self.zring.Error as e:
                    self.event("state not taken", step=step, kind=e.kind, why=e.message)
                    must_sync = True
                    continue
                self.event("state from rank 0", step=step, mine=must_sync)
                must_sync = False
                continue
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_for(step)
            self.optimizer.step()
            step += 1
        result = {"checksum": digits.checksum(self.model),
                  "accuracy": self.task.accuracy(self.model)}
        with open(os.path.join(self.args.results, f"result{self.node}.json"), "w") as f:
            json.dump(result, f)
        self.event("done", step=step, **result)
        self.ar.close()
        return 0


# --- the launcher ------------------------------------------------------------------

class Stop(Exception):
    pass


def read_progress(results, node):
    try:
        with open(os.path.join(results, f"progress{node}")) as f:
            return int(f.read() or 0)
    except (OSError, ValueError):
        return 0


def tail(path, lines=12):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"({e})\n"


def what_went_wrong(results, ring, node):
    """A failed worker's log, its last events and its zringd's last lines."""
    return (tail(os.path.join(results, f"worker{node}.log"))
            + f"its last events:\n{tail(os.path.join(results, f'events{node}.jsonl'))}"
            + f"its zringd's last lines:\n{tail(ring.log_path(node), 20)}")


def wait_ready(results, node, process):
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(results, f"ready{node}")):
        if process.poll() is not None or time.monotonic() > deadline:
            with open(os.path.join(results, f"worker{node}.log")) as f:
                raise Stop(f"worker {node} did not get ready:\n{f.read()}")
        time.sleep(0.05)


def start_worker(args, ring, data, results, node, joining):
    from zring.local_ring import spawn

    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--node", str(node),
            "--endpoint", ring.ipc(node), "--data", data, "--results", results,
            "--steps", str(args.steps), "--method", args.method, "--step-ms", str(args.step_ms)]
    if joining:
        argv.append("--joining")
    return spawn(argv, os.path.join(results, f"worker{node}.log"),
                 dict(os.environ, OMP_NUM_THREADS="1"))


def one_run(args, data, results, disturb):
    from zring.local_ring import LocalRing, stop

    os.makedirs(results)
    timeline = []
    started = time.time()

    def note(what):
        timeline.append((time.time() - started, "launcher", what))
        print(f"  {time.time() - started:6.1f} s  {what}", flush=True)

    os.makedirs(os.path.join(results, "ring"))
    ring = LocalRing(args.zringd, NODES, timeout_ms=TIMEOUT_MS, heartbeat_ms=200, start=False,
                     directory=os.path.join(results, "ring"))
    workers = {}
    try:
        ring.start()
        for node in range(NODES):
            workers[node] = start_worker(args, ring, data, results, node, False)
        killed = back = False
        while not all(os.path.exists(os.path.join(results, f"result{n}.json"))
                      for n in range(NODES)):
            for node, p in workers.items():
                if p.poll() not in (None, 0):
                    raise Stop(f"worker {node} exited with {p.poll()}:\n"
                               + what_went_wrong(results, ring, node))
            step = read_progress(results, 0)
            if disturb and not killed and step >= args.kill_at * args.steps:
                ring.daemons[VICTIM].send_signal(signal.SIGKILL)
                workers[VICTIM].send_signal(signal.SIGKILL)
                ring.daemons[VICTIM].wait()
                workers[VICTIM].wait()
                killed = True
                note(f"step {step}: killed {ring.name(VICTIM)} (its zringd and its worker)")
                # The others wait at --back-at until the node is back (Worker.hold_at).
                with open(os.path.join(results, "hold.tmp"), "w") as f:
                    f.write(str(int(args.back_at * args.steps)))
                os.replace(os.path.join(results, "hold.tmp"), os.path.join(results, "hold"))
                # Its next worker starts now (torch takes seconds to import) and
                # waits for its zringd, started at --back-at: the ring takes the
                # node in, and the worker's first op comes at once, not after
                # the others waited for it.
                os.remove(os.path.join(results, f"ready{VICTIM}"))
                workers[VICTIM] = start_worker(args, ring, data, results, VICTIM, True)
            if disturb and killed and not back and step >= args.back_at * args.steps:
                wait_ready(results, VICTIM, workers[VICTIM])
                ring.start_node(VICTIM)
                note(f"step {step}: started {ring.name(VICTIM)}'s zringd again (a new worker waits for it)")
                # The others go on only once the ring has taken the node in,
                # so they cannot finish before it is back: a coordinator may
                # pass a slow starter over for 10 x timeout_ms, longer than
                # the steps that are left take.
                try:
                    ring.wait_members(NODES, timeout_s=30 * TIMEOUT_MS / 1000)
                except RuntimeError as e:
                    raise Stop(f"{ring.name(VICTIM)} was not taken in again: {e}")
                open(os.path.join(results, "go"), "w").close()
                back = True
                note(f"{ring.name(VICTIM)} is in the ring again; the others go on")
            time.sleep(0.05)
    finally:
        for p in workers.values():
            stop(p)
        ring.close()
    for node in range(NODES):
        with open(os.path.join(results, f"events{node}.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e["what"] in ("connected", "done"):
                    continue
                fields = {k: v for k, v in e.items() if k not in ("t", "node", "what")}
                timeline.append((e["t"] - started, f"worker {node}", f"{e['what']} {fields}"))
    rows = []
    for node in range(NODES):
        with open(os.path.join(results, f"result{node}.json")) as f:
            rows.append(json.load(f))
    return sorted(timeline), rows


def launcher(args):
    out = tempfile.mkdtemp(prefix="zring-elastic-")
    data = os.path.join(out, "digits.npz")
    digits.prepare_data(data)
    print(f"4 workers, {args.steps} steps, method {args.method}; files in {out}")
    print("undisturbed run:")
    _, calm = one_run(args, data, os.path.join(out, "undisturbed"), False)
    print(f"disturbed run (n{VICTIM} killed at {args.kill_at:.0%} of the steps, "
          f"back at {args.back_at:.0%}):")
    timeline, rough = one_run(args, data, os.path.join(out, "disturbed"), True)
    print("\nmembership timeline of the disturbed run:")
    for t, who, what in timeline:
        print(f"  {t:6.1f} s  {who:<9} {what}")
    calm_acc, rough_acc = calm[0]["accuracy"], rough[0]["accuracy"]
    same = len({r["checksum"] for r in rough}) == 1
    print(f"\naccuracy: undisturbed {100 * calm_acc:.2f}%, disturbed {100 * rough_acc:.2f}% "
          f"({100 * (rough_acc - calm_acc):+.2f} points)")
    print("weights of the 4 workers at the end: " + ("identical" if same else "DIFFERENT") +
          f" ({', '.join(r['checksum'] for r in rough)})")
    if not same or len({r["checksum"] for r in calm}) != 1:
        return 1
    return 0 if abs(rough_acc - calm_acc) <= args.tolerance else 2


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zringd")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--method", default="none")
    p.add_argument("--step-ms", type=float, default=25.0,
                   help="each step also waits this long (a larger model's compute)")
    p.add_argument("--kill-at", type=float, default=0.3, help="fraction of the steps")
    p.add_argument("--back-at", type=float, default=0.6, help="fraction of the steps")
    p.add_argument("--tolerance", type=float, default=0.005,
                   help="largest accuracy difference to the undisturbed run (exit 2 beyond)")
    p.add_argument("--worker", action="store_true")
    p.add_argument("--joining", action="store_true")
    p.add_argument("--node", type=int)
    p.add_argument("--endpoint")
    p.add_argument("--data")
    p.add_argument("--results")
    args = p.parse_args()
    if args.worker:
        import torch

        import zring.torch  # noqa: F401  (imported before it says it is ready)

        torch.set_num_threads(1)
        open(os.path.join(args.results, f"ready{args.node}"), "w").close()
        return Worker(args).run()
    if not args.zringd:
        p.error("--zringd is required")
    try:
        return launcher(args)
    except Stop as e:
        print(f"elastic.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
