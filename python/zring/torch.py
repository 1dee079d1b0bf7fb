"""zring.torch: zring in PyTorch training loops (CPU tensors; CUDA ones are copied).

Two ways in, both keeping error-feedback state across steps (the daemon keeps
a residual per tensor name, so names are stable: a parameter's name from
named_parameters(), or its position when no names are given):

DDP communication hook: DDP keeps broadcasting the initial weights and
building buckets (any process group will do, e.g. gloo); zring averages the
gradients:

    state = zring.torch.HookState("ipc:///run/zring/zringd.sock", "ef:topk:1%", model=ddp_model)
    ddp_model.register_comm_hook(state, zring.torch.comm_hook)

Optimizer wrapper, in the spirit of Horovod's DistributedOptimizer, for code
without DDP: step() first replaces every gradient by its average over the
ranks, then runs the wrapped optimizer; the gradients live in the buffer
zringd reads (zring.SharedTensors), so backward writes them where the ring
takes them from. Start every rank from the same weights (same seed, or load
the same checkpoint):

    opt = zring.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                           model.named_parameters(),
                                           endpoint="ipc:///run/zring/zringd.sock",
                                           method="ef:sign")

Under torchrun (or any launcher that sets LOCAL_RANK) neither needs an
endpoint or a local rank: the endpoint defaults to zring.default_endpoint()
(ZRING_ENDPOINT, else this node's `ipc` in ZRING_CONFIG or
/etc/zring/zring.yaml) and the local rank to LOCAL_RANK, so one line does it:

    state = zring.torch.register_comm_hook(ddp_model, "ef:topk:1%")

An op that meets a change of the ring's members (a node dropped, restarted or
taken in: zring.Error kind 'ring_changed') is run again on the new ring with
the same gradients, up to RING_CHANGE_RETRIES times, each change logged as a
warning on the logger "zring.torch"; the step goes on, averaged over the
ranks of the new ring. The DDP hook's buckets keep their gradients for that
(their averages are copied out once the op is done); DistributedOptimizer's
gradients live where zringd writes the averages, so its step() raises the
error instead (retry the step, as docs/errors.md advises).

A rank that joins the ring (or every rank, after a restart from different
checkpoints) gets the current weights and optimizer state from a live rank
with broadcast_state, as Horovod elastic's state.sync(): afterwards every
rank's parameters, buffers and optimizer state are root's, bit for bit:

    zring.torch.broadcast_state(allreduce, model, optimizer, root=0)

Misuse is a zring.Error: no daemon (kind 'connection_failed'), a DDP world
size other than zring's, a LOCAL_WORLD_SIZE other than the daemon's
local_ranks, a state that is not a HookState, parameters the optimizer has
but the names do not cover (kind 'invalid_argument').
"""

import concurrent.futures
import logging
import os
import threading

import torch
import torch.distributed as dist

from . import CompressedAllReduce, daemon_status, default_endpoint, default_local_rank
from ._errors import Error
from ._torch_state import broadcast_state

__all__ = ["HookState", "comm_hook", "register_comm_hook", "DistributedOptimizer", "connect",
           "broadcast_state"]

# How many times an op that met a change of the ring is run again (connect()).
RING_CHANGE_RETRIES = 3
_log = logging.getLogger("zring.torch")


def _log_ring_change(error):
    _log.warning("zring.torch: the ring changed during an op, running it again on the new "
                 "ring: %s", error.message)


def connect(endpoint=None, method="none", *, local_rank=None, timeout_ms=30000,
            ring_change_retries=None):
    """CompressedAllReduce.connect with a message that says what zring.torch needed.

    ring_change_retries None: RING_CHANGE_RETRIES, each retry logged (see above).

    endpoint None: zring.default_endpoint() (ZRING_ENDPOINT, else this node's
    `ipc` in ZRING_CONFIG or /etc/zring/zring.yaml). local_rank None: LOCAL_RANK
    (torchrun), else 0; then, when LOCAL_WORLD_SIZE is set too, it must equal
    the daemon's local_ranks (otherwise the daemon would wait for local ranks
    that never come, or refuse some).
    """
    if not endpoint:
        try:
            endpoint = default_endpoint()
        except Error as e:
            raise Error(e.kind, f"zring.torch: {e.message} (or pass allreduce=)") from e
        origin = " (ZRING_ENDPOINT)" if os.environ.get("ZRING_ENDPOINT", "").strip() else \
                 " (from the ring file)"
    else:
        origin = ""
    from_env = local_rank is None
    if from_env:
        local_rank = default_local_rank()
    try:
        retries = RING_CHANGE_RETRIES if ring_change_retries is None else ring_change_retries
        allreduce = CompressedAllReduce.connect(endpoint, method, local_rank=local_rank,
                                                timeout_ms=timeout_ms,
                                                ring_change_retries=retries,
                                                on_ring_change=_log_ring_change)
    except Error as e:
        raise Error(e.kind, f"zring.torch: cannot use the zringd at endpoint {endpoint}{origin}"
                            f": {e.message}") from e
    if from_env:
        _check_local_world_size(allreduce, endpoint)
    return allreduce


