"""A ring of three real zringd driven from Python processes: the results are
bit for bit those of the C++ client (tests/integration/ring_client) given
the same gradients, on every rank, whichever way the tensors are handed over;
and a ring's errors reach Python as zring.Error of the right kind."""

import os
import threading

import numpy as np
import pytest

import zring
from conftest import freeze, on_every_rank, read, wait_all
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


def cpp_and_python_results(processes, ring, tmp_path, method, rounds, sizes, kinds, seed=4242):
    """What ring_client gets on every rank, then what Python ranks get, rank r
    handing its tensors over as kinds[r] (ring_worker.py)."""
    from conftest import PYTHON, WORKERS

    def cpp(r, out):
        return [ring_client_path, ring.ipc(r), "0", method, str(seed), str(rounds), sizes, out,
                "20000"]

    def python(r, out):
        return [PYTHON, os.path.join(WORKERS, "ring_worker.py"), ring.ipc(r), "0", method,
                str(seed), str(rounds), sizes, out, kinds[r]]

    ring_client_path = os.environ["ZRING_RING_CLIENT"]
    expected = run_ranks(processes, ring, tmp_path, "cpp", cpp)
    got = run_ranks(processes, ring, tmp_path, "py", python)
    per_round = 4 * sum(int(s) for s in sizes.split(","))
    assert len(expected[0]) == rounds * per_round
    for r in range(ring.world_size):
        assert expected[r] == expected[0], f"C++ rank {r} differs from rank 0"
    return expected, got


@pytest.mark.parametrize("method,rounds", [
    ("none", 1), ("fp16", 1), ("quant:4", 1), ("sign", 1), ("topk:1%", 1),
    ("ef:topk:1%", 3), ("ef:sign", 3), ("ef:quant:2", 2)])
def test_python_ranks_get_the_bits_cpp_ranks_get(method, rounds, local_ring, processes,
                                                 ring_client, tmp_path):
    ring = local_ring(3)
    expected, got = cpp_and_python_results(processes, ring, tmp_path, method, rounds, SIZES, KINDS)
    for r in range(3):
        assert got[r] == expected[r], f"{method}: Python rank {r} ({KINDS[r]}) differs from C++"


# Rank r reduces in place as IN_PLACE_KINDS[i][r]; LARGE goes through the
# client's staged path (256 KiB or more), SIZES through a message.
LARGE = "3,70001"
IN_PLACE_KINDS = [["in_place", "in_place_torch_strided", "shared"],
                  ["shared", "packed", "in_place_strided"]]


@pytest.mark.parametrize("kinds", IN_PLACE_KINDS, ids=["-".join(k) for k in IN_PLACE_KINDS])
@pytest.mark.parametrize("sizes", [SIZES, LARGE], ids=["small", "staged"])
@pytest.mark.parametrize("method,rounds", [("none", 2), ("quant:4", 1), ("ef:topk:1%", 3)])
def test_in_place_ranks_get_the_bits_of_all_reduce(method, rounds, sizes, kinds, local_ring,
                                                   processes, ring_client, tmp_path):
    # ring_client's rounds go through all_reduce (and its in-place forms):
    # every way of reducing in place from Python gives the same bits.
    ring = local_ring(3)
    expected, got = cpp_and_python_results(processes, ring, tmp_path, method, rounds, sizes, kinds)
    for r in range(3):
        assert got[r] == expected[r], f"{method}: Python rank {r} ({kinds[r]}) differs from C++"
        if kinds[r] == "shared":
            report = read(str(tmp_path / f"py-rank{r}.txt"))
            assert report.split() == ["zero_copy=1", "aliased=1"], report


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
    assert caught.value.kind in ("peer_lost", "timeout", "aborted", "ring_changed"), caught.value
    ar.close()


def test_in_place_dicts_may_change_their_shapes_between_ops(local_ring):
    ring = local_ring(2)
    shapes = [(10,), (4, 3), (), (0,), (70001,)]

    def work(ar):
        tensors, got, returned = {}, [], []
        for step, shape in enumerate(shapes):
            tensors["w"] = make_gradients(3, step, ar.rank, [int(np.prod(shape))])["t000"].reshape(shape)
            returned.append(ar.all_reduce({"w": tensors["w"]})["w"])
            ar.all_reduce_in_place(tensors)
            got.append(tensors["w"])
        return got, returned

    results = on_every_rank(ring, "quant:4", work)
    for step, shape in enumerate(shapes):
        for r in range(2):
            got, returned = results[r][0][step], results[r][1][step]
            assert got.shape == shape
            assert got.tobytes() == returned.tobytes() == results[0][0][step].tobytes()


