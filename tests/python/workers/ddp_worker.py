"""One rank of a two-process DDP job whose gradients go through zring.

    ddp_worker.py RANK WORLD STORE_FILE ENDPOINT METHOD STEPS OUT [--optimizer]

DDP (gloo process group) broadcasts the initial weights and buckets the
gradients; zring.torch.comm_hook averages them through the local zringd.
With --optimizer there is no DDP: zring.torch.DistributedOptimizer averages
the gradients in step(). Each rank trains on its own data; at the end the
parameters (float32, in named_parameters order) are written to OUT, and one
line of key=value pairs to OUT.txt: traffic=<wire bytes>, and with DDP
in_place=<buckets reduced in place> copied=<buckets copied>, with
--optimizer grads_in_shared=<0|1> (every p.grad in the optimizer's
SharedTensors at the end) zero_copy=<0|1> (those in zringd's buffer).
"""

import os
import sys

import torch
import torch.distributed as dist

import zring
import zring.torch


def model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))


def grads_in_shared(opt, net):
    values = opt.shared.values
    start, end = values.ctypes.data, values.ctypes.data + values.nbytes
    return all(start <= p.grad.data_ptr() < end for p in net.parameters())


def main():
    rank, world, store, endpoint, method, steps, out = sys.argv[1:8]
    rank, world, steps = int(rank), int(world), int(steps)
    use_optimizer = "--optimizer" in sys.argv[8:]
    torch.set_num_threads(1)
    net = model()
    if not use_optimizer:
        # Every rank but 0 starts from other weights: DDP's broadcast must fix that.
        if rank != 0:
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(0.5)
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
        net = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.004)
        state = zring.torch.HookState(endpoint, method, model=net)
        net.register_comm_hook(state, zring.torch.comm_hook)
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        report = lambda: (f"in_place={state.buckets_in_place} "  # noqa: E731
                          f"copied={state.buckets_copied}")
        traffic = lambda: state.traffic.wire_bytes  # noqa: E731
    else:
        opt = zring.torch.DistributedOptimizer(
            torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9), net.named_parameters(),
            endpoint=endpoint, method=method)
        traffic = lambda: opt.traffic.wire_bytes  # noqa: E731
        report = lambda: (f"grads_in_shared={int(grads_in_shared(opt, net))} "  # noqa: E731
                          f"zero_copy={int(opt.shared.zero_copy)}")
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 20, generator=data)
        y = torch.randint(0, 5, (16,), generator=data)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    params = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    with open(out, "wb") as f:
        f.write(params.numpy().tobytes())
    with open(out + ".txt", "w") as f:
        f.write(f"traffic={traffic()} {report()}\n")
    if not use_optimizer:
        dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    main()
