"""A ring of three real zringd driven from Python processes: the results are
bit for bit those of the C++ client (tests/integration/ring_client) given
the same gradients, on every rank, whichever way the tensors are handed over;
and a ring's errors reach Python as zring.Error of the right kind."""

import os
import threading

import numpy as np
import pytest

import zring
from conftest import read, wait_all
from gradients import make_gradients

SIZES = "1,7,5000,12289"
KINDS = ["numpy", "torch", "strided"]  # rank r hands its tensors over as KINDS[r]


def run_ranks(processes, ring, tmp_path, label, argv_of):
    outs, logs, children = [], [], []
    for r in range(ring.world_size):
        out = str(tmp_path / f"{label}-rank{r}")
        log = out + ".log"
        children.append(processes.start(argv_of(r, out), log))
        outs.append(out)
        logs.append(log)
    statuses = wait_all(children, logs)
    for r, status in enumerate(statuses):
        assert status == 0, f"{label} rank {r}: {read(outs[r] + '.err')}{read(logs[r])}"
    return [read(o, "rb") for o in outs]


@pytest.mark.parametrize("method,rounds", [
    ("none", 1), ("fp16", 1), ("quant:4", 1), ("sign", 1), ("topk:1%", 1),
    ("ef:topk:1%", 3), ("ef:sign", 3), ("ef:quant:2", 2)])
def test_python_ranks_get_the_bits_cpp_ranks_get(method, rounds, local_ring, processes,
                                                 ring_client, tmp_path):
    ring = local_ring(3)
    seed = 4242

    def cpp(r, out):
        return [ring_client, ring.ipc(r), "0", method, str(seed), str(rounds), SIZES, out, "20000"]

    def python(r, out):
        return [processes_python, os.path.join(WORKERS, "ring_worker.py"), ring.ipc(r), "0",
                method, str(seed), str(rounds), SIZES, out, KINDS[r]]

    from conftest import PYTHON as processes_python, WORKERS  # noqa: N813

    expected = run_ranks(processes, ring, tmp_path, "cpp", cpp)
    got = run_ranks(processes, ring, tmp_path, "py", python)
    per_round = 4 * sum(int(s) for s in SIZES.split(","))
    assert len(expected[0]) == rounds * per_round
    for r in range(3):
        assert expected[r] == expected[0], f"C++ rank {r} differs from rank 0"
        assert got[r] == expected[r], f"{method}: Python rank {r} ({KINDS[r]}) differs from C++"


def test_the_ring_average_is_the_true_average_for_none(local_ring):
    ring = local_ring(3)
    results, errors = {}, []

    def rank(node):
        try:
            with zring.CompressedAllReduce.connect(ring.ipc(node), "none") as ar:
                grads = make_gradients(7, 0, ar.rank, [1000])
                results[ar.rank] = (ar.all_reduce(grads), ar.world_size, ar.traffic)
        except zring.Error as e:
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(results) == [0, 1, 2]
    expected = sum(make_gradients(7, 0, r, [1000])["t000"].astype(np.float64) for r in range(3)) / 3
    for r in range(3):
        out, world, traffic = results[r]
        assert world == 3 and traffic.ops == 1 and traffic.dense_bytes == 4000
        assert traffic.wire_bytes > 0
        np.testing.assert_allclose(out["t000"], expected, rtol=1e-5, atol=1e-6)
        assert out["t000"].tobytes() == results[0][0]["t000"].tobytes()


def test_ring_errors_reach_python_as_zring_error(local_ring):
    ring = local_ring(2)
    status = zring.daemon_status(ring.ipc(0))
    assert status["ring_up"] and status["world_size"] == 2
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce.connect(ring.ipc(0), "none", local_rank=5)
    assert caught.value.kind == "invalid_argument" and "local_rank" in caught.value.message

    # Two ranks that submit different shapes: both get manifest_mismatch.
    errors = {}

    def rank(node, n):
        try:
            with zring.CompressedAllReduce.connect(ring.ipc(node), "none") as ar:
                ar.all_reduce({"w": np.ones(n, np.float32)})
        except zring.Error as e:
            errors[node] = e

    threads = [threading.Thread(target=rank, args=(0, 10)), threading.Thread(target=rank, args=(1, 11))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(errors) == [0, 1]
    for e in errors.values():
        assert e.kind == "manifest_mismatch" and "'w'" in e.message

    # A peer that is gone: the op fails within the ring's timeout, never hangs.
    ar = zring.CompressedAllReduce.connect(ring.ipc(0), "none", timeout_ms=20000)
    ring.stop_node(1)
    with pytest.raises(zring.Error) as caught:
        ar.all_reduce({"w": np.ones(10, np.float32)})
    assert caught.value.kind in ("peer_lost", "timeout", "aborted"), caught.value
    ar.close()
