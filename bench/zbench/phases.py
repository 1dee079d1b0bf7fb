"""Where a zring op's time goes, from the daemons' own timeline
(`zringctl trace`, Chrome trace-event JSON): per op size, the median of each
phase over every node's ops of that size (warm-up ops, and at 4 B the
one-float barriers between ops, included)."""

import json
import statistics

PHASES = ("assemble", "queued", "prepare", "summaries", "data", "finish")


def read_ops(path):
    """{(node pid, op number): {"elements": n, "method": m, phase: ms, "op": ms}}."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ops = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        args = e.get("args", {})
        if args.get("error", "ok") != "ok":
            continue
        key = (e["pid"], args.get("op"))
        op = ops.setdefault(key, {"elements": args.get("elements"), "method": args.get("method")})
        name = e["name"] if e["name"] in PHASES else "op"
        op[name] = e["dur"] / 1000.0
        op[name + "@"] = (e["ts"] / 1000.0, (e["ts"] + e["dur"]) / 1000.0)  # ms on one clock
    return ops


def medians(path, sizes, after_op=-1):
    """One row per size (bytes): {"bytes", "ops", phase: median ms, "op":
    median ms, "ring": median over ops of the ring's own time, "spread":
    median over ops of the time between the first node's request and the
    last's} for the ops numbered above after_op. An op's ring time runs from
    the moment the last node had prepared (before it, the others wait for
    that node) to the moment the last node had its average; its spread is
    how far apart its ranks' requests reached their zringd (the clients'
    own skew, which every node's summaries then wait out). The daemons of
    one machine share its clock (on several machines, read it with their
    clocks' offsets)."""
    ops = {k: o for k, o in read_ops(path).items() if k[1] is not None and k[1] > after_op}
    rows = []
    for size in sizes:
        mine = {k: o for k, o in ops.items() if o["elements"] == size // 4 and "op" in o}
        if not mine:
            continue
        row = {"bytes": size, "ops": len(mine)}
        for name in PHASES + ("op",):
            values = [o[name] for o in mine.values() if name in o]
            row[name] = statistics.median(values) if values else None
        ready, done, asked = {}, {}, {}
        for (_, number), o in mine.items():
            if "queued@" in o:
                asked.setdefault(number, []).append(o["queued@"][0])
            if "summaries@" not in o or "data@" not in o:
                continue
            ready[number] = max(ready.get(number, 0.0), o["summaries@"][0])
            done[number] = max(done.get(number, 0.0), o["data@"][1])
        ring = [done[n] - ready[n] for n in ready]
        row["ring"] = statistics.median(ring) if ring else None
        nodes = max((len(t) for t in asked.values()), default=0)
        spread = [max(t) - min(t) for t in asked.values() if len(t) == nodes and nodes > 1]
        row["spread"] = statistics.median(spread) if spread else None
        rows.append(row)
    return rows


def last_op(path):
    """The highest op number in a trace file (-1 for none)."""
    return max((k[1] for k in read_ops(path) if k[1] is not None), default=-1)


def markdown(label, rows, client_ms):
    """A table of the phases per size; client_ms maps a size to the clients'
    median op time (the slowest rank's), so the rest (the IPC hops both
    ways, the client's own work, the ranks' skew) shows as what the daemon
    did not see. "ring alone" is the ring's time once the last node was in,
    "requests' spread" how far apart the nodes' requests came (see
    medians)."""
    def ms(v):
        return "" if v is None else f"{v:.3f}"
    lines = [f"**{label}**: median ms per phase, over every node's ops of the size",
             "", "| size | ops | " + " | ".join(PHASES) +
             " | requests' spread | ring alone | in zringd | client | outside zringd |",
             "|---:|---:|" + "---:|" * (len(PHASES) + 5)]
    for r in rows:
        client = client_ms.get(r["bytes"])
        outside = client - r["op"] if client is not None and r["op"] is not None else None
        lines.append(f"| {r['bytes']} | {r['ops']} | " + " | ".join(ms(r[p]) for p in PHASES) +
                     f" | {ms(r['spread'])} | {ms(r['ring'])} | {ms(r['op'])} | {ms(client)}"
                     f" | {ms(outside)} |")
    return "\n".join(lines) + "\n"
