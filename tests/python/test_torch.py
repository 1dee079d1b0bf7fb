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
    reports = [dict(item.split("=") for item in read(o + ".txt").split()) for o in outs]
    return params, reports


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
    params, reports = train(processes, ring, tmp_path, method, 6)
    assert params[0].size == initial_parameters().size
    assert params[0].tobytes() == params[1].tobytes(), "workers' parameters differ"
    assert not np.array_equal(params[0], initial_parameters()), "nothing was trained"
    for report in reports:
        assert int(report["traffic"]) > 0, "no bytes went through zring"
        # CPU buckets are reduced where they are, never copied.
        assert int(report["in_place"]) >= 6 and report["copied"] == "0", report


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
    params, reports = train(processes, ring, tmp_path, "ef:topk:1%", 6, "--optimizer")
    assert params[0].tobytes() == params[1].tobytes()
    assert not np.array_equal(params[0], initial_parameters())
    for report in reports:
        # The gradients stayed in the buffer zringd reads, all along.
        assert report["grads_in_shared"] == "1" and report["zero_copy"] == "1", report


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


def grads_lie_in(shared, params):
    values = shared.values
    start, end = values.ctypes.data, values.ctypes.data + values.nbytes
    return [start <= p.grad.data_ptr() < end for p in params]


def small_net(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def test_optimizer_wrapper_keeps_the_gradients_in_the_shared_buffer():
    plain, wrapped_net = small_net(5), small_net(5)
    frozen = wrapped_net[2].bias
    frozen.requires_grad_(False)
    plain[2].bias.requires_grad_(False)
    opt = zring.torch.DistributedOptimizer(
        torch.optim.SGD(wrapped_net.parameters(), lr=0.1, momentum=0.5),
        wrapped_net.named_parameters(), allreduce=zring.CompressedAllReduce("none", 1))
    reference = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.5)
    trained = [p for p in wrapped_net.parameters() if p.requires_grad]
    assert opt.shared.names == ["0.bias", "0.weight", "2.weight"] and frozen.grad is None
    assert all(grads_lie_in(opt.shared, trained)), "p.grad is not a view of its slot"
    slots = [p.grad.data_ptr() for p in trained]
    x = torch.randn(6, 5)
    for step in range(5):
        set_to_none = step == 2
        for net, o in ((plain, reference), (wrapped_net, opt)):
            o.zero_grad(set_to_none=set_to_none)
            if set_to_none:
                assert all(p.grad is None for p in net.parameters())
            elif net is wrapped_net:
                assert [p.grad.data_ptr() for p in trained] == slots and not opt.shared.values.any()
            net(x).square().sum().backward()
            if step == 3:  # an assigned gradient is taken as it is
                net[0].bias.grad = torch.full((7,), 0.25)
            o.step()
        assert [p.grad.data_ptr() for p in trained] == slots, f"step {step}: not back in the slots"
        for a, b in zip(plain.parameters(), wrapped_net.parameters()):
            assert torch.equal(a, b), f"step {step}"
    assert opt.traffic.ops == 5


def test_optimizer_wrapper_averages_what_all_reduce_would():
    plain, wrapped_net = small_net(6), small_net(6)
    method = "ef:quant:4"
    opt = zring.torch.DistributedOptimizer(torch.optim.SGD(wrapped_net.parameters(), lr=0.1),
                                           wrapped_net.named_parameters(),
                                           allreduce=zring.CompressedAllReduce(method, 1))
    reference_ar = zring.CompressedAllReduce(method, 1)
    reference = torch.optim.SGD(plain.parameters(), lr=0.1)
    x = torch.randn(6, 5)
    for _ in range(3):
        opt.zero_grad()
        wrapped_net(x).square().sum().backward()
        opt.step()
        reference.zero_grad()
        plain(x).square().sum().backward()
        averaged = reference_ar.all_reduce({n: p.grad for n, p in plain.named_parameters()})
        with torch.no_grad():
            for n, p in plain.named_parameters():
                assert not torch.equal(p.grad, averaged[n]), "the method changed nothing"
                p.grad.copy_(averaged[n])
        reference.step()
        for a, b in zip(plain.parameters(), wrapped_net.parameters()):
            assert torch.equal(a, b)


def test_optimizer_wrapper_refuses_parameters_that_are_not_float32():
    net = torch.nn.Linear(3, 2).double()
    with pytest.raises(zring.Error) as caught:
        zring.torch.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                         net.named_parameters(),
                                         allreduce=zring.CompressedAllReduce("none", 1))
    assert caught.value.kind == "invalid_argument" and "torch.float64" in caught.value.message
    assert "'weight'" in caught.value.message


def test_ddp_hook_reduces_buckets_in_place_with_the_bits_of_per_parameter_all_reduce(
        gloo_world_of_one):
    method = "ef:topk:10%"
    hooked, plain = small_net(8), small_net(8)
    ddp = torch.nn.parallel.DistributedDataParallel(hooked, bucket_cap_mb=0.0002)
    state = zring.torch.HookState(allreduce=zring.CompressedAllReduce(method, 1), model=ddp)
    ddp.register_comm_hook(state, zring.torch.comm_hook)
    reference_ar = zring.CompressedAllReduce(method, 1)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (ddp, plain)]
    x, y = torch.randn(10, 5), torch.randn(10, 3)
    for _ in range(3):
        for o in opts:
            o.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        torch.nn.functional.mse_loss(plain(x), y).backward()
        averaged = reference_ar.all_reduce({n: p.grad for n, p in plain.named_parameters()})
        with torch.no_grad():
            for n, p in plain.named_parameters():
                p.grad.copy_(averaged[n])
        for o in opts:
            o.step()
        for a, b in zip(plain.parameters(), hooked.parameters()):
            assert torch.equal(a, b)
    assert state.buckets_in_place >= 3 and state.buckets_copied == 0
    state.close()


class FakeBucket:
    """What the hook reads of a torch.distributed.GradBucket."""

    def __init__(self, buffer, params):
        self._buffer, self._params = buffer, params
        self._grads, at = [], 0
        for p in params:
            self._grads.append(buffer[at:at + p.numel()].view(p.shape)
                               if buffer.is_contiguous() else buffer[at:at + p.numel()])
            at += p.numel()

    def buffer(self):
        return self._buffer

    def gradients(self):
        return self._grads

    def parameters(self):
        return self._params

    def index(self):
        return 0


def test_ddp_hook_copies_a_bucket_it_cannot_reduce_in_place():
    params = [torch.nn.Parameter(torch.zeros(4)), torch.nn.Parameter(torch.zeros(6))]
    grads = torch.from_numpy(np.random.default_rng(1).standard_normal(10).astype(np.float32))
    expected = zring.CompressedAllReduce("topk:2", 1).all_reduce(
        {"param0": grads[:4], "param1": grads[4:]})
    for contiguous in (True, False):
        state = zring.torch.HookState(allreduce=zring.CompressedAllReduce("topk:2", 1))
        buffer = grads.clone() if contiguous else torch.zeros(20)[::2]
        if not contiguous:
            buffer.copy_(grads)
        result = state.reduce_bucket(FakeBucket(buffer, params)).wait()
        assert result is buffer
        assert torch.equal(result[:4], expected["param0"]) and torch.equal(result[4:], expected["param1"])
        assert (state.buckets_in_place, state.buckets_copied) == ((1, 0) if contiguous else (0, 1))
        state.close()
