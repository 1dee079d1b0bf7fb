"""Line plots written as SVG by hand: no plotting library needed.

plot(path, title, series, x_label, y_label, log_x, log_y, x_ticks, hlines)
where series is a list of (label, [(x, y), ...], dashed).
"""

import math
from xml.sax.saxutils import escape

# Distinct colours (Okabe-Ito, then darker variants); peers are drawn dashed.
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000", "#7F7F7F", "#8C564B", "#1F3A93", "#117733"]

W, H = 900, 560
LEFT, RIGHT, TOP, BOTTOM = 80, 210, 50, 60


class _Axis:
    def __init__(self, lo, hi, log, pixels, flip):
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi <= lo:
            hi = lo + 1
        self.lo, self.hi, self.log, self.pixels, self.flip = lo, hi, log, pixels, flip

    def __call__(self, v):
        v = math.log10(v) if self.log else v
        f = (v - self.lo) / (self.hi - self.lo)
        return self.pixels[1] - f * (self.pixels[1] - self.pixels[0]) if self.flip else \
            self.pixels[0] + f * (self.pixels[1] - self.pixels[0])


def _log_ticks(lo, hi):
    ticks = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                ticks.append(v)
    return ticks


def _linear_step(hi):
    """A round tick step (1, 2 or 5 x 10^k) giving at most 6 steps up to hi."""
    step = 10 ** math.floor(math.log10(hi / 6)) if hi > 0 else 1
    for m in (1, 2, 5):
        if hi / (step * m) <= 6:
            return step * m
    return step * 10  # hi / 6 < 10 x step


def _fmt(v):
    if v == 0:
        return "0"
    if v >= 1000 or v < 0.01:
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"


def plot(path, title, series, x_label, y_label, log_x=True, log_y=True, x_ticks=None,
         hlines=()):
    points = [p for _, pts, _ in series for p in pts if p[1] and p[1] > 0]
    if not points:
        return False
    xs = [p[0] for p in points]
    ys = [p[1] for p in points] + [h[1] for h in hlines]
    y_lo, y_hi = min(ys), max(ys)
    if log_y:
        y_lo, y_hi = y_lo / 1.5, y_hi * 1.5
    else:
        y_step = _linear_step(y_hi * 1.1)
        y_lo, y_hi = 0, y_step * math.ceil(y_hi * 1.1 / y_step)
    x_lo, x_hi = min(xs), max(xs)
    if x_lo == x_hi:
        x_lo, x_hi = (x_lo / 2, x_hi * 2) if log_x else (x_lo - 1, x_hi + 1)
    ax = _Axis(x_lo, x_hi, log_x, (LEFT, W - RIGHT), False)
    ay = _Axis(y_lo, y_hi, log_y, (TOP, H - BOTTOM), True)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="24" text-anchor="middle" font-size="15">{escape(title)}</text>']
    y_ticks = _log_ticks(y_lo, y_hi) if log_y else \
        [y_step * i for i in range(round(y_hi / y_step) + 1)]
    for v in y_ticks:
        y = ay(v)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for v, text in (x_ticks or [(x, _fmt(x)) for x in sorted(set(xs))]):
        x = ax(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{H - BOTTOM}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">'
                   f'{escape(text)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}"'
               f' fill="none" stroke="#444"/>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 18}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text transform="translate(20,{(TOP + H - BOTTOM) / 2}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    for text, v in hlines:
        y = ay(v)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#c00" stroke-dasharray="2,3"/>')
        out.append(f'<text x="{LEFT + 4}" y="{y - 4:.1f}" fill="#c00">{escape(text)}</text>')
    for i, (lab, pts, dashed) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        pts = [(x, y) for x, y in pts if y and y > 0]
        if not pts:
            continue
        coords = " ".join(f"{ax(x):.1f},{ay(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="7,4"' if dashed else ""
        width = 3 if dashed else 1.8
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" '
                   f'stroke-width="{width}"{dash}/>')
        for x, y in pts:
            out.append(f'<circle cx="{ax(x):.1f}" cy="{ay(y):.1f}" r="2.5" fill="{colour}"/>')
        ly = TOP + 10 + 18 * i
        out.append(f'<line x1="{W - RIGHT + 12}" x2="{W - RIGHT + 40}" y1="{ly}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="{width}"{dash}/>')
        out.append(f'<text x="{W - RIGHT + 46}" y="{ly + 4}">{escape(lab)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True
