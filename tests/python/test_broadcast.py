"""CompressedAllReduce.broadcast on real local rings: numpy arrays and torch
tensors get root's bits in place (NaN payloads, -0.0 included), errors are
zring.Error of the right kind; and zring.torch.broadcast_state makes models
and optimizers that differ (one of them a fresh joiner that never stepped)
bit-identical to root's, after which training keeps them identical."""

import pickle

import numpy as np
import pytest
import torch

import zring
import zring.torch
from conftest import on_every_rank


def odd_tensors(rank):
    """Rank's tensors, each kind of caller memory, with bits arithmetic would
    not keep: a NaN whose payload names the rank, -0.0, a denormal."""
    rng = np.random.default_rng(100 + rank)
    small = rng.standard_normal(7).astype(np.float32)
    small[:3] = np.array([0x7FC00100 + rank, 0x80000000, 1 + rank], np.uint32).view(np.float32)
    large = rng.standard_normal((300, 301)).astype(np.float32)  # 361 KB: staged
    large[0, 0] = np.array([0xFF800001 + rank], np.uint32).view(np.float32)[0]
    return {
        "numpy": small,
        "strided": rng.standard_normal((6, 4)).astype(np.float32).T,  # gathered and scattered
        "torch": torch.from_numpy(large.copy()),
        "scalar": torch.tensor(float(rank)),
    }


def as_bytes(tensors):
    return {k: np.ascontiguousarray(np.asarray(v)).tobytes() for k, v in tensors.items()}


@pytest.mark.parametrize("nodes,local_ranks", [(3, 1), (2, 2)])
def test_every_rank_gets_roots_bits_in_place(nodes, local_ranks, local_ring):
    ring = local_ring(nodes, local_ranks)

    def work(ar):
        got = {}
        for root in range(ar.world_size):
            tensors = odd_tensors(ar.rank)
            kept = {k: v for k, v in tensors.items()}  # the same objects: changed in place
            ar.broadcast(tensors, root)
            assert all(tensors[k] is kept[k] for k in kept)
            got[root] = as_bytes(tensors)
        return got

    results = on_every_rank(ring, "ef:topk:1%", work)  # the method plays no part
    for root in range(ring.world_size):
        want = as_bytes(odd_tensors(root))
        for r in range(ring.world_size):
            assert results[r][root] == want, f"rank {r} did not get rank {root}'s bits"
        if root != 0:
            assert want != as_bytes(odd_tensors(0))


def test_broadcast_errors_are_zring_errors(local_ring):
    ring = local_ring(3)

    def work(ar):
        errors = {}
        x = np.full(4, float(ar.rank), np.float32)
        with pytest.raises(zring.Error) as caught:
            ar.broadcast({"w": x}, 3)
        errors["root"] = caught.value
        shape = np.zeros(5 if ar.rank == 2 else 4, np.float32)
        with pytest.raises(zring.Error) as caught:
            ar.broadcast({"w": shape}, 0)
        errors["shape"] = caught.value
        readonly = np.zeros(4, np.float32)
        readonly.flags.writeable = False
        with pytest.raises(zring.Error) as caught:
            ar.broadcast({"w": readonly}, 0)
        errors["readonly"] = caught.value
        ar.broadcast({"w": x}, 1)  # the ring is still usable
        return errors, x

    for r, (errors, x) in on_every_rank(ring, "none", work).items():
        assert errors["root"].kind == "invalid_argument"
        assert errors["root"].message == ("broadcast: root 3 is not a rank: world_size() is 3, "
                                          "so root must be 0..2")
        assert errors["shape"].kind == "manifest_mismatch"
        assert "tensor 'w' has shape [4] (4 elements) on rank 0" in errors["shape"].message
        assert "[5] (5 elements) on rank 2" in errors["shape"].message
        assert errors["readonly"].kind == "invalid_argument"
        assert "tensor 'w' is read-only" in errors["readonly"].message
        assert np.all(x == 1.0), f"rank {r}"


def test_standalone_broadcast():
    alone = zring.CompressedAllReduce("quant:2", 1)
    x = np.array([np.nan, -0.0, 1.5], np.float32)
    before = x.tobytes()
    alone.broadcast({"x": x}, 0)
    assert x.tobytes() == before
    with pytest.raises(zring.Error) as caught:
        alone.broadcast({"x": x}, 1)
    assert caught.value.kind == "invalid_argument" and "root 1 is not a rank" in caught.value.message
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce("none", 2).broadcast({"x": x}, 1)
    assert caught.value.kind == "no_communicator"
    with pytest.raises(TypeError, match="broadcast: takes a dict"):
        alone.broadcast([x], 0)


