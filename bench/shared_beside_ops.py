#!/usr/bin/env python3
"""SharedTensors beside ops of other tensors on the same connection.

A training process has one connection per local rank (a second one would
take the rank over), so its SharedTensors (a DistributedOptimizer's
gradients) share the connection with every other op of the job: a loss
averaged each step, a broadcast of the weights. This times, on a ring of
real zringd processes on 127.0.0.1 (one rank per node, one process each):

  small: a one-float all_reduce of a dict, back to back, on connections
         without SharedTensors and on connections that made some first
         (1 Mi floats); the ratio of the two medians;
  large: all_reduce_in_place of 16 Mi-float SharedTensors, before and after
         one all_reduce_in_place of 1 Mi floats of another dict; the ratio,
         and whether the SharedTensors are still zero-copy.

    bench/shared_beside_ops.py --build-dir build-bench [--nodes 4] [--iters 3000]

The times of an op are the slowest rank's median.
"""
import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time


def small_ops(endpoint, with_shared, iters, out):
    import numpy as np
    import zring
    ar = zring.CompressedAllReduce.connect(endpoint, "none", timeout_ms=60000)
    shared = ar.make_shared_tensors({"g": (1 << 20,)}) if with_shared else None
    if shared is not None:
        ar.all_reduce_in_place(shared)
    loss = {"loss": np.array([1.0], dtype=np.float32)}
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        ar.all_reduce(loss)
        times.append(time.perf_counter() - start)
    out.put(statistics.median(times[iters // 10:]))
    ar.close()


def large_ops(endpoint, iters, out):
    import numpy as np
    import zring
    ar = zring.CompressedAllReduce.connect(endpoint, "none", timeout_ms=60000)
    shared = ar.make_shared_tensors({"g": (16 << 20,)})

    def timed():
        times = []
        for _ in range(iters):
            shared["g"][...] = 1.0  # untimed, as a backward pass would write them
            start = time.perf_counter()
            ar.all_reduce_in_place(shared)
            times.append(time.perf_counter() - start)
        return statistics.median(times[2:])

    before = timed()
    ar.all_reduce_in_place({"other": np.ones(1 << 20, dtype=np.float32)})
    after = timed()
    out.put((before, after, shared.zero_copy))
    ar.close()


def on_every_node(ring, target, *args):
    out = mp.Queue()
    procs = [mp.Process(target=target, args=(ring.ipc(n), *args, out)) for n in range(ring.nodes)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default="build-bench")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--iters", type=int, default=3000, help="small ops per rank and variant")
    parser.add_argument("--large-iters", type=int, default=12)
    args = parser.parse_args()
    build = os.path.abspath(args.build_dir)
    sys.path.insert(0, os.path.join(build, "python"))
    from zring.local_ring import LocalRing

    with LocalRing(os.path.join(build, "daemon", "zringd"), nodes=args.nodes) as ring:
        plain = max(on_every_node(ring, small_ops, False, args.iters))
        beside = max(on_every_node(ring, small_ops, True, args.iters))
        print(f"small: one-float all_reduce {plain * 1e3:.3f} ms, with SharedTensors made "
              f"{beside * 1e3:.3f} ms ({beside / plain:.2f}x)", flush=True)
        large = on_every_node(ring, large_ops, args.large_iters)
        before = max(r[0] for r in large)
        after = max(r[1] for r in large)
        zero_copy = all(r[2] for r in large)
        print(f"large: SharedTensors of 16 Mi floats {before * 1e3:.1f} ms, after an op of "
              f"other tensors {after * 1e3:.1f} ms ({after / before:.2f}x), "
              f"zero_copy {zero_copy}", flush=True)


if __name__ == "__main__":
    main()
