"""Fixtures for the tests of the Python module zring.

CTest runs these with PYTHONPATH at the built package and ZRING_ZRINGD /
ZRING_RING_CLIENT naming the built binaries (python/CMakeLists.txt). Every
process a test starts is stopped by a finalizer, also when the test fails,
and dies with the test process if that is killed (PR_SET_PDEATHSIG).
"""

import os
import sys
import threading

import pytest

import zring
from zring.local_ring import LocalRing, spawn, stop

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
PYTHON = sys.executable


def _binary(variable):
    path = os.environ.get(variable)
    if not path or not os.access(path, os.X_OK):
        pytest.skip(f"{variable} does not name a built executable (run these tests with ctest)")
    return path


@pytest.fixture(scope="session")
def zringd():
    return _binary("ZRING_ZRINGD")


@pytest.fixture(scope="session")
def ring_client():
    return _binary("ZRING_RING_CLIENT")


def freeze(process, limit_s=10.0):
    """Stops a process (SIGSTOP) and returns once every thread of it is stopped.

    kill() returns before the signal has stopped every thread: one thread
    takes it and stops the others when it next runs, so until then another
    thread can still read what a test sends right after. A test that means
    "the process reads this only after it wakes" waits for the stop.
    """
    import signal
    import time

    process.send_signal(signal.SIGSTOP)
    tasks = f"/proc/{process.pid}/task"
    deadline = time.monotonic() + limit_s
    while True:
        states = []
        for tid in os.listdir(tasks):
            try:
                with open(f"{tasks}/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
        if states and all(s in ("T", "t") for s in states):
            return
        assert time.monotonic() < deadline, f"pid {process.pid} not stopped: {states}"
        time.sleep(0.001)


@pytest.fixture
def local_ring(zringd, request):
    """local_ring(nodes, local_ranks=1): a started ring, stopped after the test."""
    rings = []

    def make(nodes, local_ranks=1, **options):
        ring = LocalRing(zringd, nodes, local_ranks, **options)
        rings.append(ring)
        return ring

    def stop_all():
        for ring in rings:
            ring.close()

    request.addfinalizer(stop_all)
    return make


class Processes:
    """Child processes of one test; all stopped by the fixture's finalizer."""

    def __init__(self):
        self.children = []

    def start(self, argv, log_path, env=None):
        child = spawn(argv, log_path, env)
        self.children.append(child)
        return child

    def python(self, script, args, log_path, env=None):
        environment = dict(os.environ)
        environment.update(env or {})
        return self.start([PYTHON, os.path.join(WORKERS, script)] + [str(a) for a in args],
                          log_path, environment)

    def stop_all(self):
        for child in self.children:
            stop(child, grace_s=2.0)


@pytest.fixture
def processes(request):
    p = Processes()
    request.addfinalizer(p.stop_all)
    return p


def wait_all(children, logs, limit_s=300):
    """Exit statuses of children. A child still running after limit_s is a
    hang: killed, and the test fails with its log (a guard, not a timing)."""
    import subprocess

    statuses = []
    for child, log in zip(children, logs):
        try:
            statuses.append(child.wait(timeout=limit_s))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            pytest.fail(f"{child.args} did not finish; its log:\n{read(log)}")
    return statuses


def read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return b"" if "b" in mode else ""


def on_every_rank(ring, method, work, timeout_ms=20000):
    """work(ar) on one thread per rank of ring, each with its own connection
    (rank r is local rank r % local_ranks of node r // local_ranks): the
    results by rank. The ranks wait for each other inside the ops, so this
    also shows the GIL is released there."""
    results, errors = {}, []

    def rank(r):
        try:
            with zring.CompressedAllReduce.connect(ring.ipc(r // ring.local_ranks), method,
                                                   local_rank=r % ring.local_ranks,
                                                   timeout_ms=timeout_ms) as ar:
                results[ar.rank] = work(ar)
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(ring.world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(results) == list(range(ring.world_size))
    return results
