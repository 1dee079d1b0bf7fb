#!/usr/bin/python3
"""What error-feedback top-k learns in exact arithmetic, without zring.

    ef_reference.py [--steps 300] [--ranks 4] [--methods none,ef:topk:1%] [--every 25]
                    [--warmup 0] [--model mlp|embedding] [--lr 0.01] [--out FILE.csv]

The DDP task of torch_bench.py (zbench/torch_task.py: the same model, seed,
per-rank batches, held-out set and SGD with momentum 0.9), trained in one
process: each step computes every rank's gradient on its batch with the one
shared model (data-parallel replicas stay identical, so this is exactly what
DDP computes) and averages them as the method says:

- none: the mean of the ranks' gradients (DDP over gloo, up to rounding).
- ef:topk:P%: per rank and per parameter tensor, c = g + residual, send the
  P% of c largest in magnitude (exact top-k), keep residual = c - sent; the
  step uses the mean of what the ranks sent. zring's ef:topk:P% does the
  same per tensor (its top-k is exact too, k = round(P% of the tensor), at
  least 1; only ties may pick other positions).
- dgc:topk:P%: DGC's momentum correction (Lin et al., ICLR 2018): momentum is
  accumulated per rank before the selection, the sent positions of both
  accumulators are cleared, and the step is plain SGD on the mean.

--warmup N averages the first N steps densely (a warm start, as torch's
PowerSGD hook's start_powerSGD_iter). Every --every steps it prints the
trailing training accuracy (the global batch, as torch_bench.py's curves)
and the held-out accuracy, so a torch_bench.py run of zring's hook can be
compared with what its method learns when nothing but the method differs.
On demand only; CPU, a few minutes per method (--ranks backward passes a
step on one thread).
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from zbench.torch_task import make_task  # noqa: E402

MOMENTUM = 0.9


def parse_method(text):
    """('none', 0) or (kind, fraction) for ef:topk:P% and dgc:topk:P%."""
    if text == "none":
        return "none", 0.0
    kind, _, rest = text.partition(":topk:")
    if kind not in ("ef", "dgc") or not rest.endswith("%"):
        raise SystemExit(f"ef_reference.py: unknown method '{text}' "
                         "(none, ef:topk:P% or dgc:topk:P%)")
    fraction = float(rest[:-1]) / 100
    if not 0 < fraction <= 1:
        raise SystemExit(f"ef_reference.py: '{text}': P must be in (0, 100]")
    return kind, fraction


def top_k(x, fraction):
    """x with all but its round(fraction * numel) (at least 1) largest magnitudes zeroed."""
    flat = x.flatten()
    k = max(1, int(round(flat.numel() * fraction)))
    idx = flat.abs().topk(k, sorted=False).indices
    out = torch.zeros_like(flat)
    out[idx] = flat[idx]
    return out.view_as(x)


class Averager:
    """One method's averaging of the ranks' gradients, with its per-rank state."""

    def __init__(self, method, params, ranks):
        self.kind, self.fraction = parse_method(method)
        zeros = lambda: [[torch.zeros_like(p) for p in params] for _ in range(ranks)]  # noqa: E731
        self.residual = zeros() if self.kind != "none" else None
        self.velocity = zeros() if self.kind == "dgc" else None

    def sent(self, rank, j, g, dense):
        if dense or self.kind == "none":
            return g.clone()
        if self.kind == "ef":
            c = g + self.residual[rank][j]
            s = top_k(c, self.fraction)
            self.residual[rank][j] = c - s
            return s
        u, v = self.velocity[rank][j], self.residual[rank][j]
        u.mul_(MOMENTUM).add_(g)
        v.add_(u)
        s = top_k(v, self.fraction)
        picked = s != 0
        v[picked] = 0
        u[picked] = 0
        return s

    def momentum_in_optimizer(self, dense):
        return dense or self.kind != "dgc"


def held_out_accuracy(model, x, y, chunk=256):
    with torch.no_grad():
        right = sum(int((model(x[i:i + chunk]).argmax(1) == y[i:i + chunk]).sum())
                    for i in range(0, len(x), chunk))
    return right / len(x)


def train(cfg, method, report):
    task = make_task(cfg)
    model = task.model()
    params = list(model.parameters())
    shards = [task.shard(r, cfg["steps"], cfg["batch"]) for r in range(cfg["ranks"])]
    hx, hy = task.held_out(cfg["held_out"])
    averager = Averager(method, params, cfg["ranks"])
    momentum = [torch.zeros_like(p) for p in params]
    accuracy = []
    for step in range(cfg["steps"]):
        dense = step < cfg["warmup"]
        sums = [torch.zeros_like(p) for p in params]
        right = 0
        for rank, (xs, ys) in enumerate(shards):
            model.zero_grad()
            out = model(xs[step])
            torch.nn.functional.cross_entropy(out, ys[step]).backward()
            right += int((out.detach().argmax(1) == ys[step]).sum())
            for j, p in enumerate(params):
                sums[j] += averager.sent(rank, j, p.grad.detach(), dense)
        with torch.no_grad():
            for j, p in enumerate(params):
                update = sums[j] / cfg["ranks"]
                if averager.momentum_in_optimizer(dense):
                    momentum[j].mul_(MOMENTUM).add_(update)
                    update = momentum[j]
                p -= cfg["lr"] * update
        accuracy.append(right / (cfg["ranks"] * cfg["batch"]))
        if (step + 1) % cfg["every"] == 0 or step + 1 == cfg["steps"]:
            window = accuracy[-cfg["every"]:]
            report(method, step + 1, sum(window) / len(window),
                   held_out_accuracy(model, hx, hy))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--methods", default="none,ef:topk:1%")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--batch", type=int, default=8, help="samples per rank and step (default 8)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=0, help="dense steps before the method's")
    p.add_argument("--every", type=int, default=25, help="steps between reports")
    p.add_argument("--model", choices=("mlp", "embedding"), default="mlp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--separation", type=float, default=1.0)
    p.add_argument("--noise", type=float, default=4.0)
    p.add_argument("--held-out", type=int, default=2048)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--out", help="also write the rows to this CSV file")
    a = p.parse_args()
    if a.steps < 1 or a.ranks < 1 or a.batch < 1 or a.every < 1 or a.warmup < 0:
        raise SystemExit("ef_reference.py: --steps, --ranks, --batch and --every must be "
                         "positive and --warmup not negative")
    methods = a.methods.split(",")
    for m in methods:
        parse_method(m)
    torch.set_num_threads(a.threads)
    cfg = {"steps": a.steps, "ranks": a.ranks, "batch": a.batch, "lr": a.lr,
           "warmup": a.warmup, "every": a.every, "model": a.model, "seed": a.seed,
           "separation": a.separation, "noise": a.noise, "held_out": a.held_out}
    rows = []

    def report(method, step, train_acc, held_acc):
        rows.append((method, step, round(train_acc, 4), round(held_acc, 4)))
        print(f"{method:>14}  step {step:>5}  training accuracy {train_acc:.3f}  "
              f"held-out {held_acc:.3f}", flush=True)

    for m in methods:
        train(cfg, m, report)
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(("method", "step", "training_accuracy", "held_out_accuracy"))
            w.writerows(rows)


if __name__ == "__main__":
    main()
