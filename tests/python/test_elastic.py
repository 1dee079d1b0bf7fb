"""The elastic ring from Python: a node gone for good, the others go on with
their own average, and world_size / rank follow the ring (docs/membership.md)."""
import threading
import time

import numpy as np
import pytest

import zring
from gradients import make_gradients


def on_every_rank(conns, call):
    """call(i) on every connection's thread at once; (result or zring.Error) per connection."""
    answers = [None] * len(conns)

    def rank(i):
        try:
            answers[i] = call(i)
        except zring.Error as e:
            answers[i] = e

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(len(conns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def one_round(conns, round_number, listed_ranks):
    """Every connection all-reduces its rank's gradients of the round at once."""
    return on_every_rank(conns, lambda i: conns[i].all_reduce(
        make_gradients(11, round_number, listed_ranks[i], [3000])))


def test_a_node_gone_for_good_leaves_a_ring_that_goes_on(local_ring):
    ring = local_ring(3, timeout_ms=2000, heartbeat_ms=100)  # min_nodes: 2 of 3
    conns = [zring.CompressedAllReduce.connect(ring.ipc(n), "none", timeout_ms=20000) for n in range(3)]
    try:
        assert [c.world_size for c in conns] == [3, 3, 3]
        first = one_round(conns, 0, [0, 1, 2])
        assert all(isinstance(a, dict) for a in first), first
        ring.stop_node(2)
        conns[2].close()
        survivors, ranks = conns[:2], [0, 1]
        deadline = time.monotonic() + 30
        round_number, answers = 1, []
        while time.monotonic() < deadline:
            answers = one_round(survivors, round_number, ranks)
            if all(isinstance(a, dict) for a in answers):
                break
            for a in answers:
                if isinstance(a, zring.Error):
                    assert a.kind in ("peer_lost", "timeout", "aborted", "ring_changed"), a
            round_number += 1
        assert all(isinstance(a, dict) for a in answers), answers
        expected = sum(make_gradients(11, round_number, r, [3000])["t000"].astype(np.float64)
                       for r in ranks) / 2
        for a in answers:
            np.testing.assert_allclose(a["t000"], expected, rtol=1e-5, atol=1e-6)
            assert a["t000"].tobytes() == answers[0]["t000"].tobytes()
        assert [(c.world_size, c.rank) for c in survivors] == [(2, 0), (2, 1)]
        status = zring.daemon_status(ring.ipc(0))
        assert status["ring_up"] and status["min_nodes"] == 2
        assert status["ring_members"] == [ring.name(0), ring.name(1)]
        assert f"-> [{ring.name(0)} {ring.name(1)}]" in status["last_change"], status["last_change"]
        states = [m["state"] for m in status["members"]]
        assert states == ["self", "up", "down"], states
    finally:
        for c in conns:
            c.close()


def test_a_ring_without_a_quorum_says_so(local_ring):
    ring = local_ring(3, timeout_ms=2000, heartbeat_ms=100, min_nodes=3)
    conn = zring.CompressedAllReduce.connect(ring.ipc(0), "none", timeout_ms=20000)
    try:
        ring.stop_node(2)
        deadline = time.monotonic() + 30
        message = ""
        while "no quorum" not in message and time.monotonic() < deadline:
            with pytest.raises(zring.Error) as caught:
                conn.all_reduce({"w": np.ones(4, np.float32)})
            message = caught.value.message
        assert "no quorum: 2 of the 3 listed nodes are reachable" in message, message
        assert "min_nodes is 3" in message, message
    finally:
        conn.close()


def test_on_ring_change_must_be_callable(local_ring):
    ring = local_ring(1)
    with pytest.raises(zring.Error) as caught:
        zring.CompressedAllReduce.connect(ring.ipc(0), "none", ring_change_retries=1,
                                          on_ring_change=42)
    assert caught.value.kind == "invalid_argument"
    assert caught.value.message == ("connect: on_ring_change must be callable (it gets the "
                                    "zring.Error) or None")


@pytest.mark.parametrize("form", ["in_place", "copy"])
def test_with_retries_an_op_a_death_meets_runs_again_without_the_node(local_ring, form):
    """ring_change_retries: an op in flight when node 2 dies gives each
    survivor the exact average of the ring that ran it, or (when the other
    survivor had every average before the death) a timeout; each retry is
    reported to on_ring_change as a ring_changed. all_reduce_in_place leaves
    the values as they were when it fails; all_reduce (out of place, run
    again from the caller's intact arrays) never changes them."""
    ring = local_ring(3, timeout_ms=2000, heartbeat_ms=100)
    changes = [[], [], []]
    conns = [zring.CompressedAllReduce.connect(ring.ipc(n), "none", timeout_ms=20000,
                                               ring_change_retries=3,
                                               on_ring_change=changes[n].append)
             for n in range(3)]
    size = 4 << 20
    inputs = [make_gradients(11, 1, r, [size]) for r in range(3)]
    values = [{k: v.copy() for k, v in g.items()} for g in inputs]
    answers = [None] * 3

    def rank(i):
        if form == "in_place":
            answers[i] = one_round_in_place([conns[i]], [values[i]])[0]
        else:
            answers[i] = on_every_rank([conns[i]], lambda _: conns[i].all_reduce(values[i]))[0]

    try:
        one = [make_gradients(11, 0, r, [size]) for r in range(3)]
        for _ in range(2):  # the second as long as the op the death meets
            started = time.monotonic()
            warm = one_round_in_place(conns, one)
            assert warm == ["ok"] * 3, warm
            took = time.monotonic() - started
        threads = [threading.Thread(target=rank, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        time.sleep(took * 0.3)
        ring.daemons[2].kill()  # SIGKILL: a death, not a shutdown
        ring.daemons[2].wait()
        for t in threads:
            t.join()
        averages = [None] * 2
        for i in (0, 1):
            if isinstance(answers[i], zring.Error):
                assert answers[i].kind == "timeout", answers[i]
                assert values[i]["t000"].tobytes() == inputs[i]["t000"].tobytes()
            else:
                averages[i] = values[i]["t000"] if form == "in_place" else answers[i]["t000"]
                if form == "copy":
                    assert values[i]["t000"].tobytes() == inputs[i]["t000"].tobytes()
                ranks = range(conns[i].world_size)
                expected = sum(inputs[r]["t000"].astype(np.float64) for r in ranks) / len(ranks)
                np.testing.assert_allclose(averages[i], expected, rtol=1e-5, atol=1e-6)
            assert all(isinstance(c, zring.Error) and c.kind == "ring_changed"
                       for c in changes[i]), changes[i]
        if averages[0] is not None and averages[1] is not None:
            assert averages[0].tobytes() == averages[1].tobytes()
    finally:
        for c in conns:
            c.close()


def one_round_in_place(conns, grads):
    def call(i):
        conns[i].all_reduce_in_place(grads[i])
        return "ok"

    return on_every_rank(conns, call)


def test_wait_members_returns_once_a_restarted_node_is_taken_in_and_names_a_ring_never_formed(
        local_ring):
    ring = local_ring(3, timeout_ms=1000, heartbeat_ms=100)  # min_nodes: 2 of 3
    ring.stop_node(2)
    ring.wait_members(2, timeout_s=60)
    assert sorted(zring.daemon_status(ring.ipc(0))["ring_members"]) == ["n0", "n1"]
    ring.start_node(2)
    ring.wait_members(3, timeout_s=60)
    for n in range(3):
        assert zring.daemon_status(ring.ipc(n))["ring_members"] == ["n0", "n1", "n2"]
    with pytest.raises(RuntimeError, match=r"no ring of 4 after 0\.5 s: n0 reports ring_up=True, "
                                           r"members=\['n0', 'n1', 'n2'\]"):
        ring.wait_members(4, timeout_s=0.5)
