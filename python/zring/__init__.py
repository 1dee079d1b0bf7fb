"""zring: a compressed ring all-reduce for distributed training.

One zringd daemon per node forms a ring with the others; a training process
talks to its node's daemon and gets, on every rank, the same bits: the
average of what each rank compressed with the chosen method.

    import numpy, zring
    ar = zring.CompressedAllReduce.connect("ipc:///run/zring/zringd.sock", "ef:topk:1%")
    avg = ar.all_reduce({"fc.weight": numpy.ones((512, 64), numpy.float32)})
    ar.rank, ar.world_size, ar.traffic

Tensors are dicts of numpy arrays or CPU torch tensors (float32, any shape,
contiguous or not); results come back as the same kind and shape. Without
copies: ar.all_reduce_in_place(dict) writes the averages over the arrays,
and ar.make_shared_tensors({"w": (512, 64)}) gives tensors in the buffer
zringd reads (SharedTensors: shared["w"] is a numpy view of it), reduced by
ar.all_reduce_in_place(shared).

Classes: CompressionMethod (parse("quant:8"), str()), CompressedAllReduce
(standalone or connect(...)), SharedTensors, CompressedGradient, Traffic,
CompressionKind, ErrorCode, and the exception Error (.kind, .code, .message).
Functions: daemon_status(endpoint), version(), and for launchers such as
torchrun default_endpoint() (ZRING_ENDPOINT, else this node's ipc in
ZRING_CONFIG or /etc/zring/zring.yaml) and default_local_rank() (LOCAL_RANK).
Submodules: zring.torch (a DDP communication hook and a Horovod-style
DistributedOptimizer), zring.local_ring (a ring of zringd on 127.0.0.1 for
tests and examples). See docs/python.md.
"""

import json as _json
import os as _os

from ._errors import Error
from ._zring import (
    CompressedAllReduce,
    CompressedGradient,
    CompressionKind,
    CompressionMethod,
    ErrorCode,
    SharedTensors,
    Traffic,
    version,
)
from . import _zring

__version__ = version()

__all__ = [
    "CompressedAllReduce",
    "CompressedGradient",
    "CompressionKind",
    "CompressionMethod",
    "Error",
    "ErrorCode",
    "SharedTensors",
    "Traffic",
    "daemon_status",
    "default_endpoint",
    "default_local_rank",
    "version",
]

DEFAULT_CONFIG = "/etc/zring/zring.yaml"


def daemon_status(endpoint, timeout_ms=2000):
    """The status report of the zringd at endpoint, as a dict.

    It says, among other things, whether the ring is up ("ring_up"), the
    world size, the members and the ops done per method (what
    `zringctl status --json` prints). Raises zring.Error (kind
    'connection_failed' or 'timeout') when the daemon does not answer.
    """
    return _json.loads(_zring._status_json(endpoint, int(timeout_ms)))


def default_local_rank(default=0):
    """This process's local rank as its launcher gives it: LOCAL_RANK (set by
    torchrun and torch.distributed.launch --use_env), else default.

    Raises zring.Error (kind 'invalid_argument') when LOCAL_RANK is not a
    non-negative integer.
    """
    text = _os.environ.get("LOCAL_RANK", "").strip()
    if not text:
        return default
    try:
        rank = int(text)
    except ValueError:
        rank = -1
    if rank < 0:
        raise Error("invalid_argument", f"LOCAL_RANK is '{text}', not a local rank "
                                        "(a non-negative integer)")
    return rank


def default_endpoint(config=None, node=None):
    """The IPC endpoint of this node's zringd, for a training process.

    Without arguments: ZRING_ENDPOINT when it is set (e.g.
    'ipc:///run/zring/zringd.sock'); otherwise the ring file ZRING_CONFIG, or
    /etc/zring/zring.yaml, read as zringd reads it: the `ipc` of this node's
    entry in `nodes`, else the top-level `ipc`. This node is node, else
    ZRING_NODE (the name zringd got with --node), else the file's `self`;
    when none is given the file must give every node the same endpoint.
    config= names a ring file (ZRING_ENDPOINT is then not consulted).

    Raises zring.Error: kind 'invalid_argument' when there is nothing to go
    by (no ZRING_ENDPOINT and no ring file), 'config_invalid' when the file
    cannot be read or does not say which endpoint is this node's.
    """
    if config is None:
        endpoint = _os.environ.get("ZRING_ENDPOINT", "").strip()
        if endpoint:
            return endpoint
    path = config or _os.environ.get("ZRING_CONFIG", "").strip() or DEFAULT_CONFIG
    if not _os.path.exists(path):
        where = (f"the ring file {path} does not exist" if config else
                 f"ZRING_ENDPOINT is not set and the ring file {path} "
                 f"({'from ZRING_CONFIG' if path != DEFAULT_CONFIG else 'the default'}) "
                 "does not exist")
        raise Error("invalid_argument",
                    f"no zringd endpoint: {where}; pass the endpoint, or set ZRING_ENDPOINT "
                    "(e.g. ipc:///run/zring/zringd.sock) or ZRING_CONFIG (this node's ring file)")
    try:
        import yaml
    except ImportError as e:
        raise Error("config_invalid", f"reading the zringd endpoint from {path} needs PyYAML "
                                      "(Debian: python3-yaml); or set ZRING_ENDPOINT") from e
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise Error("config_invalid", f"cannot read the zringd endpoint from {path}: {e}") from e

    def bad(what):
        return Error("config_invalid", f"{path}: {what} (looking for this node's zringd "
                                       "endpoint; ZRING_ENDPOINT overrides the file)")

    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or not doc["nodes"]:
        raise bad("no `nodes` list")
    nodes = doc["nodes"]
    if not all(isinstance(n, dict) and isinstance(n.get("name"), str) for n in nodes):
        raise bad("every entry of `nodes` needs a name")
    top = doc.get("ipc")

    def endpoint_of(entry):
        value = entry.get("ipc", top)
        if not isinstance(value, str) or not value:
            raise bad(f"node '{entry['name']}' has no `ipc`, and there is no top-level `ipc`")
        return value

    name, source = node, "node="
    if not name:
        name, source = _os.environ.get("ZRING_NODE", "").strip(), "ZRING_NODE"
    if not name and isinstance(doc.get("self"), str):
        name, source = doc["self"], "`self`"
    if name:
        for entry in nodes:
            if entry["name"] == name:
                return endpoint_of(entry)
        raise bad(f"this node is '{name}' (from {source}) but `nodes` has only "
                  + ", ".join(f"'{n['name']}'" for n in nodes))
    endpoints = {endpoint_of(entry) for entry in nodes}
    if len(endpoints) != 1:
        raise bad("the nodes have endpoints of their own and nothing says which node this "
                  "is: set ZRING_NODE to its name (as zringd --node)")
    return endpoints.pop()
