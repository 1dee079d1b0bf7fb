"""Runs train.py as a 2-node torchrun job on this machine: a ring of two
zringd (two local ranks each) on 127.0.0.1 and one torchrun per "node"
(--nnodes=2 --node_rank=N --nproc_per_node=2, one shared rendezvous), world
size 4. Node 0 finds its daemon through ZRING_ENDPOINT, node 1 through the
ring file (ZRING_CONFIG and ZRING_NODE), as on real nodes.

    local.py --zringd build/daemon/zringd [--method M] [--steps N]

Prints node 0's output (rank 0 reports the loss) and whether the four ranks
ended with bit-identical weights; exits non-zero when a rank failed or they
differ. Ctrl-C or a failure stops every process it started.
"""

import argparse
import os
import sys
import tempfile

from zring.local_ring import LocalRing, free_ports, spawn, stop

HERE = os.path.dirname(os.path.abspath(__file__))


def torchrun(node, port, args, out):
    """argv of node's torchrun: python -m torch.distributed.run is torchrun.
    --redirects/--tee 1 (stdout to a log file and the console): Debian 12's
    torchrun (torch 1.13 on Python 3.11) fails on its own default, 0."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={node}",
            "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
            "--redirects=1", "--tee=1", f"--log_dir={os.path.join(out, f'torchrun{node}')}",
            os.path.join(HERE, "train.py"), "--method", args.method, "--steps", str(args.steps),
            "--out", out]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zringd", required=True)
    parser.add_argument("--method", default="ef:topk:10%")
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="zring-torchrun-") as out, \
            LocalRing(args.zringd, nodes=2, local_ranks=2) as ring:
        port = free_ports(1)[0]
        base = {k: v for k, v in os.environ.items() if not k.startswith("ZRING_")}
        base.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        envs = [dict(base, ZRING_ENDPOINT=ring.ipc(0)),
                dict(base, ZRING_CONFIG=ring.config, ZRING_NODE=ring.name(1))]
        logs = [os.path.join(out, f"node{n}.log") for n in range(2)]
        jobs = [spawn(torchrun(n, port, args, out), logs[n], envs[n]) for n in range(2)]
        try:
            statuses = [job.wait() for job in jobs]
        finally:
            for job in jobs:
                stop(job)
        for n in range(2):
            if statuses[n] != 0 or n == 0:
                print(f"--- node {n} (torchrun exit status {statuses[n]}) ---")
                with open(logs[n], encoding="utf-8", errors="replace") as f:
                    print(f.read().rstrip())
        if any(statuses):
            return 1
        weights = []
        for rank in range(4):
            with open(os.path.join(out, f"rank{rank}.bin"), "rb") as f:
                weights.append(f.read())
        same = all(w == weights[0] for w in weights)
        print(f"4 ranks on 2 nodes: {'bit-identical' if same else 'DIFFERENT'} weights")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
