"""From the ranks' timings to one row per (implementation, method, size).

An op is done when its slowest rank is done, so the time of op i is the
maximum over ranks of their time for op i; median, min and max are taken over
those per-op times. Bandwidths follow NCCL-tests:

    algbw = S / t                 (S: the dense float32 bytes of the op)
    busbw = algbw * 2(N-1)/N      (N: ranks)

so busbw can be compared with the link speed whatever N is. For a compressed
method both still count the dense bytes: they say how fast the gradient was
averaged, not how many bytes moved; wire_bytes says that.
"""

import csv
import glob
import os
import re
import statistics


def read_rank_files(directory):
    """{rank: {bytes: [(iter, seconds, wire_bytes or None, checksum)]}}"""
    ranks = {}
    for path in glob.glob(os.path.join(directory, "rank-*.csv")):
        rank = int(re.search(r"rank-(\d+)\.csv$", path).group(1))
        rows = {}
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                wire = int(row["wire_bytes"]) if row["wire_bytes"] else None
                rows.setdefault(int(row["bytes"]), []).append(
                    (int(row["iter"]), float(row["seconds"]), wire, row["checksum"]))
        ranks[rank] = rows
    return ranks


def read_errors(directory):
    """{bytes: message} from the clients' logs ('error at BYTES bytes: ...')."""
    errors = {}
    for path in glob.glob(os.path.join(directory, "*.log")):
        with open(path, errors="replace") as f:
            for line in f:
                m = re.match(r"error at (\d+) bytes: (.*)", line.strip())
                if m:
                    errors.setdefault(int(m.group(1)), m.group(2))
    return errors


def bus_factor(ranks):
    return 2.0 * (ranks - 1) / ranks if ranks > 1 else 1.0


def summarize(directory, ranks, sizes):
    """One dict per size: iters, t_med/t_min/t_max, algbw, busbw, wire, same_bits."""
    per_rank = read_rank_files(directory)
    errors = read_errors(directory)
    rows = []
    for size in sizes:
        row = {"bytes": size, "error": errors.get(size, "")}
        present = [per_rank[r].get(size) for r in range(ranks) if r in per_rank]
        if len(present) != ranks or any(not p for p in present):
            row["error"] = row["error"] or f"timings missing for {ranks - len(present)} rank(s)"
            rows.append(row)
            continue
        iters = min(len(p) for p in present)
        op_times = [max(p[i][1] for p in present) for i in range(iters)]
        t_med = statistics.median(op_times)
        wires = [p[i][2] for p in present for i in range(iters) if p[i][2] is not None]
        checks = {(i, p[i][3]) for p in present for i in range(iters)}
        row.update({
            "iters": iters,
            "t_med": t_med,
            "t_min": min(op_times),
            "t_max": max(op_times),
            "algbw": size / t_med,
            "busbw": size / t_med * bus_factor(ranks),
            # wire_bytes is per node (every local rank of a node reports its node's).
            "wire_bytes": statistics.mean(wires) if wires else None,
            "same_bits": len(checks) == iters,
        })
        rows.append(row)
    return rows
