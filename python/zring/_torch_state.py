"""broadcast_state: one rank's model and optimizer state onto every rank.

Exported as zring.torch.broadcast_state (see its docstring). Kept apart from
zring/torch.py, which holds the gradient paths.
"""

import pickle

import torch

from ._errors import Error

# The longest optimizer description (pickled non-tensor state) accepted from
# the root: a sanity bound on 8 bytes that came off the ring.
_MAX_DESCRIPTION_BYTES = 1 << 31


class _TensorSlot:
    """Where a tensor of root's optimizer state_dict goes, in its description."""

    __slots__ = ("index", "dtype", "shape")

    def __init__(self, index, dtype, shape):
        self.index, self.dtype, self.shape = index, dtype, tuple(shape)

    def __getstate__(self):
        return (self.index, self.dtype, self.shape)

    def __setstate__(self, state):
        self.index, self.dtype, self.shape = state


class _Transfer:
    """Tensors of any dtype and device, as a dict of float32 CPU tensors that
    zring's broadcast copies bit for bit: a contiguous float32 CPU tensor is
    itself, any other one travels as its bytes viewed as float32 (padded to a
    multiple of 4) and is written back once the op is over. A tensor added
    again under another name (tied weights: one memory, two state_dict
    entries) travels once."""

    def __init__(self):
        self.arrays = {}
        self._write_back = []
        self._seen = set()

    def add(self, name, tensor):
        t = tensor.detach()
        memory = (t.device, t.data_ptr(), t.dtype, tuple(t.shape), t.stride())
        if t.numel() and memory in self._seen:
            return
        self._seen.add(memory)
        if t.dtype == torch.float32 and t.device.type == "cpu" and t.is_contiguous():
            self.arrays[name] = t
            return
        flat = t.contiguous().reshape(-1)
        data = flat.cpu().view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
        staged = torch.zeros((data.numel() + 3) // 4, dtype=torch.float32)
        staged.view(torch.uint8)[:data.numel()].copy_(data)
        self.arrays[name] = staged
        self._write_back.append((t, staged, data.numel()))

    def run(self, allreduce, root):
        allreduce.broadcast(self.arrays, root)
        for t, staged, nbytes in self._write_back:
            got = staged.view(torch.uint8)[:nbytes].view(t.dtype).reshape(t.shape)
            with torch.no_grad():
                t.copy_(got.to(t.device))


def _describe(value, tensors):
    """value with every tensor replaced by a _TensorSlot (appended to tensors)."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _TensorSlot(len(tensors) - 1, value.dtype, value.shape)
    if isinstance(value, dict):
        return {k: _describe(v, tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_describe(v, tensors) for v in value)
    return value


def _fill(value, tensors):
    """The inverse of _describe: each _TensorSlot replaced by its tensor."""
    if isinstance(value, _TensorSlot):
        return tensors[value.index]
    if isinstance(value, dict):
        return {k: _fill(v, tensors) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_fill(v, tensors) for v in value)
    return value


def _broadcast_bytes(allreduce, data, root, name):
    """root's bytes on every rank (each rank passes its own, of any length)."""
    length = torch.zeros(2, dtype=torch.float32)
    length.view(torch.int64)[0] = len(data)
    allreduce.broadcast({name + ".length": length}, root)
    size = int(length.view(torch.int64)[0])
    if not 0 < size <= _MAX_DESCRIPTION_BYTES:
        raise Error("malformed_message", f"zring.torch.broadcast_state: rank {root} announced "
                                         f"an optimizer description of {size} bytes")
    buffer = torch.zeros((size + 3) // 4, dtype=torch.float32)
    if len(data) == size:
        buffer.view(torch.uint8)[:size].copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    allreduce.broadcast({name + ".bytes": buffer}, root)
    return buffer.view(torch.uint8)[:size].numpy().tobytes()


def _broadcast_optimizer(allreduce, optimizer, root):
    mine = []
    description = pickle.dumps(_describe(optimizer.state_dict(), mine),
                               protocol=pickle.HIGHEST_PROTOCOL)
    try:
        roots = pickle.loads(_broadcast_bytes(allreduce, description, root, "zring.optimizer"))
    except Exception as e:  # whatever bytes that are not a pickle make it raise
        raise Error("malformed_message", f"zring.torch.broadcast_state: rank {root}'s optimizer "
                                         f"description does not unpickle: {e}") from e
    slots = []
    _collect_slots(roots, slots)
    tensors = []
    transfer = _Transfer()
    for slot in slots:
        own = mine[slot.index] if slot.index < len(mine) else None
        fits = own is not None and own.dtype == slot.dtype and tuple(own.shape) == slot.shape
        tensor = own if fits else torch.empty(slot.shape, dtype=slot.dtype)
        tensors.append(tensor)
        transfer.add(f"zring.optimizer.{slot.index:08d}", tensor)
    transfer.run(allreduce, root)
    by_index = {slot.index: t for slot, t in zip(slots, tensors)}
    try:
        optimizer.load_state_dict(_fill(roots, by_index))
    except (ValueError, KeyError, TypeError) as e:  # what torch raises for a state that does not fit
        raise Error("invalid_argument", f"zring.torch.broadcast_state: rank {root}'s optimizer "
                                        f"state does not fit this rank's optimizer ({e}); every "
                                        "rank needs the same kind of optimizer over the same "
                                        "parameter groups") from e


def _collect_slots(value, slots):
    if isinstance(value, _TensorSlot):
        slots.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _collect_slots(v, slots)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect_slots(v, slots)


def broadcast_state(allreduce, model, optimizer=None, root=0):
    """Makes every rank's model and optimizer state equal to rank root's, bit
    for bit (as Horovod elastic's state.sync()): how a rank that joins the
    ring gets the current weights and optimizer state from a live one.

    allreduce: a connected zring.CompressedAllReduce (or a standalone one
    with world_size 1, which changes nothing). model: a torch.nn.Module (DDP
    or not): every entry of its state_dict(), parameters and buffers of any
    dtype and device, is overwritten in place with root's. optimizer: a
    torch.optim.Optimizer (or None): root's state_dict() is loaded into it
    with load_state_dict, tensors (exp_avg, momentum buffers, step) and
    everything else (step counts, param_groups' lr, betas, ...) alike, also
    on a rank whose optimizer has no state yet (a fresh joiner that has not
    stepped). Call it on every rank at once, with the same root.

    How: the model's tensors go in one zring broadcast (nothing compressed,
    whatever the method: any bits arrive as they left; a tensor that is not
    a contiguous float32 CPU tensor travels as its bytes viewed as float32).
    The optimizer's state_dict is pickled on every rank with its tensors
    left out; root's pickle (its length first) then its tensors follow in
    two more broadcasts. Unpickling root's bytes trusts root as much as the
    ring already does. Raises zring.Error as CompressedAllReduce.broadcast
    does: 'manifest_mismatch' naming the tensor when a rank's model has
    other names or shapes than root's, 'invalid_argument' for a root beyond
    the ring. When it raises, call it again: the state may be partly root's.
    """
    if not isinstance(model, torch.nn.Module):
        raise Error("invalid_argument", "zring.torch.broadcast_state: model must be a "
                                        f"torch.nn.Module, not {type(model).__name__}")
    transfer = _Transfer()
    for name, tensor in model.state_dict().items():
        transfer.add("zring.model." + name, tensor)
    transfer.run(allreduce, root)
    if optimizer is not None:
        _broadcast_optimizer(allreduce, optimizer, root)