def test_shared_tensors_on_a_ring_alias_the_buffer_and_outlive_their_objects(local_ring):
    ring = local_ring(2)

    def work(ar):
        shared = ar.make_shared_tensors({"w": (300, 100), "b": (7,)})
        assert shared.zero_copy and ar.connected
        w, b = shared["w"], shared["b"]
        assert np.shares_memory(w, shared.values) and w.base is not None
        w[...] = ar.rank + 1.0
        b[...] = np.arange(7, dtype=np.float32) * (ar.rank + 1)
        ar.all_reduce_in_place(shared)
        first = (w.copy(), b.copy())
        # Through the torch view as well: the same memory.
        t = shared.torch("w")
        assert t.data_ptr() == w.ctypes.data
        t.fill_(2.0 * ar.rank)
        ar.all_reduce_in_place(shared)
        second = w.copy()
        still_zero_copy = shared.zero_copy
        shared.close()
        with pytest.raises(zring.Error) as closed:
            ar.all_reduce_in_place(shared)
        w[0, 0] = 42.0  # a plain array now: its memory is still there
        return first, second, still_zero_copy, closed.value, w[0, 0]

    results = on_every_rank(ring, "none", work)
    for r in range(2):
        (w, b), second, still_zero_copy, error, kept = results[r]
        assert np.all(w == 1.5) and np.array_equal(b, np.arange(7, dtype=np.float32) * 1.5)
        assert np.all(second == 1.0) and still_zero_copy
        assert error.kind == "invalid_argument" and "closed" in error.message
        assert kept == 42.0


def test_shared_tensors_keep_their_buffer_beside_ops_of_other_tensors(local_ring):
    # One connection, as a DistributedOptimizer's user has (a second one for
    # the same local rank would take the rank over): its SharedTensors stand
    # in a shared buffer of their own, and a large op of other tensors
    # (staged) and small ones (copied whole) go through another. The
    # SharedTensors stay zero-copy, and the small ops go on the bell: from
    # the second on, each starts on zringd's ring thread (ops_rung). They
    # used to take the SharedTensors' buffer (the large op) or a values
    # frame (every small op while SharedTensors stood in the buffer).
    ring = local_ring(2)

    def work(ar):
        shared = ar.make_shared_tensors({"g": (1000,)})
        for step in range(2):
            shared["g"][...] = ar.rank + 1.0 + step
            ar.all_reduce_in_place(shared)
        big = {"big": np.full(300_000, ar.rank * 2.0, dtype=np.float32)}  # 1.2 MB: staged
        ar.all_reduce_in_place(big)
        losses = [ar.all_reduce({"loss": np.array([ar.rank + i], dtype=np.float32)})["loss"][0]
                  for i in range(4)]
        shared["g"][...] = ar.rank + 5.0
        ar.all_reduce_in_place(shared)
        return shared.zero_copy, shared["g"].copy(), big["big"].copy(), losses

    results = on_every_rank(ring, "none", work)
    for r in range(2):
        zero_copy, g, big, losses = results[r]
        assert zero_copy
        assert np.all(g == 5.5) and np.all(big == 1.0)
        assert losses == [0.5, 1.5, 2.5, 3.5]
    import time
    deadline = time.monotonic() + 10
    while True:  # the io thread counts rung ops when it next wakes
        status = zring.daemon_status(ring.ipc(0), 1000)
        if status["ops_done"] == 8 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert status["ops_done"] == 8
    assert status["ops_rung"] >= 3, status


def shared_buffer_files(ring, node):
    """The files of node's shared buffers: beside its socket, or in /dev/shm
    named after it when the socket's directory is not in memory."""
    socket = os.path.join(ring.dir, f"{ring.name(node)}.sock")
    stem = ("zring" + os.path.abspath(socket)).replace("/", "_") + ".shm."
    beside = [n for n in os.listdir(ring.dir) if n.startswith(os.path.basename(socket) + ".shm.")]
    return beside + [n for n in os.listdir("/dev/shm") if n.startswith(stem)]


def test_a_shared_buffer_file_is_removed_at_its_first_op(local_ring):
    # Once the client's first op in the buffer shows it has mapped it,
    # zringd removes the file: a zringd that dies later leaves nothing
    # behind, and both sides still share the memory.
    ring = local_ring(2)
    seen = {}

    def work(ar):
        shared = ar.make_shared_tensors({"g": (5000,)})
        seen[ar.rank] = {"before": len(shared_buffer_files(ring, ar.rank))}
        for step in range(3):
            shared["g"][...] = (ar.rank + 1.0) * (step + 1)
            ar.all_reduce_in_place(shared)
            if step == 0:
                seen[ar.rank]["after"] = len(shared_buffer_files(ring, ar.rank))
        assert shared.zero_copy
        return shared["g"].copy()

    results = on_every_rank(ring, "none", work)
    for r in range(2):
        assert seen[r] == {"before": 1, "after": 0}
        assert np.all(results[r] == 4.5)  # step 3: the average of 3 and 6