def _check_local_world_size(allreduce, endpoint):
    text = os.environ.get("LOCAL_WORLD_SIZE", "").strip()
    if not text.isdigit():
        return
    try:
        local_ranks = int(daemon_status(endpoint).get("local_ranks", 0))
    except Error:
        return  # the first op says what is wrong with the daemon
    if local_ranks and int(text) != local_ranks:
        allreduce.close()
        raise Error("invalid_argument",
                    f"zring.torch: LOCAL_WORLD_SIZE is {text} (processes on this node, e.g. "
                    f"torchrun --nproc_per_node) but the zringd at {endpoint} takes "
                    f"local_ranks: {local_ranks}; start as many processes per node as the "
                    "ring file's local_ranks")


def _checked_allreduce(allreduce, endpoint, method, local_rank, timeout_ms, who):
    if allreduce is None:
        return connect(endpoint, method, local_rank=local_rank, timeout_ms=timeout_ms)
    if not isinstance(allreduce, CompressedAllReduce):
        raise Error("invalid_argument", f"{who}: allreduce must be a zring.CompressedAllReduce, "
                                        f"not {type(allreduce).__name__}")
    if not allreduce.connected and allreduce.world_size != 1:
        raise Error("no_communicator", f"{who}: this CompressedAllReduce is standalone with "
                                       f"world_size {allreduce.world_size}; use "
                                       "CompressedAllReduce.connect(...) (or world_size 1)")
    return allreduce


def _to_cpu(tensor):
    return tensor.detach() if tensor.device.type == "cpu" else tensor.detach().cpu()


class HookState:
    """The state of zring's DDP communication hook: a connection to the local
    zringd and the names of the parameters.

    endpoint, method, local_rank, timeout_ms: as CompressedAllReduce.connect
    (or pass a connected allreduce= instead); without endpoint, the one
    zring.default_endpoint() finds, without local_rank LOCAL_RANK or 0 (see
    zring.torch.connect). model: the module (DDP or not)
    whose named_parameters() name the tensors; without it, parameters are
    named param0, param1, ... in the order DDP first hands them over.
    process_group: DDP's group, to check that its size equals zring's world
    size (default: the default group, when initialised).

    One all-reduce per DDP bucket, in bucket order, on a background thread,
    so communication overlaps the rest of the backward pass. Each bucket is
    sent as its parameters' gradients, one tensor each, so a method applies
    per parameter (top-k keeps 1% of every weight) and the residuals of error
    feedback follow a parameter even when DDP rebuilds its buckets.

    No copies in Python: a CPU float32 bucket is reduced where it is (each
    parameter's gradient is a slice of bucket.buffer(); the C++ client stages
    it through the shared buffer while the ring runs) and the future's value
    is that buffer. Any other bucket (CUDA) is copied to the CPU and back.
    buckets_in_place and buckets_copied count the two.
    """

    def __init__(self, endpoint=None, method="none", *, model=None, local_rank=None,
                 timeout_ms=30000, allreduce=None, process_group=None):
        self.allreduce = _checked_allreduce(allreduce, endpoint, method, local_rank, timeout_ms,
                                            "zring.torch.HookState")
        self.process_group = process_group
        self._names = {}
        self._lock = threading.Lock()
        self._checked_world = False
        self.buckets_in_place = 0
        self.buckets_copied = 0
        if model is not None:
            for name, p in model.named_parameters():
                self._names.setdefault(id(p), name)
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                             thread_name_prefix="zring-hook")

    @property
    def traffic(self):
        """Bytes the ring moved for this rank so far (a zring.Traffic)."""
        return self.allreduce.traffic

    def close(self):
        """Waits for pending buckets, then drops the connection."""
        self._worker.shutdown(wait=True)
        self.allreduce.close()

    def _name(self, param):
        with self._lock:
            name = self._names.get(id(param))
            if name is None:
                name = f"param{len(self._names)}"
                self._names[id(param)] = name
            return name

    def _check_world(self):
        if self._checked_world:
            return
        if dist.is_available() and dist.is_initialized():
            ddp_world = dist.get_world_size(self.process_group)
            if ddp_world != self.allreduce.world_size:
                raise Error("invalid_argument",
                            f"zring.torch.comm_hook: DDP's process group has {ddp_world} "
                            f"ranks but the zring ring has {self.allreduce.world_size}; "
                            "every DDP rank must connect to a zringd of the same ring")
        self._checked_world = True

    def reduce_bucket(self, bucket):
        """Starts the all-reduce of one bucket; a Future of the averaged buffer."""
        self._check_world()
        buffer = bucket.buffer()
        grads = bucket.gradients()
        params = bucket.parameters()
        if len(grads) != len(params):
            raise Error("internal", f"zring.torch.comm_hook: bucket {bucket.index()} has "
                                    f"{len(params)} parameters but {len(grads)} gradients")
        names = [self._name(p) for p in params]
        layout = _bucket_layout(buffer, names, params, grads)
        future = torch.futures.Future()
        if layout is not None:
            self.buckets_in_place += 1

            def run():
                try:
                    self.allreduce.all_reduce_in_place_packed(buffer, layout)
                    future.set_result(buffer)
                except BaseException as e:  # noqa: BLE001 - handed to DDP, which raises it
                    future.set_exception(e)
        else:
            self.buckets_copied += 1
            tensors = {name: _to_cpu(g) for name, g in zip(names, grads)}

            def run():
                try:
                    # Averaged where the CPU copies are (views of g on the CPU), then back.
                    self.allreduce.all_reduce_in_place(tensors)
                    with torch.no_grad():
                        for name, g in zip(names, grads):
                            if g.data_ptr() != tensors[name].data_ptr():
                                g.copy_(tensors[name])
                    future.set_result(buffer)
                except BaseException as e:  # noqa: BLE001 - handed to DDP, which raises it
                    future.set_exception(e)

        self._worker.submit(run)
        return future


