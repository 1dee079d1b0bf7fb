"""What is measured: sizes, methods and how many ops per size."""

import re

KIB = 1024
MIB = 1024 * 1024

# Every compression method of the README. threshold keeps |g| > T: the bench
# gradient is normal with sigma 1e-3, and P(|z| > 2.576) = 1%, so this T
# keeps about 1% of the values, like the other sparse methods.
THRESHOLD_1PCT = "threshold:0.002576"
ALL_METHODS = ["none", "fp16", "bf16", "quant:8", "quant:4", "sign", "topk:1%",
               "ef:topk:1%", "randomk:1%", THRESHOLD_1PCT]

# 4 B is one float: the latency point. Then 4 KiB .. 256 MiB by factors of 4.
DEFAULT_SIZES = [4] + [4 * KIB * 4 ** i for i in range(9)]
QUICK_SIZES = [4, 4 * KIB, 1 * MIB, 64 * MIB]
SCALING_SIZES = [64 * MIB]
SCALING_RANKS = [2, 3, 4, 6, 8]
# ResNet-50's 161 parameter tensors hold 25,557,032 floats (--fusion).
RESNET50_BYTES = 25557032 * 4


def parse_size(text):
    """'4', '4K', '4KiB', '256M', '1G' -> bytes (a whole number of floats)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(i?[bB])?\s*", text)
    if not m:
        raise ValueError(f"'{text}' is not a size (examples: 4, 4K, 64MiB)")
    n = int(m.group(1)) * {"": 1, "k": KIB, "m": MIB, "g": 1024 * MIB}[m.group(2).lower()]
    if n == 0 or n % 4:
        raise ValueError(f"size '{text}' is not a whole, positive number of float32 values")
    return n


def parse_sizes(text):
    return sorted({parse_size(t) for t in text.split(",") if t.strip()})


def parse_methods(text):
    methods = []
    for t in text.split(","):
        t = t.strip()
        if t == "threshold":        # the ~1% threshold of this gradient
            t = THRESHOLD_1PCT
        if t and t not in methods:
            methods.append(t)
    return methods


def format_size(n):
    for unit, scale in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def ops_for(size, quick=False):
    """(warm-up ops, timed ops) for one size.

    Small ops are cheap and noisy, so they get many; 64 MiB and up get a few,
    to keep the default run within ~15 minutes on two cores.
    """
    if size <= 4:
        return (20, 200) if not quick else (10, 100)
    if size <= 64 * KIB:
        return (10, 50) if not quick else (5, 20)
    if size <= 1 * MIB:
        return (5, 20) if not quick else (3, 10)
    if size <= 4 * MIB:
        return (3, 10)
    if size <= 16 * MIB:
        return (2, 8)
    if size <= 64 * MIB:  # fresh daemons' first ops of this size fault memory in: two warm-ups
        return (2, 7) if not quick else (2, 3)
    return (1, 4)


def plan_text(sizes, quick=False, warmup=None, iters=None):
    """The clients' --plan argument: BYTES:WARMUP:ITERS,..."""
    items = []
    for s in sizes:
        w, i = ops_for(s, quick)
        items.append(f"{s}:{w if warmup is None else warmup}:{i if iters is None else iters}")
    return ",".join(items)
