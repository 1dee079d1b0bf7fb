"""torchrun: zring finds its daemon and local rank in the environment.

zring.default_endpoint() / default_local_rank() against ring files and
variables of every kind; then examples/torchrun/train.py launched as a
2-node torchrun job (one torchrun per "node" of a 2-node local ring,
--nnodes=2 --node_rank=N --nproc_per_node=2, one rendezvous): every rank
finds its node's zringd (node 0 through ZRING_ENDPOINT, node 1 through the
ring file), all 4 ranks end with bit-identical weights and both torch and
zring see world size 4.
"""

import importlib.util
import os

import numpy as np
import pytest
import torch

import zring
import zring.torch
from conftest import PYTHON, read, wait_all
from zring.local_ring import free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "torchrun", "train.py")
VARIABLES = ("ZRING_ENDPOINT", "ZRING_CONFIG", "ZRING_NODE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


@pytest.fixture
def env(monkeypatch):
    """monkeypatch, with none of the variables zring reads set."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def ring_file(tmp_path, text):
    path = tmp_path / "ring.yaml"
    path.write_text(text)
    return str(path)


TWO_NODES = """
nodes:
  - {name: a, address: tcp://10.0.0.1:7101}
  - {name: b, address: tcp://10.0.0.2:7101, ipc: 'ipc:///run/zring/b.sock'}
ipc: ipc:///run/zring/zringd.sock
"""


def test_the_endpoint_comes_from_zring_endpoint_first(env, tmp_path):
    env.setenv("ZRING_ENDPOINT", "ipc:///tmp/x.sock")
    env.setenv("ZRING_CONFIG", ring_file(tmp_path, TWO_NODES + "self: b\n"))
    assert zring.default_endpoint() == "ipc:///tmp/x.sock"
    # An explicit ring file is read even so.
    assert zring.default_endpoint(config=ring_file(tmp_path, TWO_NODES + "self: b\n")) == \
        "ipc:///run/zring/b.sock"


def test_the_endpoint_is_this_nodes_ipc_in_the_ring_file(env, tmp_path):
    env.setenv("ZRING_CONFIG", ring_file(tmp_path, TWO_NODES + "self: a\n"))
    assert zring.default_endpoint() == "ipc:///run/zring/zringd.sock"   # the top-level ipc
    env.setenv("ZRING_NODE", "b")                                          # as zringd --node b
    assert zring.default_endpoint() == "ipc:///run/zring/b.sock"         # its own ipc
    assert zring.default_endpoint(node="a") == "ipc:///run/zring/zringd.sock"


def test_without_self_the_nodes_must_share_one_endpoint(env, tmp_path):
    same = ring_file(tmp_path, "nodes:\n  - {name: a, address: tcp://h1:1}\n"
                               "  - {name: b, address: tcp://h2:1}\nipc: ipc:///run/zring/s.sock\n")
    assert zring.default_endpoint(config=same) == "ipc:///run/zring/s.sock"
    env.setenv("ZRING_CONFIG", ring_file(tmp_path, TWO_NODES))
    with pytest.raises(zring.Error) as caught:
        zring.default_endpoint()
    assert caught.value.kind == "config_invalid" and "ZRING_NODE" in caught.value.message


def test_ring_files_that_do_not_say_are_clear_errors(env, tmp_path):
    env.setenv("ZRING_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(zring.Error) as caught:
        zring.default_endpoint()
    assert caught.value.kind == "invalid_argument"
    assert "ZRING_ENDPOINT" in caught.value.message and "missing.yaml" in caught.value.message
    env.setenv("ZRING_CONFIG", ring_file(tmp_path, TWO_NODES + "self: c\n"))
    with pytest.raises(zring.Error) as caught:
        zring.default_endpoint()
    assert caught.value.kind == "config_invalid" and "'c'" in caught.value.message
    env.setenv("ZRING_CONFIG", ring_file(tmp_path, "nodes: [{name: a, address: tcp://h:1}]\n"))
    with pytest.raises(zring.Error) as caught:
        zring.default_endpoint()
    assert caught.value.kind == "config_invalid" and "ipc" in caught.value.message
    env.setenv("ZRING_CONFIG", ring_file(tmp_path, "nodes: [unclosed\n"))
    with pytest.raises(zring.Error) as caught:
        zring.default_endpoint()
    assert caught.value.kind == "config_invalid"
    # zring.torch says the same, with what to do.
    with pytest.raises(zring.Error, match="endpoint"):
        zring.torch.HookState(method="none")


def test_the_local_rank_comes_from_local_rank(env):
    assert zring.default_local_rank() == 0
    env.setenv("LOCAL_RANK", "3")
    assert zring.default_local_rank() == 3
    env.setenv("LOCAL_RANK", "one")
    with pytest.raises(zring.Error) as caught:
        zring.default_local_rank()
    assert caught.value.kind == "invalid_argument" and "LOCAL_RANK" in caught.value.message


def test_zring_torch_connects_from_the_environment(env, local_ring):
    ring = local_ring(2, local_ranks=1)
    env.setenv("ZRING_CONFIG", ring.config)
    env.setenv("ZRING_NODE", ring.name(1))
    env.setenv("LOCAL_RANK", "0")
    env.setenv("LOCAL_WORLD_SIZE", "1")
    ar = zring.torch.connect(method="none")
    assert ar.connected and ar.rank == 1 and ar.world_size == 2    # node n1's daemon
    ar.close()
    # torchrun starting 2 processes per node for a ring of local_ranks 1.
    env.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(zring.Error) as caught:
        zring.torch.HookState(method="none")
    assert caught.value.kind == "invalid_argument"
    assert "LOCAL_WORLD_SIZE is 2" in caught.value.message and "local_ranks: 1" in caught.value.message
    # A local rank given by hand is the caller's business.
    zring.torch.HookState(method="none", local_rank=0).close()


def example_initial_parameters():
    spec = importlib.util.spec_from_file_location("torchrun_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return torch.cat([p.detach().reshape(-1) for p in module.model().parameters()]).numpy()


def test_two_torchrun_nodes_of_two_processes_train_one_model(local_ring, processes, tmp_path):
    method = "ef:topk:10%"
    ring = local_ring(2, local_ranks=2)
    port = free_ports(1)[0]
    base = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    base.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    envs = [dict(base, ZRING_ENDPOINT=ring.ipc(0)),
            dict(base, ZRING_CONFIG=ring.config, ZRING_NODE=ring.name(1))]
    steps = 8
    children, logs = [], []
    for node in range(2):
        logs.append(str(tmp_path / f"node{node}.log"))
        # python -m torch.distributed.run is the torchrun command. Debian 12's
        # (torch 1.13 on Python 3.11) cannot parse its own default of
        # --redirects/--tee ("0"), hence "1": stdout to a log and the console.
        argv = [PYTHON, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={node}",
                "--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={port}",
                "--redirects=1", "--tee=1", f"--log_dir={tmp_path / f'torchrun{node}'}",
                EXAMPLE, "--method", method, "--steps", str(steps), "--out", str(tmp_path)]
        children.append(processes.start(argv, logs[node], envs[node]))
    statuses = wait_all(children, logs)
    for node in range(2):
        assert statuses[node] == 0, f"torchrun of node {node}:\n{read(logs[node])}"

    reports = [dict(item.split("=") for item in read(tmp_path / f"rank{r}.txt").split())
               for r in range(4)]
    for rank, report in enumerate(reports):
        assert report["world"] == "4" and report["zring_world"] == "4", report
        # torchrun's ranks are node-major as zring's: the same rank, from LOCAL_RANK.
        assert report["local_rank"] == str(rank % 2), report
        assert report["zring_rank"] == str(rank), report
        assert int(report["traffic"]) > 0, report
        assert int(report["in_place"]) >= steps and report["copied"] == "0", report
    weights = [np.frombuffer(read(tmp_path / f"rank{r}.bin", "rb"), dtype=np.float32)
               for r in range(4)]
    initial = example_initial_parameters()
    assert weights[0].size == initial.size
    for rank in range(1, 4):
        assert weights[rank].tobytes() == weights[0].tobytes(), f"rank {rank} differs from rank 0"
    assert not np.array_equal(weights[0], initial), "nothing was trained"
    assert "world size 4 (zring: 4)" in read(logs[0])
