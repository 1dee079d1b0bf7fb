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


@pytest.fixture
def gloo_world_of_one(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_ddp_hook_in_one_process_equals_plain_training(gloo_world_of_one):
    torch.manual_seed(3)
    plain = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    hooked = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    hooked.load_state_dict(plain.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(hooked)
    state = zring.torch.HookState(allreduce=zring.CompressedAllReduce("none", 1), model=ddp)
    ddp.register_comm_hook(state, zring.torch.comm_hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (plain, ddp)]
    x, y = torch.randn(10, 6), torch.randn(10, 2)
    for _ in range(3):
        for model, opt in zip((plain, ddp), opts):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    for a, b in zip(plain.parameters(), hooked.parameters()):
        assert torch.equal(a, b)
    assert state.traffic.ops >= 3
    state.close()


def test_ddp_hook_refuses_a_ring_of_another_size(gloo_world_of_one, local_ring):
    ring = local_ring(2)
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 1))
    state = zring.torch.HookState(ring.ipc(0), "none", model=ddp)
    ddp.register_comm_hook(state, zring.torch.comm_hook)
    with pytest.raises(Exception) as caught:
        ddp(torch.randn(4, 3)).sum().backward()
    assert "DDP's process group has 1 ranks but the zring ring has 2" in str(caught.value)
    state.close()
