"""The tables and the plot of bench/torch_bench.py: summary.csv, report.md, loss.svg."""

import csv
import math
import os

from . import svg


def variant_label(variant, method, threads, cap, with_setting):
    name = {"gloo": "gloo", "gloohook": "gloo via allreduce_hook",
            "local": "no communication"}.get(variant) or \
        (f"zring {method}" if variant == "zring" else f"zring {method} (9021cff hook)")
    if with_setting:
        name += f" [threads {threads or 'default'}, bucket {cap:g} MB]"
    return name


def _flat(row):
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out[k] = "; ".join(f"{a} {b}" for a, b in v.items())
        else:
            out[k] = v
    return out


def write_csv(path, rows):
    rows = [_flat(r) for r in rows]
    keys = []
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def _ms(v):
    return "" if v is None else f"{v * 1e3:.3g}" if v * 1e3 < 100 else f"{v * 1e3:.0f}"


def _s(v):
    return "not reached" if v is None else f"{v:.1f}"


def _pct(v):
    return "" if v is None else f"{100 * v:.1f}%"


def _reached(r):
    """Time and steps to the target accuracy (ddp_table)."""
    if r.get("target_accuracy") is None:
        return ""
    if r.get("time_to_accuracy_s") is None:
        return "not reached"
    return f"{r['time_to_accuracy_s']:.1f} ({r['steps_to_accuracy']})"


def _mb(v):
    return "" if v is None else f"{v / 1e6:.2f}"


def _table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---:" if i else "---"
                                                          for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def allreduce_table(rows):
    body = []
    for r in rows:
        if r.get("error"):
            body.append([r["path"], r["error"], "", "", "", ""])
            continue
        body.append([r["path"], _ms(r["median"]), _ms(r["min"]), _ms(r["max"]),
                     _ms(r.get("gloo_same_block")),
                     f"{r['vs_gloo']:.2f}" if r.get("vs_gloo") else ""])
    return _table(["path", "median ms", "min", "max", "gloo, same block", "vs gloo"], body)


def ddp_table(rows):
    gloo = {(r["threads_set"], r["bucket_cap_mb"]): r for r in rows
            if r["variant"] == "gloo" and r.get("step_med_s")}
    body = []
    for r in rows:
        if r.get("error"):
            body.append([r["label"], "FAILED: " + r["error"]] + [""] * 10)
            continue
        g = gloo.get((r["threads_set"], r["bucket_cap_mb"]))
        body.append([
            r["label"], _ms(r["step_med_s"]),
            f"{r['step_med_s'] / g['step_med_s']:.2f}" if g else "",
            f"{_ms(r['forward_med_s'])} / {_ms(r['backward_med_s'])} / {_ms(r['optimizer_med_s'])}",
            _s(r["time_to_target_s"]), _reached(r), f"{r['final_loss']:.3f}",
            _pct(r.get("final_train_accuracy")), _pct(r.get("held_out_accuracy")),
            _mb(r.get("wire_bytes_per_step")), "yes" if r.get("same_weights") else "NO",
            r.get("threads", "")])
    return _table(["variant", "step ms (median)", "vs gloo", "fwd / bwd / opt ms",
                   "s to target", "s (steps) to target acc", "final loss", "train acc",
                   "held-out acc", "MB/step on wire",
                   "same weights", "torch threads"], body)


def hook_table(rows):
    keys = [("hook_buckets_med", "buckets"), ("hook_hook_first_med_s", "1st bucket"),
            ("hook_hook_last_med_s", "last bucket"), ("hook_hook_call_med_s", "in hook"),
            ("hook_queue_med_s", "queue"), ("hook_all_reduce_med_s", "all_reduce"),
            ("hook_copy_back_med_s", "copy back"), ("hook_done_last_med_s", "last done"),
            ("hook_tail_med_s", "tail")]
    body = []
    for r in rows:
        if not r.get("hook_hook_call_med_s"):
            continue
        body.append([r["label"]] + [(f"{r[k]:g}" if k == "hook_buckets_med" else _ms(r.get(k)))
                                    for k, _ in keys])
    if not body:
        return ""
    return _table(["variant"] + [h for _, h in keys], body)


def cpu_table(rows):
    body = []
    for r in rows:
        if r.get("cpu_ranks_ms_per_step") is None:
            continue
        top = ", ".join(f"{k} {v:g}" for k, v in list(r["cpu_rank_threads"].items())[:4])
        dtop = ", ".join(f"{k} {v:g}" for k, v in list(r["cpu_zringd_threads"].items())[:3])
        body.append([r["label"], f"{r['cpu_ranks_ms_per_step']:.0f}",
                     f"{r['cpu_zringd_ms_per_step']:.0f}", f"{r['cpu_others_ms_per_step']:.0f}",
                     f"{r['cpu_idle_ms_per_step']:.0f}", top, dtop])
    return _table(["variant", "ranks", "zringd", "others", "idle", "rank threads (top 4)",
                   "zringd threads (top 3)"], body)