def test_shared_tensors_outlive_their_connection(local_ring):
    # Made by one connection, reduced through another once it is gone: it
    # still works (with a copy), and the views made before see the averages.
    ring = local_ring(2)
    first = {}

    def make(ar):
        shared = ar.make_shared_tensors({"g": (1000,)})
        shared["g"][...] = ar.rank + 1.0
        first[ar.rank] = shared
        return ar.rank

    on_every_rank(ring, "none", make)

    def reduce(ar):
        shared = first[ar.rank]
        view = shared["g"]
        ar.all_reduce_in_place(shared)
        return view.copy()

    results = on_every_rank(ring, "none", reduce)
    for r in range(2):
        assert np.all(results[r] == 1.5)


def test_in_place_ops_that_disagree_are_manifest_mismatch_and_leave_values(local_ring):
    ring = local_ring(2)

    def work(ar):
        x = np.full(10 + ar.rank, 3.0, np.float32)
        with pytest.raises(zring.Error) as caught:
            ar.all_reduce_in_place({"w": x})
        return caught.value, x

    for error, x in on_every_rank(ring, "none", work).values():
        assert error.kind == "manifest_mismatch" and "'w'" in error.message
        assert np.all(x == 3.0)


def test_large_ops_work_again_after_a_zringd_given_up_on_is_replaced(local_ring):
    # A large op that fails (here its zringd froze: "went silent") drops the
    # client's shared buffer; the next large op asks the replacement zringd
    # for a new one, which does not know the process yet. The client must
    # greet it again: every later large op used to fail with
    # connection_failed ("... connect again").
    import signal

    ring = local_ring(1)
    big = {"w": np.arange(100_000, dtype=np.float32)}  # 400 kB: through the shared buffer
    with zring.CompressedAllReduce.connect(ring.ipc(0), "none", timeout_ms=800) as ar:
        np.testing.assert_array_equal(ar.all_reduce(big)["w"], big["w"])
        freeze(ring.daemons[0])
        try:
            with pytest.raises(zring.Error) as caught:
                ar.all_reduce(big)
            assert caught.value.kind == "timeout"
        finally:
            ring.daemons[0].send_signal(signal.SIGCONT)
        ring.start_node(0)  # a new zringd in its place, as systemd would start one
        ring.wait_up()
        for _ in range(3):
            np.testing.assert_array_equal(ar.all_reduce(big)["w"], big["w"])


def test_a_request_its_client_gave_up_on_is_not_paired_with_the_next_op(local_ring):
    # Rank 0's zringd is frozen while rank 0 submits: rank 0 gives up
    # (timeout). When zringd wakes it reads that request, which its client
    # no longer waits for. It used to run it with the other rank's next op:
    # rank 1 got the average of its next values and rank 0's abandoned ones.
    # Now that op fails for rank 1 too (each rank has one failed op), and
    # the next op pairs the same step on both.
    import signal

    ring = local_ring(2, timeout_ms=3000)
    one = lambda v: {"g": np.array([v], dtype=np.float32)}
    ar0 = zring.CompressedAllReduce.connect(ring.ipc(0), "none", timeout_ms=800)
    ar1 = zring.CompressedAllReduce.connect(ring.ipc(1), "none", timeout_ms=30000)
    results = {}

    def both(a, b):
        t = threading.Thread(target=lambda: results.__setitem__(1, ar1.all_reduce(one(b))["g"][0]))
        t.start()
        results[0] = ar0.all_reduce(one(a))["g"][0]
        t.join()
        return results[0], results[1]

    try:
        assert both(1.0, 3.0) == (2.0, 2.0)
        freeze(ring.daemons[0])
        try:
            with pytest.raises(zring.Error) as caught:
                ar0.all_reduce(one(100.0))
            assert caught.value.kind == "timeout"
        finally:
            ring.daemons[0].send_signal(signal.SIGCONT)
        with pytest.raises(zring.Error) as caught:
            ar1.all_reduce(one(7.0))
        assert caught.value.kind == "aborted" and "had given up on it" in caught.value.message
        assert both(5.0, 9.0) == (7.0, 7.0)
        assert "had given up on it: the op fails on every rank" in ring.log(0)
    finally:
        ar0.close()
        ar1.close()


