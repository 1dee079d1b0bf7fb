"""What the chaos soak's clients all-reduce, and the exact answer.

Every rank's tensors for a round come from (seed, round, rank, method,
shape set) alone, so the driver can rebuild all of them and compute the
average independently of zring, in float64 from the inputs. The inputs are
chosen so that each method's promise (docs/aggregation.md) makes the result
exact, bit for bit, whatever order zring sums in:

- none, fp16: small integers; every partial sum is an integer that float32
  (and fp16, for its per-hop rounding) holds exactly, and the world size is
  a power of two, so the average is exact too;
- quant:B: values on a grid scale * (base + j), j in 0 .. 2^B - 1, with
  j = 0 and j = 2^B - 1 at the start of every 4096-value block of every
  rank, so the grid of every block (shared or a rank's own) is exactly that
  grid and every value encodes without error;
- sign: values +-2^e with one e per tensor, so the block scale (mean |x|) is
  exactly 2^e and every value decodes to itself;
- topk:R%, ef:topk:R%: on each rank exactly k = round(R% of n) values of
  magnitude about 2^16 and small integers elsewhere, so the k kept are known
  whatever the tie-breaking; with error feedback the driver follows each
  rank's residual (the values not sent) and adds it back, as zringd does.
"""

import hashlib

import numpy as np

BLOCK = 4096   # the block of quantization and sign (lib/codec/affine_blocks.hpp)
BIG = 1 << 16  # magnitude of the values top-k must keep

# Tensor names and sizes of a round. Sizes are multiples of 100 (so R% of
# them is no rounding question) and never 1 more than a multiple of 4096 (a
# one-value block could not hold both ends of the grid). "large" is over
# 256 KiB: it goes through the shared buffer, staged.
SHAPE_SETS = {
    "tiny": {"g": 100},
    "small": {"a": 1000, "b": 2500},
    "medium": {"a": 300, "b": 20000, "c": 7000},
    "large": {"a": 1000, "big": 300000},
}

METHODS = ("none", "fp16", "quant:8", "quant:4", "sign", "topk:1%", "ef:topk:1%")


def base_of(method):
    return method[3:] if method.startswith("ef:") else method


def has_feedback(method):
    return method.startswith("ef:")


def kept_for(method, n):
    """How many values top-k keeps of n: the nearest integer to R% of n, at least 1."""
    text = base_of(method)[len("topk:"):]
    if text.endswith("%"):
        return max(1, int(np.floor(float(text[:-1]) / 100.0 * n + 0.5)))
    return min(int(text), n)


def _rng(*keys):
    return np.random.default_rng(np.random.SeedSequence([int(k) & 0xFFFFFFFF for k in keys]))


def _quant_tensor(seed, round_, t, rank, n, bits):
    shared = _rng(seed, round_, t, 1)
    scale = 2.0 ** int(shared.integers(-6, 7))
    base = int(shared.integers(-300, 101))
    top = (1 << bits) - 1
    j = _rng(seed, round_, t, 2, rank).integers(0, top + 1, n)
    j[0::BLOCK] = 0
    j[1::BLOCK] = top
    return ((base + j) * scale).astype(np.float32)


def _sign_tensor(seed, round_, t, rank, n):
    magnitude = 2.0 ** int(_rng(seed, round_, t, 3).integers(-8, 9))
    signs = _rng(seed, round_, t, 4, rank).integers(0, 2, n) * 2 - 1
    return (signs * magnitude).astype(np.float32)


def _topk_tensor(seed, round_, t, rank, n, k):
    rng = _rng(seed, round_, t, 5, rank)
    values = rng.integers(-8, 9, n).astype(np.float64)
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, size=k, replace=False)] = True
    big = BIG + rng.integers(0, 1 << 12, k)
    values[mask] = big * (rng.integers(0, 2, k) * 2 - 1)
    return values.astype(np.float32), mask


