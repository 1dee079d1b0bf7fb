#!/usr/bin/python3
"""PyTorch over zring against torch.distributed over gloo: one tensor, and DDP training.

    torch_bench.py --mode allreduce [--iters 20] [--numel 16Mi] [--methods none]
    torch_bench.py --mode ddp [--netns [--rate 1gbit|none] [--mtu 1500]]
                   [--methods none,quant:8,ef:topk:1%] [--variants gloo,zring]
                   [--steps 300] [--batch 8] [--threads 0,1] [--bucket-cap-mb 25,100]

On demand only (never run by CI); needs the build of bench/run.sh
(build-bench/: zringd, zringctl and the Python module) and Debian's
python3-torch. Every rank is its own process; each zring variant gets a
fresh ring of zringd (one per node). --netns puts each node (its zringd and
its rank) in its own network namespace behind a shaped veth link (needs
root), as bench/allreduce_bench.py --netns does.

allreduce: one 16 Mi-float tensor, every op started at a gloo barrier,
timed alone: torch.distributed.all_reduce (gloo), zring all_reduce({"g": t})
then t.copy_(...), zring all_reduce_in_place({"g": t}) and SharedTensors
views (both said to be unavailable when the module has not got them).

ddp: a 16.8 M-parameter MLP on Gaussian clusters (zbench/torch_task.py),
the same seed and batches for every variant: DDP over gloo, then DDP with
zring's comm hook per method (and, with --variants local, a hook that
averages nothing: the step without communication). --threads and
--bucket-cap-mb take lists: every variant runs under every combination.

Results go to results/<time>-torch-<mode>/ (summary.csv, report.md,
loss.svg, meta.json, raw/ with every rank's records and logs).
See docs/benchmarks.md.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from zbench import network, procs, runners, torch_report, torch_stats  # noqa: E402
from zbench.machine import cpu_model, git_describe, load  # noqa: E402

ROOT = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "zbench", "torch_worker.py")
PYTHON = "/usr/bin/python3"
VARIANTS = {
    "gloo": "DDP's own all-reduce over gloo",
    "zring": "zring.torch.comm_hook, once per method",
    "zringcopy": "the hook as of 9021cff (all_reduce of a dict, then g.copy_), per method",
    "gloohook": "gloo through torch's allreduce_hook, timed like zring's hook",
    "local": "a hook that averages nothing: the step without communication",
}


def parse_count(text):
    """'16Mi', '16M' (both 2^24), '1000' -> int."""
    t = text.strip()
    for suffix, f in (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30),
                      ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if t.endswith(suffix):
            return int(float(t[:-len(suffix)]) * f)
    return int(t)


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def float_list(text):
    return [float(x) for x in text.split(",") if x.strip()]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("allreduce", "ddp"), required=True)
    p.add_argument("--ranks", type=int, default=4, help="world size, one rank per node (default 4)")
    p.add_argument("--methods", help="zring methods (default: none for allreduce; "
                                     "none,quant:8,ef:topk:1%% for ddp)")
    p.add_argument("--netns", action="store_true",
                   help="a network namespace per node behind a shaped link (needs root)")
    p.add_argument("--rate", default="1gbit", help="--netns link rate ('none': unshaped)")
    p.add_argument("--mtu", type=int, default=1500, help="--netns link MTU (default 1500)")
    # allreduce
    p.add_argument("--numel", default="16Mi", help="allreduce: floats in the tensor (default 16Mi)")
    p.add_argument("--iters", type=int, default=20, help="allreduce: timed ops per path (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="allreduce: untimed ops first (default 3)")
    p.add_argument("--barrier", choices=("gloo", "none"), default="gloo",
                   help="allreduce: gloo (default): every op starts at a gloo barrier, right "
                        "after a gloo op of the same tensor; none: each path's ops back to "
                        "back, as a training loop issues them (each library keeps its own "
                        "ranks in step), gloo's in a block of their own first")
    p.add_argument("--paths", default="gloo,copy,inplace,shared",
                   help="allreduce: what to time (default all: gloo, copy = zring all_reduce + "
                        "copy_, inplace = all_reduce_in_place, shared = SharedTensors)")
    # ddp
    p.add_argument("--variants", default="gloo,zring",
                   help="ddp, comma-separated: " + "; ".join(f"{k}: {v}" for k, v in VARIANTS.items()))
    p.add_argument("--steps", type=int, default=300, help="ddp: training steps (default 300)")
    p.add_argument("--batch", type=int, default=8, help="ddp: samples per rank and step (default 8)")
    p.add_argument("--lr", type=float, default=0.01, help="ddp: SGD learning rate, momentum 0.9")
    p.add_argument("--model", choices=("mlp", "embedding"), default="mlp",
                   help="ddp: the 16.8 M-parameter MLP (compute-heavy here: Debian's torch uses "
                        "the reference BLAS) or a 16.8 M-parameter embedding-bag classifier whose "
                        "step is almost all communication (zbench/torch_task.py)")
    p.add_argument("--malloc", choices=("keep", "system"), default="keep",
                   help="keep (default): every rank's glibc malloc keeps freed memory "
                        "(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), so a step's fresh "
                        "gradient tensors reuse pages instead of faulting new ones in, as "
                        "jemalloc or tcmalloc would; system: glibc's defaults")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--separation", type=float, default=1.0,
                   help="ddp: RMS coordinate of the cluster centres (default 1)")
    p.add_argument("--noise", type=float, default=4.0,
                   help="ddp: noise per coordinate, sigma (default 4)")
    p.add_argument("--held-out", type=int, default=2048, help="ddp: held-out samples (default 2048)")
    p.add_argument("--target-loss", type=float, default=0.5,
                   help="ddp: report the time until the smoothed training loss is this low")
    p.add_argument("--target-accuracy", type=float,
                   help="ddp: report the time until the smoothed training accuracy is this high, "
                        "0..1 (default: what DDP over gloo has at its last step)")
    p.add_argument("--window", type=int, default=20, help="ddp: steps in the smoothed loss")
    p.add_argument("--threads", type=int_list, default=[0],
                   help="torch intra-op threads per rank, a list (0: torch's default)")
    p.add_argument("--bucket-cap-mb", type=float_list, default=[25.0],
                   help="ddp: DDP bucket_cap_mb, a list (default 25, DDP's default)")
    p.add_argument("--bucket-view", action="store_true",
                   help="ddp: DDP(gradient_as_bucket_view=True) for every variant: the gradients "
                        "are views of DDP's buckets, so DDP copies neither into nor out of them")
    # common
    p.add_argument("--busy-poll-us", type=int, help=runners.BUSY_POLL_HELP)
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR",
                                                         os.path.join(ROOT, "build-bench")))
    p.add_argument("--out", help="results directory (default results/<time>-torch-<mode>)")
    p.add_argument("--label", default="", help="free text saved with the results")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds one variant (or the allreduce run) may take (default 1800)")
    a = p.parse_args(argv)
    a.methods = [m.strip() for m in (a.methods or ("none" if a.mode == "allreduce" else
                                                   "none,quant:8,ef:topk:1%")).split(",")
                 if m.strip()]
    a.variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = set(a.variants) - set(VARIANTS)
    if bad:
        p.error(f"--variants: unknown {', '.join(sorted(bad))} ({', '.join(VARIANTS)})")
    a.numel = parse_count(a.numel)
    if a.netns:
        network.parse_rate(a.rate)
    return a


class TorchBench:
    def __init__(self, args):
        self.a = args
        self.bins = runners.Binaries(args.build_dir)
        self.pythonpath = os.path.join(args.build_dir, "python")
        net = ("netns-" + (args.rate if network.parse_rate(args.rate) else "unshaped") +
               f"-mtu{args.mtu}") if args.netns else "loopback"
        self.net_name = net
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.out = os.path.abspath(args.out or os.path.join(
            ROOT, "results", f"{stamp}-torch-{args.mode}-{net}"))
        os.makedirs(self.out, exist_ok=True)
        self.started = time.monotonic()
        self.rows = []
        self.curves = {}
        self.meta = {"mode": args.mode, "network": net, "args": sys.argv[1:],
                     "date": datetime.datetime.now().isoformat(timespec="seconds")}

    def log(self, text):
        print(f"[{time.monotonic() - self.started:7.1f} s, load {load():5.2f}] {text}", flush=True)

    def check(self):
        missing = [p for p in (self.bins.zringd, self.bins.zringctl) if not os.access(p, os.X_OK)]
        if not os.path.isdir(os.path.join(self.pythonpath, "zring")):
            missing.append(os.path.join(self.pythonpath, "zring"))
        if missing:
            sys.exit("missing " + ", ".join(missing) + ": build first (BUILD_DIR=build-bench "
                     "BUILD_TYPE=Release scripts/build.sh -DZRING_BUILD_BENCH=ON)")
        if self.a.netns and os.geteuid() != 0:
            sys.exit("--netns needs root (it creates network namespaces)")
        try:
            subprocess.run([PYTHON, "-c", "import torch"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError):
            sys.exit(f"{PYTHON} cannot import torch (apt-get install python3-torch)")

    def describe(self, net):
        a = self.a
        d = {"date": self.meta["date"], "zring": git_describe() + (f"; {a.label}" if a.label else ""),
             "machine": f"{os.cpu_count()} CPUs ({cpu_model()})",
             "network": net.describe(), "ranks": f"{a.ranks} (1 per node)",
             "torch": subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                                     capture_output=True, text=True).stdout.strip(),
             "ranks' malloc": a.malloc,
             "load at start (1 min)": load()}
        self.meta["describe"] = d

    # -- running ---------------------------------------------------------------

    def run(self):
        self.check()
        net = network.Namespaces(self.a.ranks, self.a.rate, self.a.mtu) if self.a.netns else \
            network.Loopback(self.a.ranks)
        try:
            self.describe(net)
            self.log(f"{self.a.ranks} ranks on {net.describe()}")
            if self.a.mode == "allreduce":
                self.run_allreduce(net)
            else:
                self.run_ddp(net)
        finally:
            net.close()
        self.meta["describe"]["load at end (1 min)"] = load()
        self.meta["describe"]["duration"] = f"{time.monotonic() - self.started:.0f} s"
        self.write()
        print()
        print(torch_report.console(self.a.mode, self.rows))
        print(f"\nresults: {self.out}")

    def series(self, net, name):
        return runners.Series(self.bins, net, self.a.ranks, 1,
                              os.path.join(self.out, "raw", name), "", self.a.timeout)

    def launch(self, net, name, cfg, ring=None):
        """Starts one worker per rank with cfg, waits for all; returns the output dir."""
        series = self.series(net, name)
        out = series.out_dir("ranks")
        store = os.path.join(out, "store")
        if os.path.exists(store):
            os.unlink(store)
        cfg = dict(cfg, out=out, store=store, ranks=self.a.ranks, local_ranks=1,
                   timeout=self.a.timeout,
                   endpoints=[ring.ipc(n) for n in range(self.a.ranks)] if ring else [])
        env = {"PYTHONPATH": self.pythonpath + os.pathsep + HERE,
               "GLOO_SOCKET_IFNAME": "eth0" if self.a.netns else "lo"}
        env.update(runners.MALLOC_ENV[self.a.malloc])
        group = procs.Group()
        try:
            for r in range(self.a.ranks):
                rcfg = dict(cfg)
                if ring:
                    rcfg["daemon_pid"] = ring.group.children[r].pid
                path = os.path.join(out, f"config-{r}.json")
                with open(path, "w") as f:
                    json.dump(rcfg, f, indent=1)
                argv = net.wrap(r, [PYTHON, WORKER, "--config", path, "--rank", str(r)])
                group.spawn(f"rank {r}", argv, os.path.join(out, f"rank-{r}.log"), env)
            group.wait(self.a.timeout + 120, also_alive=ring.group.children if ring else ())
        except procs.Failed as e:
            why = ring.dead() if ring else ""
            raise procs.Failed(f"{e}\nzringd: {why}" if why else str(e))
        finally:
            group.stop()
        return out

    def run_allreduce(self, net):
        a = self.a
        cfg = {"mode": "allreduce", "numel": a.numel, "iters": a.iters, "warmup": a.warmup,
               "methods": a.methods, "threads": a.threads[0], "barrier": a.barrier,
               "paths": [x.strip() for x in a.paths.split(",") if x.strip()]}
        before = load()
        with runners.ZringRing(self.series(net, "allreduce"), a.numel * 4,
                               busy_poll_us=a.busy_poll_us) as ring:
            out = self.launch(net, "allreduce", cfg, ring)
        rows, notes = torch_stats.summarize_allreduce(out, a.ranks)
        for p, r in rows:
            self.rows.append({"path": p, "numel": a.numel, "load_before": before,
                              "load_after": load(), **r})
        first = notes.get(0, {})
        for key, value in first.items():
            if isinstance(value, str) and value.startswith("unavailable"):
                self.rows.append({"path": key, "numel": a.numel, "error": value})
        self.meta["notes"] = {r: notes[r] for r in sorted(notes)}

    def variants(self):
        out = []
        for v in self.a.variants:
            if v in ("zring", "zringcopy"):
                out += [(v, m) for m in self.a.methods]
            else:
                out.append((v, None))
        return out

    def run_ddp(self, net):
        a = self.a
        combos = [(t, b) for t in a.threads for b in a.bucket_cap_mb]
        for threads, cap in combos:
            for variant, method in self.variants():
                label = torch_report.variant_label(variant, method, threads, cap, len(combos) > 1)
                safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in
                               label.replace(":", "-").replace("%", "pct")).strip("_")
                cfg = {"mode": "ddp", "variant": variant, "method": method, "threads": threads,
                       "bucket_cap_mb": cap, "steps": a.steps, "batch": a.batch, "lr": a.lr,
                       "seed": a.seed, "separation": a.separation, "noise": a.noise,
                       "held_out": a.held_out, "model": a.model, "bucket_view": a.bucket_view}
                base = {"variant": variant, "method": method or "", "label": label,
                        "threads_set": threads, "bucket_cap_mb": cap, "network": self.net_name,
                        "ranks": a.ranks, "batch": a.batch, "load_before": load()}
                t0 = time.monotonic()
                try:
                    if variant.startswith("zring"):
                        with runners.ZringRing(self.series(net, safe), 0,
                                               busy_poll_us=a.busy_poll_us) as ring:
                            out = self.launch(net, safe, cfg, ring)
                    else:
                        out = self.launch(net, safe, cfg)
                except procs.Failed as e:
                    self.log(f"{label}: FAILED: {e}")
                    self.rows.append(dict(base, error=str(e).splitlines()[0], load_after=load()))
                    self.write()
                    continue
                row, curve = torch_stats.summarize_ddp(out, a.ranks, a.target_loss, a.window,
                                                       a.batch)
                self.rows.append(dict(base, **row, load_after=load()))
                if curve:
                    self.curves[label] = curve
                torch_stats.time_to_accuracy(self.rows, self.curves, a.target_accuracy)
                self.log(f"{label}: {time.monotonic() - t0:.0f} s, median step "
                         f"{row.get('step_med_s', 0) * 1e3:.0f} ms (load {base['load_before']} -> "
                         f"{load()})")
                self.write()

    def write(self):
        torch_report.write_csv(os.path.join(self.out, "summary.csv"), self.rows)
        with open(os.path.join(self.out, "meta.json"), "w") as f:
            json.dump(self.meta, f, indent=2)
        with open(os.path.join(self.out, "report.md"), "w") as f:
            f.write(torch_report.markdown(self.a, self.meta, self.rows))
        if self.curves:
            goal = next((r["target_accuracy"] for r in self.rows if "target_accuracy" in r), None)
            torch_report.plot_loss(self.out, self.curves, self.a.target_loss, self.net_name, goal)
        if os.path.dirname(self.out) == os.path.join(ROOT, "results"):
            latest = os.path.join(ROOT, "results", "latest-torch")
            try:
                if os.path.islink(latest):
                    os.unlink(latest)
                os.symlink(os.path.basename(self.out), latest)
            except OSError:
                pass


def main(argv):
    args = parse_args(argv)
    return network.run_driver(TorchBench(args), args.netns)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