def one_ring(ring, timeout_s=30.0):
    """Returns once every daemon reports the same ring up, twice in a row."""
    import time

    deadline, last = time.monotonic() + timeout_s, None
    while True:
        statuses = [zring.daemon_status(ring.ipc(n), 1000) for n in range(ring.nodes)]
        ups = {s["generation"] if s.get("ring_up") else None for s in statuses}
        now = ups.pop() if len(ups) == 1 else None  # the one generation all are up in
        if now is not None and now == last:
            return
        assert time.monotonic() < deadline, f"no one ring after {timeout_s} s: {statuses}"
        last = now
        time.sleep(0.3)


@pytest.mark.parametrize("elements,why", [
    (1, "after it was sent (zringd was stopped or starved), beyond timeout_ms 1000"),
    # 400 kB: the op's shared buffer is asked for first, and read late
    (100_000, "read its request for a shared buffer")])
def test_an_op_zringd_takes_up_a_ring_timeout_late_fails_on_its_node_alone(local_ring, elements,
                                                                          why):
    # Rank 0's zringd is frozen while both ranks begin a step. Rank 1's
    # zringd gives up on the silent node within the ring's timeout (1 s)
    # and fails the step; rank 0's client (30 s) still waits. When zringd 0
    # wakes, the step is over everywhere else, so it fails for rank 0 too
    # (timeout) instead of running with rank 1's next step (rank 1 used to
    # get the average of 100.0 and its next values), and the next steps pair
    # the same step on both.
    import signal
    import time

    ring = local_ring(2, timeout_ms=1000)
    step = lambda v, n=elements: {"g": np.full(n, v, dtype=np.float32)}
    ar0 = zring.CompressedAllReduce.connect(ring.ipc(0), "none", timeout_ms=30000)
    ar1 = zring.CompressedAllReduce.connect(ring.ipc(1), "none", timeout_ms=30000)
    results = {}

    def rank0(v, n=elements):
        try:
            results[0] = ar0.all_reduce(step(v, n))["g"]
        except zring.Error as e:
            results[0] = e

    def both(a, b, n=elements):
        t = threading.Thread(target=rank0, args=(a, n))
        t.start()
        results[1] = ar1.all_reduce(step(b, n))["g"]
        t.join()
        return results[0], results[1]

    try:
        # One float first: the frozen op is the first large one, which asks
        # for the buffer.
        assert [float(r[0]) for r in both(1.0, 3.0, 1)] == [2.0, 2.0]
        freeze(ring.daemons[0])
        try:
            t = threading.Thread(target=rank0, args=(100.0,))
            t.start()
            with pytest.raises(zring.Error) as caught:
                ar1.all_reduce(step(7.0))
            assert caught.value.kind in ("peer_lost", "timeout", "ring_changed", "aborted")
            time.sleep(1.2)  # rank 0's op began longer than the ring's timeout ago
        finally:
            ring.daemons[0].send_signal(signal.SIGCONT)
        t.join()
        assert isinstance(results[0], zring.Error), results[0]
        assert results[0].kind == "timeout"
        assert why in results[0].message
        # The woken zringd's first op can still fail while the ring re-forms
        # around it (docs/testing.md, defect 5): the steps begin on one ring.
        one_ring(ring)
        for s in range(3):
            got = both(5.0 + s, 9.0 + s)
            for r in got:
                np.testing.assert_array_equal(r, np.full(elements, 7.0 + s, dtype=np.float32))
    finally:
        ar0.close()
        ar1.close()


def mapped_buffers(ring, node):
    """How many of node's shared buffers this process maps (/proc/self/maps)."""
    socket = os.path.join(ring.dir, f"{ring.name(node)}.sock")
    stems = (socket + ".shm.", "/dev/shm/" + ("zring" + os.path.abspath(socket)).replace("/", "_") + ".shm.")
    with open("/proc/self/maps") as maps:
        paths = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    return len([p for p in paths if p.startswith(stems)])


def test_a_small_op_goes_through_a_shared_buffer(local_ring):
    # A dict of 28 bytes is copied into a shared buffer (made at its first
    # op) rather than sent in a frame: zringd's ring thread answers it with
    # a wake on the buffer's board.
    ring = local_ring(2)

    def work(ar):
        before = mapped_buffers(ring, ar.rank)
        t = {"w": np.full(7, ar.rank + 1.0, dtype=np.float32)}
        ar.all_reduce_in_place(t)
        first = mapped_buffers(ring, ar.rank)
        ar.all_reduce_in_place(t)  # the same buffer again
        return before, first, mapped_buffers(ring, ar.rank), t["w"].copy()

    results = on_every_rank(ring, "none", work)
    for r in range(2):
        before, first, second, w = results[r]
        assert (before, first, second) == (0, 1, 1)
        assert np.all(w == 1.5)