def _bucket_layout(buffer, names, params, grads):
    """[(name, shape)] of the parameters' gradients as they lie in the bucket's
    buffer, one after another in parameter order; None when the buffer is not
    one CPU float32 contiguous tensor laid out that way (then the hook copies)."""
    if (buffer.device.type != "cpu" or buffer.dtype != torch.float32
            or buffer.layout != torch.strided or not buffer.is_contiguous()):
        return None
    layout, at, start = [], 0, buffer.data_ptr()
    for name, p, g in zip(names, params, grads):
        n = p.numel()
        if n and (g.data_ptr() != start + 4 * at or g.numel() != n):
            return None
        layout.append((name, tuple(p.shape)))
        at += n
    return layout if at == buffer.numel() else None


def register_comm_hook(model, method="none", **options):
    """Averages the gradients of DDP model through the local zringd: makes a
    HookState(method=method, model=model, **options) and registers it with
    comm_hook on model; returns the state (traffic, buckets_in_place, close()).

    Under torchrun: zring.torch.register_comm_hook(model, "ef:topk:1%") (the
    endpoint and the local rank come from the environment, see connect()).
    """
    if not hasattr(model, "register_comm_hook"):
        raise Error("invalid_argument", "zring.torch.register_comm_hook: model must be a "
                                        "torch.nn.parallel.DistributedDataParallel, not "
                                        f"{type(model).__name__}")
    state = HookState(method=method, model=model, **options)
    model.register_comm_hook(state, comm_hook)
    return state


def comm_hook(state, bucket):
    """DDP communication hook: averages bucket's gradients through zringd.

    Register with model.register_comm_hook(state, zring.torch.comm_hook), state
    a zring.torch.HookState. Returns a torch.futures.Future of the averaged
    bucket; a zring.Error (dead peer, timeout, manifest mismatch) surfaces
    from backward() on every rank.
    """
    if not isinstance(state, HookState):
        raise Error("invalid_argument", "zring.torch.comm_hook: the state given to "
                                        "register_comm_hook must be a zring.torch.HookState, "
                                        f"not {type(state).__name__}")
    return state.reduce_bucket(bucket)