# --- zring.torch.broadcast_state -------------------------------------------------------

def make_model(seed):
    """Linear layers, a BatchNorm (int64 num_batches_tracked among its
    buffers) and a weight tied to another (two state_dict entries, one
    memory)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5),
                                torch.nn.Linear(5, 5), torch.nn.Linear(5, 5))
    model[3].weight = model[2].weight
    return model


def train_step(ar, model, optimizer, seed):
    """One step on this rank's data, the gradients averaged over the ring."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 6, generator=generator)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    ar.all_reduce_in_place(grads)
    optimizer.step()


def state_bytes(model, optimizer, buffers=True):
    """Everything the model (without its buffers: buffers=False) and the
    optimizer hold, tensors as bytes."""
    def flat(value):
        if isinstance(value, torch.Tensor):
            return ("tensor", str(value.dtype), tuple(value.shape), value.detach().numpy().tobytes())
        if isinstance(value, dict):
            return {k: flat(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [flat(v) for v in value]
        return value
    entries = model.state_dict() if buffers else dict(model.named_parameters())
    return pickle.dumps((flat(entries), flat(optimizer.state_dict())))


def test_broadcast_state_makes_models_and_optimizers_identical(local_ring):
    ring = local_ring(3)

    def work(ar):
        model = make_model(ar.rank)
        lr = 0.01 * (ar.rank + 1)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.8, 0.9 + 0.01 * ar.rank))
        if ar.rank != 2:  # rank 2 joins fresh: its optimizer never stepped
            for step in range(2 + ar.rank):
                train_step(zring.CompressedAllReduce("none", 1), model, optimizer,
                           10 * ar.rank + step)
        assert (len(optimizer.state) == 0) == (ar.rank == 2)
        before = state_bytes(model, optimizer)
        zring.torch.broadcast_state(ar, model, optimizer, root=1)
        synced = state_bytes(model, optimizer)
        synced_parameters = state_bytes(model, optimizer, buffers=False)
        group = dict(optimizer.param_groups[0])
        # Different data, averaged gradients: the parameters and the optimizer
        # state stay identical (BatchNorm's running statistics follow each
        # rank's own batch, as under DDP).
        train_step(ar, model, optimizer, 100 + ar.rank)
        return (before, synced, group, state_bytes(model, optimizer, buffers=False),
                synced_parameters)

    results = on_every_rank(ring, "none", work)
    assert results[0][0] != results[1][0] != results[2][0], "the ranks started alike"
    for r in range(3):
        assert results[r][1] == results[1][0], f"rank {r} does not hold rank 1's state"
        assert results[r][2]["lr"] == 0.02 and results[r][2]["betas"] == (0.8, 0.91)
        assert results[r][3] == results[0][3], f"rank {r} differs after the next step"
    assert results[0][3] != results[0][4], "the step changed nothing"


def test_broadcast_state_with_a_model_only_and_misuse(local_ring):
    ring = local_ring(2)

    def work(ar):
        model = make_model(ar.rank)
        zring.torch.broadcast_state(ar, model, root=0)
        with pytest.raises(zring.Error) as caught:
            zring.torch.broadcast_state(ar, {"w": torch.zeros(2)})
        other = torch.nn.Linear(6, 5 if ar.rank == 0 else 4)
        with pytest.raises(zring.Error) as mismatch:
            zring.torch.broadcast_state(ar, other)
        # One parameter group on rank 0, two elsewhere: the optimizer does not fit.
        params = list(model.parameters())
        groups = [{"params": params}] if ar.rank == 0 else [{"params": params[:2]},
                                                             {"params": params[2:]}]
        unfit = None
        try:  # root's own state fits root: only rank 1 fails
            zring.torch.broadcast_state(ar, model, torch.optim.SGD(groups, lr=0.1), root=0)
        except zring.Error as e:
            unfit = e
        return (pickle.dumps({k: v.numpy().tobytes() for k, v in model.state_dict().items()}),
                caught.value, mismatch.value, unfit)

    results = on_every_rank(ring, "none", work)
    assert results[0][0] == results[1][0]
    assert results[1][0] != pickle.dumps(
        {k: v.numpy().tobytes() for k, v in make_model(1).state_dict().items()})
    for r in range(2):
        assert results[r][1].kind == "invalid_argument" and "torch.nn.Module" in results[r][1].message
        assert results[r][2].kind == "manifest_mismatch"
        assert "tensor 'zring.model.bias' has shape [5]" in results[r][2].message
    assert results[0][3] is None
    assert results[1][3] is not None and results[1][3].kind == "invalid_argument"
    assert "rank 0's optimizer state does not fit this rank's optimizer" in results[1][3].message
