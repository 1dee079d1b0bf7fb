"""The test gradients of tests/support/reference.cpp (make_values,
make_gradients), computed bit for bit in numpy, so Python and C++ clients of
one ring can be handed the same tensors."""

import numpy as np

_MASK = (1 << 64) - 1


def make_values(seed, n):
    """float32 values of varied magnitude and sign, as reference.cpp makes them."""
    with np.errstate(over="ignore"):
        state = np.uint64((seed * 0x2545F4914F6CDD1D + 1) & _MASK)
        steps = np.arange(1, n + 1, dtype=np.uint64)
        z = state + steps * np.uint64(0x9E3779B97F4A7C15)  # splitmix64's state after each call
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) / 9007199254740992.0
    scale = 0.5 + (np.arange(n) % 97).astype(np.float64) / 50.0
    return ((2 * u - 1) * scale).astype(np.float32)


def make_gradients(seed, round_, rank, sizes):
    """rank's tensors t000, t001, ... of the given sizes for one round."""
    out = {}
    for t, n in enumerate(sizes):
        s = (seed ^ ((round_ * 0x100000001B3) & _MASK) ^ ((rank * 0x9E3779B1) & _MASK) ^ (t << 40)) & _MASK
        out[f"t{t:03d}"] = make_values(s, n)
    return out
