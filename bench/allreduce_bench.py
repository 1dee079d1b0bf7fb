#!/usr/bin/python3
"""All-reduce side by side: zring (every method) against Gloo and Open MPI.

Usually started by bench/run.sh, which installs the packages and builds
first. This driver builds nothing: it runs what the build made.

    allreduce_bench.py [--quick] [--netns [--rate 1gbit] [--mtu 1500]]
                       [--sizes 4K,1M,64M] [--ranks 4] [--local-ranks 1]
                       [--methods none,quant:8] [--impls zring,gloo,mpi]
                       [--scaling [2,3,4,6,8]] [--out DIR]

For each rank count: Gloo, then Open MPI, then zring once per method (one
ring of zringd for all of them), every implementation on the same sizes and
ranks, one process per rank. Results go to results/<time>-<mode>/
(summary.csv, report.md, SVG plots, the ranks' raw timings) and
results/latest points at the newest. See docs/benchmarks.md.
"""

import argparse
import datetime
import functools
import json
import os
import platform
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from zbench import network, phases, plan, procs, report, runners, stats, svg  # noqa: E402
from zbench.machine import cpu_model, git_describe, load, tcp_congestion_control  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# zring's client paths (--zring-api), as the report describes them.
API_TEXT = {
    "shared": "shared: all_reduce_in_place of SharedTensors (no copy)",
    "inplace": "inplace: all_reduce_in_place of a TensorMap",
    "copy": "copy: all_reduce of a TensorMap (the original API, a new map per op)",
    "given": "given: all_reduce of a TensorMap given up (std::move), averaged where it is",
    "out": "out: all_reduce(inputs, outputs) of TensorViews, out of place into outputs made once",
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="sizes 4 B, 4 KiB, 1 MiB, 64 MiB and fewer ops (about 3 minutes)")
    p.add_argument("--sizes", help="comma-separated sizes, e.g. 4,4K,1M,64M (float32 bytes)")
    p.add_argument("--ranks", type=int, default=4, help="world size (default 4)")
    p.add_argument("--local-ranks", type=int, default=1,
                   help="ranks per zringd node (default 1): nodes = ranks / local ranks")
    p.add_argument("--methods", default=",".join(plan.ALL_METHODS),
                   help="zring methods (default: all ten; 'threshold' = the ~1%% threshold)")
    p.add_argument("--impls", default="zring,gloo,mpi", help="what to run (default all three)")
    p.add_argument("--scaling", nargs="?", const="2,3,4,6,8", metavar="RANKS",
                   help="run each rank count (default 2,3,4,6,8) at 64 MiB (or --sizes)")
    p.add_argument("--netns", action="store_true",
                   help="emulated network: a namespace per node, links shaped with tc tbf")
    p.add_argument("--rate", default="1gbit",
                   help="--netns link rate each way (default 1gbit; 'none' = unshaped)")
    p.add_argument("--mtu", type=int, default=1500, help="--netns link MTU (default 1500)")
    p.add_argument("--warmup", type=int, help="warm-up ops per size (default: by size)")
    p.add_argument("--iters", type=int, help="timed ops per size (default: by size)")
    p.add_argument("--chunk-bytes", type=int, help="zringd chunk_bytes (default: zringd's)")
    p.add_argument("--gather-bytes", type=int,
                   help="zringd gather_bytes (default: zringd's; 0: every op round the ring)")
    p.add_argument("--direct-bytes", type=int,
                   help="zringd direct_bytes (default: zringd's; 0: medium ops round the ring "
                        "instead of in two hops)")
    p.add_argument("--busy-poll-us", type=int, help=runners.BUSY_POLL_HELP)
    p.add_argument("--tcp-data", choices=("on", "off"),
                   help="zringd tcp_data (default: zringd's, on: ring messages between two "
                        "nodes on a TCP connection of their own; off: all on ZeroMQ)")
    p.add_argument("--tcp-congestion",
                   help="zringd tcp_congestion (default: zringd's, cubic; 'system': the "
                        "kernel's default, as Gloo and Open MPI use)")
    p.add_argument("--gloo-algorithm", choices=("ring_chunked", "allreduce"),
                   default="ring_chunked",
                   help="the Gloo peer: AllreduceRingChunked (default), or gloo::allreduce, "
                        "which torch.distributed's gloo backend calls (faster for small ops)")
    p.add_argument("--zringd-cpus", choices=("any", "spread"), default="any",
                   help="where each zringd runs: any CPU (default), or 'spread': node n's "
                        "zringd (all its threads) on the n-th (mod their count) of the CPUs "
                        "the benchmark may use, through "
                        "taskset, as CPUAffinity= in its systemd unit would (docs/operations.md)")
    p.add_argument("--trace", action="store_true",
                   help="after each zring method, write the daemons' timeline (zringctl trace) "
                        "to its raw directory and report the median of every phase per size")
    p.add_argument("--cpu", action="store_true",
                   help="after each zring method, report the CPU time an op costs (summed over "
                        "the nodes): zringd's ring threads, its other threads, the clients; "
                        "every op of the method counts (warmup and barriers too), so give one "
                        "size")
    p.add_argument("--fusion", action="store_true",
                   help="tensor fusion: ResNet-50's 161 parameter tensors (25,557,032 floats) "
                        "against one tensor of the same size, per method")
    p.add_argument("--zring-api", default="shared,inplace,copy",
                   help="comma-separated client paths, each measured per method: 'shared' "
                        "(SharedTensors, which zringd reads and writes where they are), "
                        "'inplace' (all_reduce_in_place of a TensorMap), 'copy' (the "
                        "original all_reduce of a TensorMap, a new map per op), 'given' "
                        "(all_reduce(std::move(map)): the map given up holds the averages), "
                        "'out' (all_reduce(inputs, outputs) of TensorViews: out of place into "
                        "outputs made once); default shared,inplace,copy")
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR",
                                                         os.path.join(ROOT, "build-bench")))
    p.add_argument("--out", help="results directory (default results/<time>-<mode>)")
    p.add_argument("--label", default="", help="free text saved with the results")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds one implementation or method may take (default 1800)")
    p.add_argument("--malloc", choices=("system", "keep"), default="system",
                   help="system (default): glibc's defaults in every rank; keep: every rank's "
                        "malloc keeps freed memory (MALLOC_MMAP_THRESHOLD_, "
                        "MALLOC_TRIM_THRESHOLD_), so the copy form's fresh results reuse pages "
                        "instead of faulting new ones in, as jemalloc or tcmalloc would")
    p.add_argument("--memory", action="store_true",
                   help="also measure peak resident memory: zring runs each size on its "
                        "own, with every zringd's peak reset before it, and the report "
                        "gives zringd's and a client's peak per method and size")
    p.add_argument("--cleanup-netns", action="store_true",
                   help="only delete namespaces a killed earlier run left behind")
    args = p.parse_args(argv)
    args.sizes = ([plan.RESNET50_BYTES] if args.fusion else
                  plan.parse_sizes(args.sizes) if args.sizes else
                  plan.SCALING_SIZES if args.scaling else
                  plan.QUICK_SIZES if args.quick else plan.DEFAULT_SIZES)
    args.methods = plan.parse_methods(args.methods)
    args.zring_apis = [("inplace" if a.strip() == "tensors" else a.strip())
                       for a in args.zring_api.split(",") if a.strip()]
    bad = [a for a in args.zring_apis if a not in API_TEXT]
    if bad or not args.zring_apis:
        p.error(f"--zring-api: unknown {', '.join(bad) or '(none)'} ({', '.join(API_TEXT)})")
    args.impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    unknown = set(args.impls) - {"zring", "gloo", "mpi"}
    if unknown:
        p.error(f"--impls: unknown {', '.join(sorted(unknown))} (zring, gloo, mpi)")
    args.rank_counts = ([int(x) for x in args.scaling.split(",")] if args.scaling
                        else [args.ranks])
    for n in args.rank_counts:
        if n < 1 or n % args.local_ranks:
            p.error(f"{n} ranks cannot be split into nodes of {args.local_ranks} local ranks")
    if args.netns:
        network.parse_rate(args.rate)
    return args


