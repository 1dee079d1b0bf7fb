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
Functions: daemon_status(endpoint), version().
Submodules: zring.torch (a DDP communication hook and a Horovod-style
DistributedOptimizer), zring.local_ring (a ring of zringd on 127.0.0.1 for
tests and examples). See docs/python.md.
"""

import json as _json

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
    "version",
]


def daemon_status(endpoint, timeout_ms=2000):
    """The status report of the zringd at endpoint, as a dict.

    It says, among other things, whether the ring is up ("ring_up"), the
    world size, the members and the ops done per method (what
    `zringctl status --json` prints). Raises zring.Error (kind
    'connection_failed' or 'timeout') when the daemon does not answer.
    """
    return _json.loads(_zring._status_json(endpoint, int(timeout_ms)))
