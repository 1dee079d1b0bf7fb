"""The results: summary.csv, a console table and report.md.

Rows are dicts (see allreduce_bench.py: one per implementation, method,
rank count and size); this module only formats them.
"""

import csv

from .plan import format_size

FIELDS = ["mode", "nodes", "local_ranks", "ranks", "impl", "method", "bytes", "iters",
          "t_med_s", "t_min_s", "t_max_s", "algbw_GBps", "busbw_GBps", "wire_bytes",
          "wire_vs_dense_ring", "same_bits", "vs_gloo", "vs_mpi", "bound_s", "vs_bound",
          "load_before", "load_after", "error", "zringd_peak_rss", "client_peak_rss"]


# How allreduce_bench.py --fusion names a method run on ResNet-50's tensors.
FUSION_SUFFIX = " (161 tensors)"


def zring_label(method, api, fused):
    """A zring series: the method, then the client path unless it is
    SharedTensors ("none [inplace]"), then the fusion suffix."""
    return method + ("" if api == "shared" else f" [{api}]") + (FUSION_SUFFIX if fused else "")


def label(row):
    return row["method"] if row["impl"] == "zring" else row["impl"]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_value(r.get(k)) for k in FIELDS})


def _csv_value(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    if v is None:
        return ""
    return v


def _ms(t):
    if t is None:
        return "—"
    return f"{t * 1e3:.3g}" if t < 1 else f"{t * 1e3:.0f}"


def _gbps(v):
    return "—" if v is None else f"{v / 1e9:.3g}"


def _ratio(v):
    return "—" if v is None else f"{v:.2f}"


def _find(rows, **key):
    for r in rows:
        if all(r.get(k) == v for k, v in key.items()):
            return r
    return None


def _matrix(rows, sizes, labels, cell):
    """Markdown table: one line per size, one column per label."""
    out = ["| size | " + " | ".join(labels) + " |",
           "|---:|" + "---:|" * len(labels)]
    for s in sizes:
        cells = []
        for lab in labels:
            r = next((x for x in rows if x["bytes"] == s and label(x) == lab), None)
            cells.append("—" if r is None or r.get("error") else cell(r))
        out.append(f"| {format_size(s)} | " + " | ".join(cells) + " |")
    return out


def markdown(rows, meta):
    """report.md: what ran, then the tables. Rows of one rank count only."""
    sizes = sorted({r["bytes"] for r in rows})
    labels = []
    for r in rows:
        if label(r) not in labels:
            labels.append(label(r))
    ranks = rows[0]["ranks"] if rows else 0
    lines = [f"# all-reduce: zring vs Gloo vs Open MPI — {meta['mode']}, {ranks} ranks", ""]
    lines += [f"- {k}: {v}" for k, v in meta["describe"].items()]
    lines.append("")
    none = [r for r in rows if label(r) in ("none", "gloo", "mpi")]
    lines += ["## Dense float32: zring `none` against the peers", "",
              "| size | zring none busbw GB/s | Gloo busbw GB/s | MPI busbw GB/s "
              "| zring/Gloo time | zring/MPI time |", "|---:|---:|---:|---:|---:|---:|"]
    for s in sizes:
        z, g, m = (_find(none, bytes=s, impl=i) for i in ("zring", "gloo", "mpi"))
        lines.append(f"| {format_size(s)} | " + " | ".join([
            _gbps(z and z.get("busbw")), _gbps(g and g.get("busbw")), _gbps(m and m.get("busbw")),
            _ratio(z and z.get("vs_gloo")), _ratio(z and z.get("vs_mpi"))]) + " |")
    lines += ["", "## Median time per all-reduce (ms; op time = slowest rank)", ""]
    lines += _matrix(rows, sizes, labels, lambda r: _ms(r["t_med"]))
    lines += ["", "## busbw (GB/s of dense float32: algbw x 2(N-1)/N)", ""]
    lines += _matrix(rows, sizes, labels, lambda r: _gbps(r["busbw"]))
    zl = [lab for lab in labels if lab not in ("gloo", "mpi")]
    lines += ["", "## Bytes each node put on the ring per op, as a fraction of a dense "
              "float32 ring (2(N-1)/N x S)", ""]
    lines += _matrix(rows, sizes, zl, lambda r: "—" if r.get("wire_vs_dense_ring") is None
                     else f"{r['wire_vs_dense_ring']:.3g}")
    lines += ["", "## zring time / Gloo time (below 1: zring faster)", ""]
    lines += _matrix(rows, sizes, zl, lambda r: _ratio(r.get("vs_gloo")))
    if any(r.get("bound_s") for r in rows):
        lines += ["", "## Time / bandwidth limit 2(N-1)/N x S / B (the dense float32 ring at "
                  "line rate; below 1 only by sending less)", ""]
        lines += _matrix(rows, sizes, labels, lambda r: _ratio(r.get("vs_bound")))
    if any(r.get("zringd_peak_rss") for r in rows):
        mib = lambda v: "—" if not v else f"{v / 2**20:.0f}"
        lines += ["", "## Peak resident memory (MiB, `--memory`): zringd (the largest node), "
                  "then one client (the largest rank)", "",
                  "zringd's includes the shared buffer it maps for ops of 256 KiB and more "
                  "(the op's size, per local rank) and, with error feedback, the current "
                  "and the staged residual (twice the op's size, per local rank).", ""]
        lines += _matrix(rows, sizes, zl, lambda r: mib(r.get("zringd_peak_rss")))
        lines += [""]
        lines += _matrix(rows, sizes, zl, lambda r: mib(r.get("client_peak_rss")))
    fused = [lab for lab in zl if lab.endswith(FUSION_SUFFIX)]
    if fused:
        lines += ["", "## Tensor fusion: 161 tensors / one tensor of the same size "
                  "(time; 1 = no cost)", "", "| method | one tensor ms | 161 tensors ms | ratio |",
                  "|---|---:|---:|---:|"]
        for lab in fused:
            base = lab[:-len(FUSION_SUFFIX)]
            for s in sizes:
                one, many = _find(rows, bytes=s, method=base), _find(rows, bytes=s, method=lab)
                if one and many and one.get("t_med") and many.get("t_med"):
                    lines.append(f"| {base} | {_ms(one['t_med'])} | {_ms(many['t_med'])} | "
                                 f"{many['t_med'] / one['t_med']:.2f} |")
    spread = [r for r in rows if r.get("t_med") and not r.get("error")]
    lines += ["", "## min / max per op (ms)", ""]
    lines += _matrix(spread, sizes, labels,
                     lambda r: f"{_ms(r['t_min'])} / {_ms(r['t_max'])}")
    bad = [r for r in rows if r.get("error")]
    if bad:
        lines += ["", "## Failures", ""]
        lines += [f"- {label(r)} at {format_size(r['bytes'])}: {r['error']}" for r in bad]
    differ = [r for r in rows if r.get("same_bits") is False]
    if differ:
        lines += ["", "Ranks did not all get the same bits: " +
                  ", ".join(f"{label(r)} at {format_size(r['bytes'])}" for r in differ)]
    return "\n".join(lines) + "\n"


def scaling_markdown(rows, meta):
    """report.md of a scaling run: one table per size, ranks down, labels across."""
    lines = [f"# all-reduce scaling: zring vs Gloo vs Open MPI — {meta['mode']}", ""]
    lines += [f"- {k}: {v}" for k, v in meta["describe"].items()]
    labels = []
    for r in rows:
        if label(r) not in labels:
            labels.append(label(r))
    for s in sorted({r["bytes"] for r in rows}):
        for title, cell in (("median time per op (ms)", lambda r: _ms(r["t_med"])),
                            ("busbw (GB/s)", lambda r: _gbps(r["busbw"]))):
            lines += ["", f"## {format_size(s)}: {title}", "",
                      "| ranks | " + " | ".join(labels) + " |", "|---:|" + "---:|" * len(labels)]
            for n in sorted({r["ranks"] for r in rows}):
                cells = []
                for lab in labels:
                    r = next((x for x in rows if x["bytes"] == s and x["ranks"] == n
                              and label(x) == lab), None)
                    cells.append("—" if r is None or r.get("error") else cell(r))
                lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def console(rows):
    """A compact table for the terminal: time, busbw and vs-peer per row."""
    out = [f"{'ranks':>5} {'impl/method':<26} {'size':>9} {'median ms':>10} {'min':>9} "
           f"{'max':>9} {'busbw GB/s':>10} {'wire/dense':>10} {'vs gloo':>8} {'vs mpi':>7}"
           f" {'vs bound':>8}"]
    for r in rows:
        name = f"{r['impl']}" + (f" {r['method']}" if r["impl"] == "zring" else "")
        if r.get("error"):
            out.append(f"{r['ranks']:>5} {name:<26} {format_size(r['bytes']):>9}  FAILED: "
                       f"{r['error'][:90]}")
            continue
        wd = r.get("wire_vs_dense_ring")
        out.append(f"{r['ranks']:>5} {name:<26} {format_size(r['bytes']):>9} "
                   f"{_ms(r['t_med']):>10} {_ms(r['t_min']):>9} {_ms(r['t_max']):>9} "
                   f"{_gbps(r['busbw']):>10} {'' if wd is None else f'{wd:.3g}':>10} "
                   f"{_ratio(r.get('vs_gloo')):>8} {_ratio(r.get('vs_mpi')):>7}"
                   f" {_ratio(r.get('vs_bound')):>8}")
    return "\n".join(out)
