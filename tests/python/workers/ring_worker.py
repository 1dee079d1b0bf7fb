"""A training process stand-in driven from Python, the twin of ring_client.

    ring_worker.py ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT INPUT_KIND

Connects to its zringd and for each round all-reduces the same gradients
ring_client (tests/integration) makes, gradients.make_gradients(SEED, round,
rank, SIZES), appending the result's float32 bytes (tensors in name order) to
OUT, exactly as ring_client does. INPUT_KIND says how the tensors are
handed over: to all_reduce as numpy, torch, or strided (non-contiguous numpy
views); to all_reduce_in_place as in_place (numpy), in_place_strided (numpy
views of every other element), in_place_torch_strided (torch views of every
other element); in one buffer to all_reduce_in_place_packed (packed); or
written through the views of one zring.SharedTensors reduced in place
(shared). The in-place kinds write what the arrays hold afterwards, and check
that the elements in between were left alone; shared also writes
"zero_copy=<0|1> aliased=<0|1>" to OUT.txt (whether the SharedTensors were in
zringd's buffer at every op, and its views in its memory). On a zring.Error it
writes "ERROR <kind>: <message>" to OUT.err and exits 3.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import zring  # noqa: E402
from gradients import make_gradients  # noqa: E402


def as_kind(tensors, kind):
    if kind == "torch":
        import torch

        return {name: torch.from_numpy(v) for name, v in tensors.items()}
    if kind == "strided":
        out = {}
        for name, v in tensors.items():
            wide = np.zeros(2 * v.size, dtype=np.float32)
            wide[::2] = v
            out[name] = wide[::2]  # every other element: a non-contiguous view
            assert not out[name].flags.c_contiguous or v.size <= 1
        return out
    return tensors


def every_other(v, torch_kind):
    """A view of every other element of a zero-filled buffer twice v's size,
    holding v, and the buffer."""
    if torch_kind:
        import torch

        wide = torch.zeros(2 * v.size)
        wide[::2] = torch.from_numpy(v)
        return wide[::2], wide
    wide = np.zeros(2 * v.size, dtype=np.float32)
    wide[::2] = v
    return wide[::2], wide


def reduce_in_place(ar, grads, kind):
    """The averages, by all_reduce_in_place of the kind's arrays."""
    if kind == "in_place":
        tensors = {name: v.copy() for name, v in grads.items()}
        ar.all_reduce_in_place(tensors)
        return tensors
    views, wides = {}, {}
    for name, v in grads.items():
        views[name], wides[name] = every_other(v, kind == "in_place_torch_strided")
    ar.all_reduce_in_place(views)
    for name, wide in wides.items():
        assert not np.asarray(wide[1::2]).any(), f"{name}: the elements in between were written"
    return {name: np.asarray(v) for name, v in views.items()}


def reduce_packed(ar, grads):
    names = sorted(grads)
    buffer = np.concatenate([grads[name] for name in names]) if names else np.zeros(0, np.float32)
    ar.all_reduce_in_place_packed(buffer, [(name, grads[name].shape) for name in names])
    out, at = {}, 0
    for name in names:
        out[name] = buffer[at:at + grads[name].size]
        at += grads[name].size
    return out


class SharedRounds:
    """The gradients written through the views of one SharedTensors, reduced in place."""

    def __init__(self, ar, sizes):
        self.shared = ar.make_shared_tensors({f"t{t:03d}": (n,) for t, n in enumerate(sizes)})
        self.views = {name: self.shared[name] for name in self.shared.names}
        self.zero_copy = True
        self.aliased = all(np.shares_memory(v, self.shared.values) for v in self.views.values())

    def reduce(self, ar, grads):
        for name, v in grads.items():
            self.views[name][...] = v
        self.zero_copy = self.zero_copy and self.shared.zero_copy
        ar.all_reduce_in_place(self.shared)
        return self.views


def main():
    endpoint, local_rank, method, seed, rounds, sizes, out, kind = sys.argv[1:9]
    sizes = [] if sizes == "-" else [int(s) for s in sizes.split(",")]
    try:
        with zring.CompressedAllReduce.connect(endpoint, method, local_rank=int(local_rank),
                                               timeout_ms=20000) as ar, open(out, "wb") as f:
            shared = SharedRounds(ar, sizes) if kind == "shared" else None
            for round_ in range(int(rounds)):
                grads = make_gradients(int(seed), round_, ar.rank, sizes)
                if shared is not None:
                    result = shared.reduce(ar, grads)
                elif kind == "packed":
                    result = reduce_packed(ar, grads)
                elif kind.startswith("in_place"):
                    result = reduce_in_place(ar, grads, kind)
                else:
                    result = ar.all_reduce(as_kind(grads, kind))
                for name in sorted(result):
                    value = result[name]
                    value = value.numpy() if kind == "torch" else value
                    assert value.shape == grads[name].shape and value.dtype == np.float32
                    f.write(value.tobytes())
                f.flush()
            if shared is not None:
                with open(out + ".txt", "w") as t:
                    t.write(f"zero_copy={int(shared.zero_copy)} aliased={int(shared.aliased)}\n")
    except zring.Error as e:
        with open(out + ".err", "w") as f:
            f.write(f"ERROR {e.kind}: {e.message}")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
