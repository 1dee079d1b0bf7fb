"""zring.torch: the DDP communication hook on a two-worker DDP model (gloo
for DDP itself, zring for the gradients) and the optimizer wrapper: the
parameters stay bit-identical across workers, they train, and misuse is a
clear zring.Error."""

import numpy as np
import pytest
import torch

import zring
import zring.torch
from conftest import read, wait_all


def train(processes, ring, tmp_path, method, steps, *extra):
    outs, logs, children = [], [], []
    store = tmp_path / "gloo-store"
    for r in range(2):
        out = str(tmp_path / f"worker{r}")
        outs.append(out)
        logs.append(out + ".log")
        children.append(processes.python(
            "ddp_worker.py", [r, 2, store, ring.ipc(r), method, steps, out, *extra], out + ".log",
            {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}))
    statuses = wait_all(children, logs)
    for r in range(2):
        assert statuses[r] == 0, f"worker {r}:\n{read(logs[r])}"
    params = [np.frombuffer(read(o, "rb"), dtype=np.float32) for o in outs]
    traffic = [int(read(o + ".txt").split("=")[1]) for o in outs]
    return params, traffic


def initial_parameters():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "workers", "ddp_worker.py")
    spec = importlib.util.spec_from_file_location("ddp_worker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return torch.cat([p.detach().reshape(-1) for p in module.model().parameters()]).numpy()


@pytest.mark.parametrize("method", ["none", "ef:topk:10%", "ef:sign"])
def test_ddp_hook_keeps_workers_identical(method, local_ring, processes, tmp_path):
    ring = local_ring(2)
    params, traffic = train(processes, ring, tmp_path, method, 6)
    assert params[0].size == initial_parameters().size
    assert params[0].tobytes() == params[1].tobytes(), "workers' parameters differ"
    assert not np.array_equal(params[0], initial_parameters()), "nothing was trained"
    assert all(t > 0 for t in traffic), "no bytes went through zring"


def test_ddp_hook_matches_the_optimizer_wrapper_for_none(local_ring, processes, tmp_path):
    # The same data and weights: averaging through the hook or in step() must agree
    # (up to float summation order: same method, same ring, per-parameter tensors).
    ring = local_ring(2)
    (tmp_path / "hook").mkdir()
    (tmp_path / "opt").mkdir()
    hook, _ = train(processes, ring, tmp_path / "hook", "none", 4)
    wrapped, _ = train(processes, ring, tmp_path / "opt", "none", 4, "--optimizer")
    assert wrapped[0].tobytes() == wrapped[1].tobytes()
    np.testing.assert_allclose(hook[0], wrapped[0], rtol=1e-5, atol=1e-6)


def test_optimizer_wrapper_keeps_workers_identical_with_error_feedback(local_ring, processes, tmp_path):
    ring = local_ring(2)
    params, _ = train(processes, ring, tmp_path, "ef:topk:1%", 6, "--optimizer")
    assert params[0].tobytes() == params[1].tobytes()
    assert not np.array_equal(params[0], initial_parameters())


def test_optimizer_wrapper_standalone_world_size_1_is_plain_sgd():
    torch.manual_seed(0)
    a = torch.nn.Linear(4, 3)
    b = torch.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    plain = torch.optim.SGD(a.parameters(), lr=0.1)
    wrapped = zring.torch.DistributedOptimizer(torch.optim.SGD(b.parameters(), lr=0.1),
                                               b.named_parameters(),
                                               allreduce=zring.CompressedAllReduce("none", 1))
    x = torch.randn(8, 4)
    for model, opt in ((a, plain), (b, wrapped)):
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    assert wrapped.traffic.ops == 1 and wrapped.param_groups[0]["lr"] == 0.1


def test_misuse_is_a_clear_error(tmp_path):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(zring.Error) as caught:
        zring.torch.HookState(f"ipc://{tmp_path}/no-daemon.sock", "ef:sign")
    assert caught.value.kind == "connection_failed" and "zringd" in caught.value.message
    with pytest.raises(zring.Error) as caught:
        zring.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         endpoint=f"ipc://{tmp_path}/no-daemon.sock")
    assert caught.value.kind == "connection_failed"
    with pytest.raises(zring.Error, match="endpoint"):
        zring.torch.HookState(None, "none")
    with pytest.raises(zring.Error) as caught:
        zring.torch.comm_hook(object(), None)
    assert caught.value.kind == "invalid_argument" and "HookState" in caught.value.message
    with pytest.raises(zring.Error, match="no_communicator"):
        zring.torch.HookState(allreduce=zring.CompressedAllReduce("none", 2))
    with pytest.raises(zring.Error, match="does not name"):
        other = torch.nn.Linear(2, 2)
        zring.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         other.named_parameters(),
                                         allreduce=zring.CompressedAllReduce("none", 1))
    with pytest.raises(zring.Error, match="torch.optim.Optimizer"):
        zring.torch.DistributedOptimizer(model, allreduce=zring.CompressedAllReduce("none", 1))