class Bench:
    def __init__(self, args):
        self.args = args
        self.bins = runners.Binaries(args.build_dir)
        self.mode = "loopback" if not args.netns else \
            "netns-" + (args.rate if network.parse_rate(args.rate) else "unshaped") + \
            f"-mtu{args.mtu}"
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        suffix = self.mode + ("-scaling" if args.scaling else "") + ("-quick" if args.quick else "")
        self.out = os.path.abspath(args.out or os.path.join(ROOT, "results", f"{stamp}-{suffix}"))
        os.makedirs(self.out, exist_ok=True)
        self.rows = []
        self.phase_text = []  # --trace: one table per zring method
        self.cpu_rows = []  # --cpu: one row per zring method
        self.unavailable = {}
        self.started = time.monotonic()
        self.meta = {"mode": self.mode, "date": datetime.datetime.now().isoformat(timespec="seconds"),
                     "describe": {}}

    def log(self, text):
        print(f"[{time.monotonic() - self.started:7.1f} s, load {load():5.2f}] {text}", flush=True)

    def check(self):
        a = self.args
        if "zring" in a.impls and self.bins.missing_for_zring():
            sys.exit("missing " + ", ".join(self.bins.missing_for_zring()) +
                     ": build first (bench/run.sh does, or scripts/build.sh)")
        if "gloo" in a.impls and self.bins.gloo_unavailable():
            self.unavailable["gloo"] = self.bins.gloo_unavailable()
        if "mpi" in a.impls and self.bins.mpi_unavailable():
            self.unavailable["mpi"] = self.bins.mpi_unavailable()
        if a.netns and os.geteuid() != 0:
            sys.exit("--netns needs root (it creates network namespaces)")
        for impl, why in self.unavailable.items():
            self.log(f"{impl}: unavailable: {why}")

    def describe(self, net):
        a = self.args
        d = self.meta["describe"]
        d["date"] = self.meta["date"]
        d["zring"] = git_describe() + (f"; {a.label}" if a.label else "")
        d["zring clients"] = "; ".join(API_TEXT[api] for api in a.zring_apis)
        d["machine"] = f"{os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}"
        d["network"] = net.describe()
        # The kernel's default congestion control shapes loopback TCP (Gloo's,
        # Open MPI's and zring's alike): BBR paces, cubic does not.
        d["tcp congestion control"] = tcp_congestion_control()
        d["zringd cpus"] = ("node n's zringd on the n-th (mod their count) of CPUs "
                            f"{sorted(os.sched_getaffinity(0))}"
                            if a.zringd_cpus == "spread" else "any")
        d["ranks' malloc"] = a.malloc
        d["ranks"] = (", ".join(map(str, a.rank_counts)) +
                      f" ({a.local_ranks} local rank{'s' if a.local_ranks > 1 else ''} per node)")
        gloo_text = ("gloo::allreduce" if a.gloo_algorithm == "allreduce"
                     else "AllreduceRingChunked")
        d["peers"] = (f"Gloo {gloo_text} over TCP (Debian libgloo-dev), "
                      f"{runners.mpi_version()} MPI_Allreduce with --mca btl tcp,self")
        for impl, why in self.unavailable.items():
            d[f"{impl} unavailable"] = why
        d["load at start (1 min)"] = load()

    def run(self):
        self.check()
        for n in self.args.rank_counts:
            self.run_ranks(n)
            self.write()
        self.meta["describe"]["load at end (1 min)"] = load()
        self.meta["describe"]["duration"] = f"{time.monotonic() - self.started:.0f} s"
        self.write()
        print()
        print(report.console(self.rows))
        print(f"\nresults: {self.out}")

    def run_ranks(self, ranks):
        a = self.args
        nodes = ranks // a.local_ranks
        if a.netns:
            net = network.Namespaces(nodes, a.rate, a.mtu)
        else:
            net = network.Loopback(nodes)
        try:
            if not self.meta["describe"]:
                self.describe(net)
            quick = a.quick or bool(a.scaling)
            series = runners.Series(self.bins, net, nodes, a.local_ranks,
                                    os.path.join(self.out, "raw", f"{ranks}-ranks"),
                                    plan.plan_text(a.sizes, quick, a.warmup, a.iters), a.timeout,
                                    runners.MALLOC_ENV[a.malloc])
            self.log(f"{ranks} ranks ({nodes} nodes) on {net.describe()}; sizes "
                     f"{', '.join(plan.format_size(s) for s in a.sizes)}")
            if "gloo" in a.impls and "gloo" not in self.unavailable:
                self.measure(series, "gloo", "none", lambda: runners.run_gloo(
                    series, algorithm=a.gloo_algorithm))
            if "mpi" in a.impls and "mpi" not in self.unavailable:
                self.measure(series, "mpi", "none", lambda: runners.run_mpi(series))
            if "zring" in a.impls:
                largest = max(a.sizes)
                with runners.ZringRing(series, largest, a.chunk_bytes, a.gather_bytes,
                                       a.direct_bytes, a.tcp_data, a.tcp_congestion,
                                       a.zringd_cpus == "spread",
                                       busy_poll_us=a.busy_poll_us) as ring:
                    for m in a.methods:
                        for api in a.zring_apis:
                            for layout in (("flat", "resnet50") if a.fusion else ("flat",)):
                                why = ring.ensure_up()
                                if why:
                                    self.log(f"zringd restarted before {m}: {why}")
                                safe = m.replace(":", "-").replace("%", "pct")
                                label = report.zring_label(m, api, layout != "flat")
                                if a.memory:
                                    self.measure_memory(series, ring, m, label,
                                                        f"zring-{safe}-{api}-{layout}", layout, api)
                                    continue
                                run = functools.partial(ring.run_method, m,
                                                        f"zring-{safe}-{api}-{layout}", layout, api)
                                if a.cpu:
                                    run = self.counting_cpu(ring, label, series.ranks, run)
                                self.measure_traced(series, ring, label, run)
        finally:
            net.close()
        self.derive()

    def measure_memory(self, series, ring, method, label, name, layout, api):
        """Each size on its own, on fresh daemons: the ops run, then the
        peaks are read (zringd's: the largest of the nodes; a client's: the
        largest of the ranks)."""
        whole_plan = series.plan
        try:
            for item in whole_plan.split(","):
                size = int(item.split(":")[0])
                series.plan = item
                ring.restart()
                out = {}

                def run():
                    out["dir"] = ring.run_method(method, f"{name}-{size}", layout, api)
                    return out["dir"]
                self.measure(series, "zring", label, run, sizes=[size])
                if "dir" in out:
                    row = self.rows[-1]
                    row["zringd_peak_rss"] = ring.peak_memory()
                    row["client_peak_rss"] = stats_client_peak(out["dir"], series.ranks, size)
        finally:
            series.plan = whole_plan

    def counting_cpu(self, ring, label, ranks, run):
        """run, and the CPU its ops cost: the daemons' from /proc, the clients'
        from this process's reaped children (resource.RUSAGE_CHILDREN)."""
        def counted():
            ring0, other0, ops0 = ring.cpu()
            kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            directory = run()
            kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            ring1, other1, ops1 = ring.cpu()
            ops = ops1 - ops0
            if ops <= 0:
                return directory
            clients = (kids1.ru_utime + kids1.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
            us = lambda seconds: seconds * 1e6 / ops
            row = (f"| {label} | {ranks} | {ops} | {us(ring1 - ring0):.0f} | "
                   f"{us(other1 - other0):.0f} | {us(clients):.0f} | "
                   f"{us(ring1 - ring0 + other1 - other0 + clients):.0f} |")
            self.cpu_rows.append(row)
            self.log(f"{label}: CPU per op (us, all nodes): ring threads {us(ring1 - ring0):.0f}, "
                     f"other zringd threads {us(other1 - other0):.0f}, clients {us(clients):.0f}")
            return directory
        return counted

    def measure_traced(self, series, ring, label, run):
        """measure(), then with --trace the daemons' timeline of the method."""
        out = {}

        def traced():
            out["dir"] = run()
            return out["dir"]
        self.measure(series, "zring", label, traced)
        if not self.args.trace or "dir" not in out:
            return
        path = os.path.join(out["dir"], "trace.json")
        try:
            ring.trace(path)
        except procs.Failed as e:
            self.log(f"{label}: no trace: {e}")
            return
        client = {r["bytes"]: r["t_med"] * 1000 for r in self.rows
                  if r["impl"] == "zring" and r["method"] == label and r.get("t_med") and
                  r["ranks"] == series.ranks}
        after = getattr(ring, "traced_up_to", -1)  # ops of earlier methods on the same daemons
        ring.traced_up_to = phases.last_op(path)
        text = phases.markdown(f"{label}, {series.ranks} ranks",
                               phases.medians(path, self.args.sizes, after), client)
        self.phase_text.append(text)
        self.log("\n" + text)

    def measure(self, series, impl, method, run, sizes=None):
        before = load()
        t0 = time.monotonic()
        name = impl + ("" if impl != "zring" else f" {method}")
        try:
            directory = run()
            error = None
        except procs.Failed as e:
            directory, error = None, str(e)
        after = load()
        base = {"mode": self.mode, "nodes": series.nodes, "local_ranks": series.local_ranks,
                "ranks": series.ranks, "impl": impl, "method": method,
                "load_before": before, "load_after": after}
        if error:
            self.log(f"{name}: FAILED: {error}")
            for s in sizes or self.args.sizes:
                self.rows.append(dict(base, bytes=s, error=error.splitlines()[0]))
            return
        for r in stats.summarize(directory, series.ranks, sizes or self.args.sizes):
            self.rows.append(dict(base, **r))
        self.log(f"{name}: {time.monotonic() - t0:.1f} s (load {before} -> {after})")

    def derive(self):
        """Ratios to the peers, wire fraction, emulated-network bound, CSV names."""
        rate = network.parse_rate(self.args.rate) if self.args.netns else None
        for r in self.rows:
            if r.get("error") or "t_med" not in r:
                continue
            f = stats.bus_factor(r["nodes"])
            r.update(t_med_s=r["t_med"], t_min_s=r["t_min"], t_max_s=r["t_max"],
                     algbw_GBps=r["algbw"] / 1e9, busbw_GBps=r["busbw"] / 1e9)
            if r.get("wire_bytes") is not None and r["nodes"] > 1:
                r["wire_vs_dense_ring"] = r["wire_bytes"] / (f * r["bytes"])
            for peer in ("gloo", "mpi"):
                p = next((x for x in self.rows if x["impl"] == peer and x["ranks"] == r["ranks"]
                          and x["bytes"] == r["bytes"] and x.get("t_med")), None)
                if p and r["impl"] == "zring":
                    r[f"vs_{peer}"] = r["t_med"] / p["t_med"]
            if rate and r["nodes"] > 1:
                r["bound_s"] = f * r["bytes"] / (rate / 8)
                r["vs_bound"] = r["t_med"] / r["bound_s"]

    def write(self):
        report.write_csv(os.path.join(self.out, "summary.csv"), self.rows)
        with open(os.path.join(self.out, "meta.json"), "w") as f:
            json.dump(dict(self.meta, args=sys.argv[1:]), f, indent=2)
        done = [r for r in self.rows if not r.get("error") and r.get("t_med")]
        if not done:
            return
        if self.args.scaling:
            text = report.scaling_markdown(self.rows, self.meta)
            self.plot_scaling(done)
        else:
            text = report.markdown(self.rows, self.meta)
            self.plot_sizes(done)
        if self.cpu_rows:
            text += ("\n## CPU an op costs (--cpu)\n\nMicroseconds of CPU per op, summed over "
                     "the nodes (every op of the method: warmup and barriers too)\n\n"
                     "| method | ranks | ops per node | zringd ring threads | other zringd "
                     "threads | clients | all |\n|---|---:|---:|---:|---:|---:|---:|\n" +
                     "\n".join(self.cpu_rows) + "\n")
        if self.phase_text:
            text += "\n## Where the time goes (zringd's timeline)\n\n" + "\n".join(self.phase_text)
        with open(os.path.join(self.out, "report.md"), "w") as f:
            f.write(text)
        latest = os.path.join(os.path.dirname(self.out), "latest")
        if os.path.dirname(self.out) == os.path.join(ROOT, "results"):
            try:
                if os.path.islink(latest):
                    os.unlink(latest)
                os.symlink(os.path.basename(self.out), latest)
            except OSError:
                pass

    def _series(self, rows, x_key, y_fn):
        out = []
        for lab in dict.fromkeys(report.label(r) for r in rows):
            pts = sorted((r[x_key], y_fn(r)) for r in rows if report.label(r) == lab)
            out.append((lab if lab in ("gloo", "mpi") else f"zring {lab}", pts,
                        lab in ("gloo", "mpi")))
        return out

    def plot_sizes(self, rows):
        ranks = rows[0]["ranks"]
        ticks = [(s, plan.format_size(s).replace(" ", "")) for s in sorted({r["bytes"] for r in rows})]
        hl = []
        if self.args.netns and network.parse_rate(self.args.rate):
            hl = [(f"link {self.args.rate}", network.parse_rate(self.args.rate) / 8 / 1e9)]
        # busbw of a 4-byte op says nothing: the plot starts at 4 KiB.
        big = [r for r in rows if r["bytes"] >= 4096] or rows
        svg.plot(os.path.join(self.out, "busbw.svg"),
                 f"all-reduce busbw, {ranks} ranks, {self.mode} (dashed: peers)",
                 self._series(big, "bytes", lambda r: r["busbw"] / 1e9),
                 "size (float32 bytes)", "busbw (GB/s)",
                 x_ticks=[t for t in ticks if t[0] in {r["bytes"] for r in big}],
                 hlines=hl)
        svg.plot(os.path.join(self.out, "time.svg"),
                 f"all-reduce median time per op, {ranks} ranks, {self.mode}",
                 self._series(rows, "bytes", lambda r: r["t_med"] * 1e3),
                 "size (float32 bytes)", "time per op (ms)", x_ticks=ticks)

    def plot_scaling(self, rows):
        for s in sorted({r["bytes"] for r in rows}):
            sel = [r for r in rows if r["bytes"] == s]
            ticks = [(n, str(n)) for n in sorted({r["ranks"] for r in sel})]
            svg.plot(os.path.join(self.out, f"scaling-{plan.format_size(s).replace(' ', '')}.svg"),
                     f"busbw at {plan.format_size(s)} by rank count, {self.mode}",
                     self._series(sel, "ranks", lambda r: r["busbw"] / 1e9),
                     "ranks", "busbw (GB/s)", log_x=False, x_ticks=ticks)


def stats_client_peak(directory, ranks, size):
    return runners.client_peak_memory(directory, ranks).get(size)


def main(argv):
    args = parse_args(argv)
    if args.cleanup_netns:
        removed = network.remove_stale()
        print("removed: " + (", ".join(removed) if removed else "nothing"))
        return 0
    return network.run_driver(Bench(args), args.netns)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