class DistributedOptimizer:
    """Wraps a torch optimizer: step() averages the gradients over the ring first.

    optimizer: any torch.optim.Optimizer. named_parameters: (name, parameter)
    pairs naming every parameter the optimizer has (model.named_parameters());
    without them parameters are named group<g>.param<i>. endpoint, method,
    local_rank, timeout_ms: as CompressedAllReduce.connect (or allreduce=);
    without endpoint and local_rank, from the environment (see connect()).

    The gradients live in the buffer zringd reads: at construction every
    parameter that requires grad gets a slot in one zring.SharedTensors
    (self.shared) and, on the CPU, its .grad becomes a torch view of that slot,
    so backward accumulates straight into it and step() reduces them all in
    one op with no copy. A gradient that was replaced meanwhile
    (zero_grad(set_to_none=True), an assignment to p.grad) is copied into its
    slot once and p.grad points at the slot again; a parameter without one
    contributes zeros, so every rank submits the same tensors. Parameters on
    another device (CUDA) are copied into their slot and back each step.
    Everything else (param_groups, state_dict, ...) is the wrapped
    optimizer's; zero_grad() zeroes the slots in place.
    """

    def __init__(self, optimizer, named_parameters=None, *, endpoint=None, method="none",
                 local_rank=None, timeout_ms=30000, allreduce=None):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise Error("invalid_argument", "zring.torch.DistributedOptimizer: optimizer must be "
                                            f"a torch.optim.Optimizer, not {type(optimizer).__name__}")
        self.optimizer = optimizer
        self._named = self._names(optimizer, named_parameters)
        for name, p in self._named:
            if p.requires_grad and p.dtype != torch.float32:
                raise Error("invalid_argument", f"zring.torch.DistributedOptimizer: parameter "
                                                f"'{name}' is {p.dtype}; zring reduces float32 "
                                                "only (use model.float())")
        self.allreduce = _checked_allreduce(allreduce, endpoint, method, local_rank, timeout_ms,
                                            "zring.torch.DistributedOptimizer")
        reduced = [(name, p) for name, p in self._named if p.requires_grad]
        self.shared = self.allreduce.make_shared_tensors(
            {name: tuple(p.shape) for name, p in reduced})
        self._slots = []
        with torch.no_grad():
            for name, p in reduced:
                slot = self.shared.torch(name)
                if p.grad is not None:
                    slot.copy_(p.grad)
                if p.device.type == "cpu":
                    p.grad = slot
                self._slots.append((name, p, slot))

    @staticmethod
    def _names(optimizer, named_parameters):
        in_optimizer = [p for group in optimizer.param_groups for p in group["params"]]
        if named_parameters is None:
            return [(f"group{g}.param{i}", p) for g, group in enumerate(optimizer.param_groups)
                    for i, p in enumerate(group["params"])]
        named, seen_names, name_of = [], set(), {}
        for name, p in named_parameters:
            if name in seen_names:
                raise Error("invalid_argument", "zring.torch.DistributedOptimizer: the name "
                                                f"'{name}' is given to two parameters")
            seen_names.add(name)
            name_of.setdefault(id(p), name)
        for p in in_optimizer:
            if id(p) not in name_of:
                raise Error("invalid_argument",
                            "zring.torch.DistributedOptimizer: the optimizer has a parameter of "
                            f"shape {tuple(p.shape)} that named_parameters does not name; pass "
                            "the named_parameters() of the model the optimizer trains")
            named.append((name_of[id(p)], p))
        return named

    @property
    def traffic(self):
        """Bytes the ring moved for this rank so far (a zring.Traffic)."""
        return self.allreduce.traffic

    def synchronize(self):
        """Replaces every gradient by its average over the ranks (done by step())."""
        if not self._slots:
            return
        with torch.no_grad():
            for name, p, slot in self._slots:
                g = p.grad
                # Backward accumulated into the slot (the tensor itself, as
                # after the first step, or a view of the same memory):
                # nothing to copy.
                if g is slot or (g is not None and _same_memory(g, slot)):
                    continue
                if g is None:
                    slot.zero_()
                elif g.is_sparse:
                    raise Error("invalid_argument", f"zring.torch.DistributedOptimizer: '{name}' "
                                                    "has a sparse gradient; zring reduces dense ones")
                else:
                    slot.copy_(g)  # replaced meanwhile, or on another device
                if p.is_cpu:
                    p.grad = slot
        self.allreduce.all_reduce_in_place(self.shared)
        with torch.no_grad():
            for name, p, slot in self._slots:
                if p.is_cpu:
                    continue
                if p.grad is None:
                    p.grad = slot.to(p.device)
                else:
                    p.grad.copy_(slot)

    def step(self, closure=None):
        """closure (if any) first, then synchronize(), then the optimizer's step."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.synchronize()
        self.optimizer.step()
        return loss

    def zero_grad(self, set_to_none=False):
        """The wrapped optimizer's zero_grad: in place by default, so the
        gradients stay in their slots; set_to_none=True drops them (the next
        step copies the new ones in once)."""
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def close(self):
        """Drops the shared tensors and the connection. The gradients stay
        valid tensors (their memory lives while they do)."""
        self.shared.close()
        self.allreduce.close()


def _same_memory(grad, slot):
    return (grad.data_ptr() == slot.data_ptr() and grad.shape == slot.shape
            and grad.stride() == slot.stride() and grad.dtype == slot.dtype
            and grad.device == slot.device)