def markdown(args, meta, rows):
    d = meta.get("describe", {})
    out = [f"# torch_bench --mode {args.mode}, {meta['network']}", ""]
    out += [f"- {k}: {v}" for k, v in d.items()]
    out.append(f"- arguments: {' '.join(meta['args'])}")
    out.append("")
    if args.mode == "allreduce":
        start = ("back to back (no barrier; each path's gloo block runs the same way just before "
                 "it)" if getattr(args, "barrier", "gloo") == "none" else "each started at a gloo barrier")
        out += [f"One tensor of {args.numel} floats, {args.iters} timed ops per path, {start}; "
                "the time of an op is its slowest rank's. gloo is "
                "torch.distributed.all_reduce (a sum, in place); zring's paths average. Every "
                "zring op follows a gloo op (its block), so each path has a gloo reference taken "
                "under the same load: vs gloo is the ratio to that block's gloo median; the gloo "
                "row pools every gloo op.", "",
                allreduce_table(rows), ""]
        for rank, notes in sorted(meta.get("notes", {}).items(), key=lambda kv: int(kv[0])):
            if int(rank) == 0:
                out += [f"- rank 0: {k}: {v}" for k, v in notes.items()]
        return "\n".join(out) + "\n"
    out += [f"{args.steps} steps of batch {args.batch} per rank (global {args.batch * args.ranks}); "
            "step time: per step the slowest rank's, median over steps. Time to target: until "
            f"the mean loss over the last {args.window} steps is <= {args.target_loss}. "
            f"To target acc: until the training accuracy over the last {args.window} steps "
            "first reaches "
            + (f"{args.target_accuracy:.1%}" if args.target_accuracy is not None
               else "what gloo has at its last step")
            + f" (train acc: that accuracy at the last step; held-out acc: rank 0's model on "
            "held-out samples). "
            "MB/step on wire: what the rank's node sent (zring's traffic).", "",
            ddp_table(rows), ""]
    hook = hook_table(rows)
    if hook:
        out += ["## Where a hooked step's backward goes (ms, medians of per-step sums, from the "
                "end of forward)", "", hook, "",
                "1st/last bucket: when the hook got its first/last bucket; in hook: the "
                "synchronous part of the hook calls; queue: waiting for the single hook thread; "
                "all_reduce: zring's calls (input copy, IPC, ring, result); copy back: "
                "g.copy_ of the averages; last done: the last bucket's future completed; tail: "
                "from there to backward()'s return.", ""]
    out += ["## CPU per step (ms of CPU time; 2 cores give 2 x the step time)", "",
            cpu_table(rows), ""]
    return "\n".join(out) + "\n"


def console(mode, rows):
    return allreduce_table(rows) if mode == "allreduce" else ddp_table(rows)


def _ticks(hi, n=6):
    if hi <= 0:
        return [0]
    step = 10 ** math.floor(math.log10(hi / n))
    for m in (1, 2, 5, 10):
        if hi / (step * m) <= n:
            step *= m
            break
    return [i * step for i in range(int(hi / step) + 1)]


def plot_loss(out_dir, curves, target, network, goal=None):
    """loss.svg and loss-by-step.svg (target: the loss target), and
    accuracy.svg (goal: the accuracy target, or None)."""
    series = []
    for label, c in curves.items():
        series.append((label, list(zip(c["time_s"], c["loss"])), label.startswith("gloo")))
    hi = max(max(c["time_s"]) for c in curves.values())
    lo = min(min(c["time_s"]) for c in curves.values())
    svg.plot(os.path.join(out_dir, "loss.svg"),
             f"DDP training loss (trailing mean) against time, {network} (dashed: gloo)",
             series, "time (s)", "training loss", log_x=False, log_y=True,
             x_ticks=[(t, f"{t:g}") for t in _ticks(hi) if t >= lo],
             hlines=[(f"target {target:g}", target)])
    accuracy = [(label, list(zip(c["time_s"], c["accuracy"])), label.startswith("gloo"))
                for label, c in curves.items() if "accuracy" in c]
    if accuracy:
        svg.plot(os.path.join(out_dir, "accuracy.svg"),
                 f"DDP training accuracy (trailing mean) against time, {network} (dashed: gloo)",
                 accuracy, "time (s)", "training accuracy", log_x=False, log_y=False,
                 x_ticks=[(t, f"{t:g}") for t in _ticks(hi) if t >= lo],
                 hlines=[(f"target {goal:.1%}", goal)] if goal is not None else [])
    step_series = [(label, list(zip(c["step"], c["loss"])), label.startswith("gloo"))
                   for label, c in curves.items()]
    n = max(max(c["step"]) for c in curves.values())
    svg.plot(os.path.join(out_dir, "loss-by-step.svg"),
             f"DDP training loss (trailing mean) against step, {network}", step_series,
             "step", "training loss", log_x=False, log_y=True,
             x_ticks=[(t, f"{t:g}") for t in _ticks(n) if t >= 1], hlines=[(f"target {target:g}", target)])
