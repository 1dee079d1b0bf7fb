"""A PyTorch DDP job launched with torchrun whose gradients go through zring.

On every node, next to that node's zringd (a ring file whose local_ranks is
the --nproc_per_node below):

    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=2 \\
             --master_addr=10.0.0.1 --master_port=29500 \\
             examples/torchrun/train.py --method ef:topk:1%
    # on the second node: --node_rank=1, the rest the same

torchrun's rendezvous gives the gloo process group its ranks (DDP uses it to
broadcast the initial weights); zring averages the gradients. zring takes
the local rank from torchrun's LOCAL_RANK and the endpoint of this node's
zringd from ZRING_ENDPOINT, else from the ring file (ZRING_CONFIG, default
/etc/zring/zring.yaml; ZRING_NODE names this node when the file's `self`
does not): the one zring line is zring.torch.register_comm_hook below.

Every rank trains the same small MLP on data of its own (a synthetic
10-class task) and rank 0 prints the loss. With --out DIR, every rank writes
its final parameters (float32, in named_parameters order) to
DIR/rank<RANK>.bin and a line of key=value pairs to DIR/rank<RANK>.txt.
examples/torchrun/run.sh runs it on a 2-node ring on this machine.
"""

import argparse
import os

import torch
import torch.distributed as dist

import zring.torch


def model():
    torch.manual_seed(0)  # the same weights on every rank (DDP broadcasts rank 0's anyway)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def batch(generator, teacher, size=64):
    x = torch.randn(size, 32, generator=generator)
    return x, (x @ teacher).argmax(dim=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", default="ef:topk:10%", help="zring compression method")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--out", help="directory for each rank's final parameters")
    args = parser.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # torchrun's rendezvous: RANK, WORLD_SIZE, MASTER_ADDR, ...
    rank, world = dist.get_rank(), dist.get_world_size()
    net = torch.nn.parallel.DistributedDataParallel(model())
    state = zring.torch.register_comm_hook(net, args.method)  # endpoint, local rank: from the environment
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    teacher = torch.randn(32, 10, generator=torch.Generator().manual_seed(1))
    data = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
    for step in range(args.steps):
        x, y = batch(data, teacher)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and (step == 0 or step + 1 == args.steps or (step + 1) % 10 == 0):
            print(f"step {step + 1:4d}  loss {loss.item():.4f}", flush=True)

    ar = state.allreduce
    if rank == 0:
        print(f"world size {world} (zring: {ar.world_size}), method {args.method}, "
              f"{state.traffic.wire_bytes} bytes on the ring in {args.steps} steps", flush=True)
    if args.out:
        params = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
        with open(os.path.join(args.out, f"rank{rank}.bin"), "wb") as f:
            f.write(params.numpy().tobytes())
        with open(os.path.join(args.out, f"rank{rank}.txt"), "w") as f:
            f.write(f"rank={rank} world={world} local_rank={os.environ['LOCAL_RANK']} "
                    f"zring_rank={ar.rank} zring_world={ar.world_size} "
                    f"in_place={state.buckets_in_place} copied={state.buckets_copied} "
                    f"traffic={state.traffic.wire_bytes}\n")
    state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
