"""Compressed gradients on a real task: scikit-learn's handwritten digits.

    digits.py --zringd PATH [--steps N] [--methods LIST] [--out FILE.png]   (the launcher)
    digits.py --worker ...                                                  (one rank; internal)

The launcher starts a ring of 4 zringd on free loopback ports in a temporary
directory and 4 worker processes, one per daemon. Every worker trains the
same MLP (same initial weights) on its own quarter of the training set, and
zring.torch.DistributedOptimizer averages the gradients through the ring
every step, once per method, with the same seeds and steps. A single process
trained on the four workers' batches together (dense float32, no ring) is
the baseline. It prints a table (test accuracy, bytes each worker sent per
step, time per step) and plots test accuracy against bytes sent.
"""

import argparse
import hashlib
import json
import os
import signal
import sys
import tempfile
import time

import numpy as np

NODES = 4
BATCH = 32          # per worker and step; the baseline takes 4 x 32
HIDDEN = 256
LR = 0.05
MOMENTUM = 0.9
SEED = 2026
EVAL_EVERY = 20
DECAY_FROM = 0.75   # the learning rate drops tenfold for the last quarter of the steps
METHODS = "none,fp16,quant:8,quant:4,ef:topk:1%,topk:1%,ef:sign,sign"


# --- the task and the model (shared by the workers and the baseline) --------------

def prepare_data(path):
    """Digits 8x8 scaled to [0, 1]; 70 % train (in 4 shards), 30 % test."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=0,
                                                        stratify=y)
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


class Task:
    def __init__(self, path):
        import torch

        d = np.load(path)
        self.x_train = torch.from_numpy(d["x_train"])
        self.y_train = torch.from_numpy(d["y_train"]).long()
        self.x_test = torch.from_numpy(d["x_test"])
        self.y_test = torch.from_numpy(d["y_test"]).long()
        order = np.random.default_rng(SEED).permutation(len(self.y_train))
        self.shards = np.array_split(order, NODES)

    def sampler(self, rank):
        """rank's batches: indices into the training set, the same stream every run."""
        rng = np.random.default_rng(SEED + 1 + rank)
        shard = self.shards[rank]
        while True:
            yield shard[rng.integers(0, len(shard), BATCH)]

    def accuracy(self, model):
        import torch

        with torch.no_grad():
            return float((model(self.x_test).argmax(1) == self.y_test).float().mean())


def make_model():
    import torch

    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, 10))


def checksum(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()[:16]


def train(task, model, optimizer, batches, steps, traffic):
    """The training loop; returns (curve, seconds per step excluding evaluation)."""
    import torch

    curve, spent = [(0, 0, task.accuracy(model))], 0.0
    for step in range(1, steps + 1):
        if step == int(DECAY_FROM * steps) + 1:
            for group in optimizer.param_groups:
                group["lr"] = LR / 10
        started = time.perf_counter()
        idx = next(batches)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(task.x_train[idx]), task.y_train[idx]).backward()
        optimizer.step()
        spent += time.perf_counter() - started
        if step % EVAL_EVERY == 0 or step == steps:
            curve.append((step, traffic(), task.accuracy(model)))
    return curve, spent / steps


# --- one worker: every method in turn ----------------------------------------------