def make_inputs(seed, round_, rank, method, shape_set):
    """rank's tensors for the round (name -> float32 array) and, for top-k,
    which values it must keep (name -> bool array; None otherwise)."""
    base = base_of(method)
    tensors, masks = {}, {}
    for t, (name, n) in enumerate(sorted(SHAPE_SETS[shape_set].items())):
        if base == "none":
            tensors[name] = _rng(seed, round_, t, 6, rank).integers(-1000, 1001, n).astype(np.float32)
        elif base in ("fp16", "bf16"):
            tensors[name] = _rng(seed, round_, t, 7, rank).integers(-16, 17, n).astype(np.float32)
        elif base.startswith("quant:"):
            tensors[name] = _quant_tensor(seed, round_, t, rank, n, int(base[len("quant:"):]))
        elif base == "sign":
            tensors[name] = _sign_tensor(seed, round_, t, rank, n)
        elif base.startswith("topk:"):
            tensors[name], masks[name] = _topk_tensor(seed, round_, t, rank, n, kept_for(method, n))
        else:
            raise ValueError(f"the chaos soak has no exact inputs for method {method!r}")
    return tensors, (masks if masks else None)


class ToolError(Exception):
    """The soak's own assumptions broke (not a zring defect)."""


def _exact_average(total, world):
    average = total / world
    as_float = average.astype(np.float32)
    if not np.array_equal(as_float.astype(np.float64), average):
        raise ToolError("a reference average is not exactly representable in float32")
    return as_float


def reference(method, inputs, masks, residuals=None):
    """The exact averages of one round, given every rank's inputs (a list in
    rank order), their top-k masks and, with error feedback, every rank's
    residual before the op (a list of dicts, or None for zeros). Returns
    (averages, the residuals after the op if every rank succeeded)."""
    world = len(inputs)
    names = sorted(inputs[0])
    if masks is None:
        return {n: _exact_average(sum(r[n].astype(np.float64) for r in inputs), world)
                for n in names}, None
    before = residuals if residuals is not None else [None] * world
    # Residuals of names this op does not have stay; one of another size
    # counts as zero (lib/codec/error_feedback.cpp).
    averages, after = {}, [dict(b or {}) for b in before]
    for name in names:
        total = np.zeros(inputs[0][name].size, dtype=np.float64)
        for r in range(world):
            x = inputs[r][name].astype(np.float64)
            e = (before[r] or {}).get(name)
            if e is not None and e.size == x.size:
                x = x + e
            keep = masks[r][name]
            if np.abs(x[keep]).min() <= np.abs(x[~keep]).max(initial=0.0):
                raise ToolError("a residual grew into the values top-k keeps: the kept set is ambiguous")
            total += np.where(keep, x, 0.0)
            after[r][name] = np.where(keep, 0.0, x)
        averages[name] = _exact_average(total, world)
    return averages, after


def digest(tensors):
    """A digest of the float32 bits of tensors, in name order."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(np.ascontiguousarray(tensors[name], dtype=np.float32).tobytes())
    return h.hexdigest()


SHAPE_WEIGHTS = {"tiny": 2, "small": 4, "medium": 2, "large": 1}
APIS = ("copy", "in_place", "shared")


def step_plan(seed, step, methods, block=40):
    """What every rank all-reduces at a step of the free-running loop: the
    same on every rank (it depends on seed and step only). The method
    changes every `block` steps."""
    methods = sorted(methods)
    method = methods[int(_rng(seed, step // block, 8).integers(len(methods)))]
    rng = _rng(seed, step, 9)
    names = list(SHAPE_WEIGHTS)
    weights = np.array(list(SHAPE_WEIGHTS.values()), dtype=float)
    shapes = names[int(rng.choice(len(names), p=weights / weights.sum()))]
    return {"method": method, "shapes": shapes, "api": APIS[int(rng.integers(len(APIS)))]}
