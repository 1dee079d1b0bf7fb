"""From the ranks' records of bench/torch_bench.py to one row per path or variant.

allreduce: rank-R.csv (path, iter, seconds) per rank; the time of op i of a
path is the maximum over ranks (an op is done when its slowest rank is);
median, min and max over the ops.

ddp: rank-R.json per rank (see torch_worker.run_ddp). A rank times each of
its steps with its own clock and no barrier: t0 before zero_grad, t1 after
the forward pass and the loss, t2 when backward() returns (DDP has waited
for every bucket's all-reduce and copied the averages into .grad), t3 after
optimizer.step(). The time of step i is the maximum over ranks of t3 - t0;
the row gives the median over steps (and the 10th / 90th percentiles), and
the same for each phase. The loss of step i is the mean of the ranks' losses
(the loss of the global batch); the curve is its trailing mean over
`window` steps, against the time the slowest rank finished step i, counted
from the first rank's start.
"""

import csv
import glob
import json
import os
import re
import statistics


def _pct(values, q):
    v = sorted(values)
    if not v:
        return None
    i = min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))
    return v[i]


def read_jsons(directory):
    out = {}
    for path in glob.glob(os.path.join(glob.escape(directory), "rank-*.json")):
        rank = int(re.search(r"rank-(\d+)\.json$", path).group(1))
        with open(path) as f:
            out[rank] = json.load(f)
    return out


# --- allreduce ----------------------------------------------------------------

def summarize_allreduce(directory, ranks):
    """[(path, {median, min, max, iters, vs_gloo})] in the order the ranks ran
    them, and the ranks' notes. Each zring path ran interleaved with gloo ops
    (block = that path): vs_gloo is its median over the median of the gloo
    ops of its own block; the gloo row pools all gloo ops."""
    per_rank = {}
    order = []
    for path in glob.glob(os.path.join(glob.escape(directory), "rank-*.csv")):
        rank = int(re.search(r"rank-(\d+)\.csv$", path).group(1))
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                key = (row["path"], row.get("block", row["path"]))
                per_rank.setdefault(rank, {}).setdefault(key, []).append(float(row["seconds"]))
                if key not in order:
                    order.append(key)

    def ops(keys):
        series = [sum((per_rank.get(r, {}).get(k, []) for k in keys), []) for r in range(ranks)]
        if any(not s for s in series):
            return None
        n = min(len(s) for s in series)
        return [max(s[i] for s in series) for i in range(n)]

    rows = []
    gloo_keys = [k for k in order if k[0] == "gloo"]
    if gloo_keys:
        g = ops(gloo_keys)
        rows.append(("gloo", {"iters": len(g), "median": statistics.median(g), "min": min(g),
                              "max": max(g)} if g else {"error": "timings missing on some rank"}))
    for key in order:
        if key[0] == "gloo":
            continue
        o = ops([key])
        if not o:
            rows.append((key[0], {"error": "timings missing on some rank"}))
            continue
        r = {"iters": len(o), "median": statistics.median(o), "min": min(o), "max": max(o)}
        g = ops([("gloo", key[1])])
        if g:
            r["gloo_same_block"] = statistics.median(g)
            r["vs_gloo"] = r["median"] / r["gloo_same_block"]
        rows.append((key[0], r))
    return rows, read_jsons(directory)


# --- ddp ------------------------------------------------------------------------

def trailing_mean(values, window):
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def summarize_ddp(directory, ranks, target_loss, window, batch):
    recs = read_jsons(directory)
    if len(recs) != ranks:
        return {"error": f"results missing for {ranks - len(recs)} rank(s)"}, None
    n = min(r["steps_done"] for r in recs.values())
    if n == 0:
        return {"error": "no step finished"}, None
    steps = [recs[r]["steps"][:n] for r in range(ranks)]
    step_t = [max(s[i][3] - s[i][0] for s in steps) for i in range(n)]
    phase = {name: [max(s[i][b] - s[i][a] for s in steps) for i in range(n)]
             for name, a, b in (("forward", 0, 1), ("backward", 1, 2), ("optimizer", 2, 3))}
    t_origin = min(s[0][0] for s in steps)
    t_end = [max(s[i][3] for s in steps) - t_origin for i in range(n)]
    loss = [statistics.mean(s[i][4] for s in steps) for i in range(n)]
    acc = [sum(s[i][5] for s in steps) / (batch * ranks) for i in range(n)]
    smooth = trailing_mean(loss, window)
    smooth_acc = trailing_mean(acc, window)
    reach = next((i for i in range(window - 1, n) if smooth[i] <= target_loss), None)
    r0 = recs[0]
    row = {
        "steps": n,
        "step_med_s": statistics.median(step_t),
        "step_p10_s": _pct(step_t, 0.1),
        "step_p90_s": _pct(step_t, 0.9),
        "forward_med_s": statistics.median(phase["forward"]),
        "backward_med_s": statistics.median(phase["backward"]),
        "optimizer_med_s": statistics.median(phase["optimizer"]),
        "train_time_s": t_end[-1],
        "target_loss": target_loss,
        "time_to_target_s": t_end[reach] if reach is not None else None,
        "steps_to_target": reach + 1 if reach is not None else None,
        "final_loss": smooth[-1],
        "final_train_accuracy": smooth_acc[-1],
        "held_out_accuracy": r0.get("held_out_accuracy"),
        "held_out_loss": r0.get("held_out_loss"),
        "same_weights": len({recs[r]["param_hash"] for r in range(ranks)}) == 1,
        "threads": ",".join(str(recs[r]["threads"]) for r in range(ranks)),
    }
    if all("wire_bytes" in recs[r] for r in range(ranks)):
        row["wire_bytes_per_step"] = statistics.mean(recs[r]["wire_bytes"] for r in range(ranks)) / n
        row["dense_bytes_per_step"] = statistics.mean(recs[r]["dense_bytes"] for r in range(ranks)) / n
        row["ops_per_step"] = statistics.mean(recs[r]["ops"] for r in range(ranks)) / n
    row.update(hook_breakdown(recs, ranks, n))
    row.update(cpu_breakdown(recs, ranks, n, t_end[-1]))
    curve = {"time_s": t_end, "loss": smooth, "accuracy": smooth_acc, "step": list(range(1, n + 1))}
    return row, curve