def worker(args):
    import torch

    import zring
    import zring.torch

    torch.set_num_threads(1)
    task = Task(args.data)
    for index, method in enumerate(args.methods.split(",")):
        model = make_model()
        ar = zring.CompressedAllReduce.connect(args.endpoint, method, timeout_ms=60000)
        optimizer = zring.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM),
            model.named_parameters(), allreduce=ar)
        curve, seconds = train(task, model, optimizer, task.sampler(ar.rank), args.steps,
                               lambda: ar.traffic.wire_bytes)
        t = ar.traffic
        row = {"method": method, "rank": ar.rank, "accuracy": curve[-1][2], "curve": curve,
               "wire_per_step": t.wire_bytes / t.ops, "dense_per_step": t.dense_bytes / t.ops,
               "ms_per_step": seconds * 1e3, "checksum": checksum(model)}
        ar.close()
        path = os.path.join(args.results, f"{index:02d}-rank{row['rank']}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(row, f)
        os.replace(path + ".tmp", path)
    return 0


# --- the baseline: one process, the four workers' batches together -----------------

def baseline(task, steps):
    import torch

    torch.set_num_threads(1)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    samplers = [task.sampler(r) for r in range(NODES)]
    batches = (np.concatenate([next(s) for s in samplers]) for _ in iter(int, 1))
    curve, seconds = train(task, model, optimizer, batches, steps, lambda: 0)
    return {"method": "baseline (1 process)", "accuracy": curve[-1][2], "curve": curve,
            "wire_per_step": 0.0, "ms_per_step": seconds * 1e3, "same": "-"}


# --- the launcher ------------------------------------------------------------------

class Stop(Exception):
    pass


def run_workers(args, ring, data, results, methods, processes):
    from zring.local_ring import spawn

    for node in range(NODES):
        processes.append(spawn(
            [sys.executable, os.path.abspath(__file__), "--worker", "--endpoint", ring.ipc(node),
             "--data", data, "--results", results, "--methods", ",".join(methods),
             "--steps", str(args.steps), "--seed", str(args.seed)],
            os.path.join(results, f"worker{node}.log"),
            dict(os.environ, OMP_NUM_THREADS="1")))
    rows = []
    for index, method in enumerate(methods):
        files = [os.path.join(results, f"{index:02d}-rank{r}.json") for r in range(NODES)]
        while not all(os.path.exists(f) for f in files):
            for node, p in enumerate(processes):
                if p.poll() not in (None, 0):
                    with open(os.path.join(results, f"worker{node}.log")) as f:
                        raise Stop(f"worker {node} failed during '{method}':\n{f.read()}")
            time.sleep(0.05)
        ranks = []
        for path in files:
            with open(path) as f:
                ranks.append(json.load(f))
        row = dict(ranks[0])
        row["same"] = "yes" if len({r["checksum"] for r in ranks}) == 1 else "NO"
        row["wire_per_step"] = sum(r["wire_per_step"] for r in ranks) / NODES
        row["ms_per_step"] = sum(r["ms_per_step"] for r in ranks) / NODES
        print_row(row, rows)
        rows.append(row)
    return rows


def print_row(row, previous):
    dense = next((r for r in previous if r["method"] == "none"), None)
    wire = row["wire_per_step"]
    ratio = f"1/{dense['wire_per_step'] / wire:.1f}" if dense and wire > 0 else "-"
    print(f"{row['method']:<22} {100 * row['accuracy']:8.2f}% {wire:12.0f} {ratio:>9} "
          f"{row['ms_per_step']:9.2f} {row['same']:>6}", flush=True)


def summary(rows, base):
    by = {r["method"]: r for r in rows}
    if "none" not in by:
        return
    dense = by["none"]
    print(f"\ndense (none): {100 * dense['accuracy']:.2f}%; baseline: {100 * base['accuracy']:.2f}%")
    for ef, plain in (("ef:topk:1%", "topk:1%"), ("ef:sign", "sign")):
        for m in (ef, plain):
            if m in by:
                r = by[m]
                gap = 100 * (r["accuracy"] - dense["accuracy"])
                print(f"  {m:<11} {gap:+6.2f} points vs dense at 1/{dense['wire_per_step'] / r['wire_per_step']:.1f}"
                      " of its bytes")


def plot(rows, base, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for r in rows:
        steps, sent, acc = zip(*r["curve"][1:])
        # Dashed: top-k and sign without error feedback.
        plain = r["method"] in ("sign",) or r["method"].startswith(("topk:", "randomk:"))
        ax.plot(np.array(sent) / 1e6, 100 * np.array(acc), label=r["method"],
                linestyle="--" if plain else "-", linewidth=1.5)
    ax.axhline(100 * base["accuracy"], color="grey", linestyle=":", label="baseline (1 process)")
    ax.set_xscale("log")
    ax.set_xlabel("MB sent per worker (cumulative)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(max(0, 100 * min(min(a for _, _, a in r["curve"][1:]) for r in rows) - 2), 100)
    ax.set_title(f"digits: {NODES} workers on a zring ring, test accuracy against bytes sent")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def launcher(args):
    from zring.local_ring import LocalRing, stop

    def on_term(signum, frame):
        raise Stop(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    methods = [m for m in args.methods.split(",") if m]
    processes, ring = [], None
    with tempfile.TemporaryDirectory(prefix="zring-digits-") as tmp:
        try:
            data = os.path.join(tmp, "digits.npz")
            prepare_data(data)
            task = Task(data)
            started = time.perf_counter()
            os.makedirs(os.path.join(tmp, "ring"))
            ring = LocalRing(args.zringd, NODES, directory=os.path.join(tmp, "ring"),
                             timeout_ms=10000)
            print(f"digits: {len(task.y_train)} training images in {NODES} shards, "
                  f"{len(task.y_test)} test images; MLP 64-{HIDDEN}-10 "
                  f"({sum(p.numel() for p in make_model().parameters())} parameters), "
                  f"SGD lr {LR} (/10 for the last quarter) momentum {MOMENTUM}, batch {BATCH} per worker, {args.steps} steps")
            print(f"ring: {NODES} zringd on 127.0.0.1 ports {ring.ports} (directory {tmp})\n")
            print(f"{'method':<22} {'accuracy':>9} {'bytes/step':>12} {'vs none':>9} "
                  f"{'ms/step':>9} {'same':>6}")
            base = baseline(task, args.steps)
            print_row(base, [])
            rows = run_workers(args, ring, data, tmp, methods, processes)
            summary(rows, base)
            plot(rows, base, args.out)
            print(f"\nplot: {os.path.abspath(args.out)}; {time.perf_counter() - started:.0f} s in all")
            print("bytes/step: what each worker's node put on the ring per step (mean over workers);"
                  " vs none: that against dense float32;\nms/step: a whole training step (forward,"
                  " backward, all-reduce, update); same: every worker ended with identical weights.")
            return 0
        except KeyboardInterrupt:
            print("\ninterrupted: stopping the workers and daemons", file=sys.stderr)
            return 130
        except Stop as e:
            print(f"\ndigits: {e}", file=sys.stderr)
            return 1
        finally:
            for p in processes:
                stop(p, grace_s=2.0)
            if ring is not None:
                ring.close()


def main():
    global SEED
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zringd", help="the zringd binary (run.sh passes the built one)")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--out", default="zring-digits.png", help="the plot (PNG)")
    parser.add_argument("--seed", type=int, default=SEED,
                        help="initial weights, data split into shards and batches")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    args = parser.parse_args()
    SEED = args.seed
    if args.worker:
        try:
            return worker(args)
        except KeyboardInterrupt:
            return 130
    if not args.zringd:
        parser.error("--zringd is required (examples/digits/run.sh passes it)")
    return launcher(args)


if __name__ == "__main__":
    sys.exit(main())
