#!/usr/bin/env python3
"""Render a Chrome trace file of `zringctl trace --out` as an SVG picture.

    scripts/trace_svg.py TRACE.json OUT.svg [--width PX] [--title TEXT]

One row per track (each node's ops, ipc and ring threads, in the file's
order), each complete event a bar coloured by its phase (on the ops track, by
its method), a time axis in milliseconds below. Hovering a bar in a browser
shows its name, duration and op. Python 3 standard library only.
"""
import argparse
import html
import json
import math
import sys

PHASE_COLOURS = {
    "assemble": "#9e9e9e",
    "queued": "#f4b400",
    "prepare": "#db4437",
    "summaries": "#ab47bc",
    "data": "#4285f4",
    "finish": "#0f9d58",
}
METHOD_COLOURS = ["#5c6bc0", "#26a69a", "#ef6c00", "#8d6e63", "#ec407a", "#7cb342"]

ROW_HEIGHT = 22
BAR_HEIGHT = 16
LABEL_WIDTH = 90
TOP = 56
AXIS_HEIGHT = 40


def read_trace(path):
    """(process names by pid, thread names by (pid, tid), complete events)."""
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    processes, threads, events = {}, {}, []
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X":
            events.append(e)
    return processes, threads, events


def nice_step(span, ticks=8):
    """A round tick spacing (1, 2 or 5 times a power of ten) for span."""
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power


def colour_of(event, methods):
    if event.get("cat") == "op":
        method = event.get("args", {}).get("method", "")
        if method not in methods:
            methods[method] = METHOD_COLOURS[len(methods) % len(METHOD_COLOURS)]
        return methods[method]
    return PHASE_COLOURS.get(event["name"], "#607d8b")


def legend(methods, width):
    items = [(name, colour) for name, colour in PHASE_COLOURS.items()]
    items += [("op: " + m, c) for m, c in methods.items()]
    out, x = [], LABEL_WIDTH
    for name, colour in items:
        out.append(f'<rect x="{x}" y="30" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{x + 16}" y="40">{html.escape(name)}</text>')
        x += 24 + 7 * len(name)
        if x > width - 80:
            break
    return out


def axis(y, x0, scale, t0, t1):
    step = nice_step(t1 - t0)
    out = [f'<line x1="{x0}" y1="{y}" x2="{x0 + (t1 - t0) * scale:.1f}" y2="{y}" stroke="#333"/>']
    tick = math.ceil(t0 / step) * step
    while tick <= t1 + 1e-9:
        x = x0 + (tick - t0) * scale
        label = f"{tick / 1000:g} ms"
        out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 5}" stroke="#333"/>'
                   f'<text x="{x:.1f}" y="{y + 18}" text-anchor="middle">{label}</text>')
        tick += step
    return out


def bar(event, x, y, w, colour):
    args = event.get("args", {})
    tip = (f'{event["name"]}: {event["dur"] / 1000:.3f} ms (op {args.get("op", "?")} '
           f'{args.get("method", "")}, {args.get("wire_bytes", "?")} wire bytes, {args.get("error", "")})')
    out = (f'<rect x="{x:.2f}" y="{y}" width="{max(w, 0.5):.2f}" height="{BAR_HEIGHT}" '
           f'fill="{colour}"><title>{html.escape(tip)}</title></rect>')
    if event.get("cat") == "op" and w > 7 * len(event["name"]):
        out += (f'<text x="{x + 3:.2f}" y="{y + BAR_HEIGHT - 4}" fill="#fff">'
                f'{html.escape(event["name"])}</text>')
    return out


def render(processes, threads, events, width, title):
    rows = sorted({(e["pid"], e["tid"]) for e in events})
    if not rows:
        raise SystemExit("trace_svg: the trace holds no complete events")
    row_of = {r: i for i, r in enumerate(rows)}
    t0 = min(e["ts"] for e in events)
    t1 = max(e["ts"] + e["dur"] for e in events)
    plot = width - LABEL_WIDTH - 20
    scale = plot / max(t1 - t0, 1e-9)
    height = TOP + len(rows) * ROW_HEIGHT + AXIS_HEIGHT
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="#fff"/>',
           f'<text x="{LABEL_WIDTH}" y="18" font-size="14" font-weight="bold">{html.escape(title)}</text>']
    for (pid, tid), i in row_of.items():
        y = TOP + i * ROW_HEIGHT
        if i % 2 == 0:
            out.append(f'<rect x="0" y="{y - 3}" width="{width}" height="{ROW_HEIGHT}" fill="#f5f5f5"/>')
        label = f'{processes.get(pid, pid)} {threads.get((pid, tid), tid)}'
        out.append(f'<text x="8" y="{y + BAR_HEIGHT - 4}">{html.escape(str(label))}</text>')
    methods = {}
    for e in sorted(events, key=lambda e: e["ts"]):
        y = TOP + row_of[(e["pid"], e["tid"])] * ROW_HEIGHT
        x = LABEL_WIDTH + (e["ts"] - t0) * scale
        out.append(bar(e, x, y, e["dur"] * scale, colour_of(e, methods)))
    out += legend(methods, width)
    out += axis(TOP + len(rows) * ROW_HEIGHT + 4, LABEL_WIDTH, scale, t0, t1)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a Chrome trace file written by zringctl trace --out")
    p.add_argument("out", help="the SVG file to write")
    p.add_argument("--width", type=int, default=1200, help="picture width in pixels (default 1200)")
    p.add_argument("--title", default="zringctl trace", help="the picture's title")
    a = p.parse_args()
    processes, threads, events = read_trace(a.trace)
    svg = render(processes, threads, events, a.width, a.title)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(svg)
    print(f"trace_svg: {len(events)} events of {len(processes)} nodes -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