def time_to_accuracy(rows, curves, target=None):
    """Time to a fixed accuracy, the one that matters when compression slows
    learning per step: for every row that has a curve, until its trailing
    training accuracy first reaches `target` or, without one, what DDP over
    gloo had at its last step in the row's (threads, bucket cap) setting.
    Adds target_accuracy, time_to_accuracy_s and steps_to_accuracy (None:
    not reached within the steps)."""
    gloo_end = {}
    for r in rows:
        c = curves.get(r.get("label"))
        if r.get("variant") == "gloo" and c:
            gloo_end[(r["threads_set"], r["bucket_cap_mb"])] = c["accuracy"][-1]
    for r in rows:
        c = curves.get(r.get("label"))
        goal = target if target is not None else \
            gloo_end.get((r.get("threads_set"), r.get("bucket_cap_mb")))
        if not c or goal is None:
            continue
        reach = next((i for i, a in enumerate(c["accuracy"]) if a >= goal), None)
        r["target_accuracy"] = goal
        r["time_to_accuracy_s"] = c["time_s"][reach] if reach is not None else None
        r["steps_to_accuracy"] = reach + 1 if reach is not None else None


def hook_breakdown(recs, ranks, n):
    """Where a step's backward goes when a comm hook ran (zring, local), per rank and step:

    hook_first / hook_last: from the end of forward (t1) to the first / last
    bucket handed to the hook; hook_call: time inside the hook calls (the
    synchronous part, on the autograd thread); for zring, queue: from a
    bucket's hand-over to the start of its all_reduce on the single hook
    thread, all_reduce: the all_reduce calls (input copy, IPC, ring, result),
    copy_back: from the end of all_reduce to the future's completion (the
    g.copy_ of the averages); done_last: t1 to the last bucket's completion;
    tail: from that to backward()'s return (DDP copies the buckets into
    .grad). Medians over all (rank, step) pairs of the per-step sums.
    """
    if not any(recs[r]["hook_calls"] for r in range(ranks)):
        return {}
    keys = ("buckets", "hook_first", "hook_last", "hook_call", "queue", "all_reduce",
            "copy_back", "done_last", "tail")
    samples = {k: [] for k in keys}
    for r in range(ranks):
        rec = recs[r]
        calls = rec["hook_calls"]
        ops = rec["hook_ops"]
        zring = bool(ops)
        if zring and len(ops) < len(calls):
            ops = ops + [(None, None)] * (len(calls) - len(ops))
        by_step = {}
        for j, c in enumerate(calls):
            by_step.setdefault(c[0], []).append((c, ops[j] if zring else (None, None)))
        for i in range(n):
            items = by_step.get(i)
            if not items:
                continue
            t0, t1, t2, _t3 = rec["steps"][i][:4]
            done = [c[6] for c, _ in items if c[6] is not None]
            s = {"buckets": len(items),
                 "hook_first": items[0][0][4] - t1,
                 "hook_last": items[-1][0][5] - t1,
                 "hook_call": sum(c[5] - c[4] for c, _ in items)}
            if done:
                s["done_last"] = max(done) - t1
                s["tail"] = t2 - max(done)
            if zring and all(o[0] is not None for _, o in items):
                s["queue"] = sum(o[0] - c[5] for c, o in items)
                s["all_reduce"] = sum(o[1] - o[0] for _, o in items)
                s["copy_back"] = sum(c[6] - o[1] for c, o in items if c[6] is not None)
            for k, v in s.items():
                samples[k].append(v)
    out = {}
    for k, v in samples.items():
        if v:
            out[f"hook_{k}_med" + ("" if k == "buckets" else "_s")] = statistics.median(v)
    return out


def cpu_breakdown(recs, ranks, n, wall):
    """CPU milliseconds per step: the ranks' threads by name, their zringd's, the rest."""
    ranks_cpu, daemon_cpu = {}, {}
    for r in range(ranks):
        for name, s in recs[r]["cpu_threads"].items():
            ranks_cpu[name] = ranks_cpu.get(name, 0.0) + s
        for name, s in recs[r].get("daemon_cpu_threads", {}).items():
            daemon_cpu[name] = daemon_cpu.get(name, 0.0) + s
    ours = sum(ranks_cpu.values()) + sum(daemon_cpu.values())
    system = recs[0]["system_busy_s"]
    total = recs[0]["system_total_s"]
    per = 1e3 / n
    return {
        "cpu_ranks_ms_per_step": sum(ranks_cpu.values()) * per,
        "cpu_zringd_ms_per_step": sum(daemon_cpu.values()) * per,
        "cpu_others_ms_per_step": max(0.0, system - ours) * per,
        "cpu_idle_ms_per_step": max(0.0, total - system) * per,
        "cpu_rank_threads": {k: round(v * per, 1) for k, v in
                             sorted(ranks_cpu.items(), key=lambda kv: -kv[1])},
        "cpu_zringd_threads": {k: round(v * per, 1) for k, v in
                               sorted(daemon_cpu.items(), key=lambda kv: -kv[1])},
    }
