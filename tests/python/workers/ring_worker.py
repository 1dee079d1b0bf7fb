"""A training process stand-in driven from Python, the twin of ring_client.

    ring_worker.py ENDPOINT LOCAL_RANK METHOD SEED ROUNDS SIZES OUT INPUT_KIND

Connects to its zringd and for each round all-reduces the same gradients
ring_client (tests/integration) makes, gradients.make_gradients(SEED, round,
rank, SIZES), appending the result's float32 bytes (tensors in name order) to
OUT, exactly as ring_client does. INPUT_KIND says how the tensors are
handed over: numpy, torch, or strided (non-contiguous numpy views). On a
zring.Error it writes "ERROR <kind>: <message>" to OUT.err and exits 3.
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


def main():
    endpoint, local_rank, method, seed, rounds, sizes, out, kind = sys.argv[1:9]
    sizes = [] if sizes == "-" else [int(s) for s in sizes.split(",")]
    try:
        with zring.CompressedAllReduce.connect(endpoint, method, local_rank=int(local_rank),
                                               timeout_ms=20000) as ar, open(out, "wb") as f:
            for round_ in range(int(rounds)):
                grads = make_gradients(int(seed), round_, ar.rank, sizes)
                result = ar.all_reduce(as_kind(grads, kind))
                for name in sorted(result):
                    value = result[name]
                    value = value.numpy() if kind == "torch" else value
                    assert value.shape == grads[name].shape and value.dtype == np.float32
                    f.write(value.tobytes())
                f.flush()
    except zring.Error as e:
        with open(out + ".err", "w") as f:
            f.write(f"ERROR {e.kind}: {e.message}")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
