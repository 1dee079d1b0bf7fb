#!/usr/bin/python3
"""One rank of bench/torch_bench.py: started by the driver, never by hand.

    torch_worker.py --config CONFIG.json --rank R

CONFIG says the mode ("allreduce" or "ddp"), the world, the rendezvous file
of torch.distributed (a FileStore, so ranks in different network namespaces
meet through the file system) and, for zring, the IPC endpoint of each
node's zringd. The rank writes rank-R.json (ddp) or rank-R.csv (allreduce)
into the config's output directory; any failure is printed and the process
exits with status 1.

Timings use time.monotonic() (CLOCK_MONOTONIC, the same clock in every
process of the machine, also across network namespaces), so the driver can
line up the ranks' steps.
"""

import argparse
import datetime
import hashlib
import json
import os
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from zbench.torch_task import make_task  # noqa: E402

now = time.monotonic
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- CPU accounting -----------------------------------------------------------

def thread_cpu(pid="self"):
    """{tid: (kernel name, CPU seconds)} of a process's threads."""
    out = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        out[int(tid)] = (text[text.index("(") + 1:text.rindex(")")],
                         (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def cpu_delta(before, after, names=None):
    """{thread name: CPU seconds between the snapshots}: a thread is called by
    its name in `names` ({tid: name}), else by its kernel name (Python's
    threads and torch's all carry the interpreter's); one name's threads summed."""
    out = {}
    for tid, (comm, secs) in after.items():
        d = secs - before.get(tid, (comm, 0.0))[1]
        if d > 0:
            name = (names or {}).get(tid) or ("other threads" if comm.startswith("python") else comm)
            out[name] = round(out.get(name, 0.0) + d, 3)
    return out


def system_busy():
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    total = sum(v[:8])
    return (total - idle) / CLK_TCK, total / CLK_TCK


# --- setup --------------------------------------------------------------------

def init_group(cfg, rank):
    dist.init_process_group("gloo", init_method="file://" + cfg["store"], rank=rank,
                            world_size=cfg["ranks"],
                            timeout=datetime.timedelta(seconds=cfg["timeout"]))


def connect(cfg, rank, method):
    import zring
    node = rank // cfg["local_ranks"]
    return zring.CompressedAllReduce.connect(cfg["endpoints"][node], method,
                                             local_rank=rank % cfg["local_ranks"],
                                             timeout_ms=int(cfg["timeout"] * 1000))


def set_threads(cfg):
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    return torch.get_num_threads()


# --- mode allreduce -------------------------------------------------------------

def shared_view(ar, numel):
    """SharedTensors of one tensor "g" and a torch view of its values, or raises."""
    st = ar.make_shared_tensors({"g": [numel]})
    view = st["g"]
    if not isinstance(view, torch.Tensor):
        view = torch.from_numpy(view) if hasattr(view, "__array_interface__") else \
            torch.as_tensor(view)
    if view.numel() != numel or view.dtype != torch.float32:
        raise TypeError(f"make_shared_tensors gave a view of {view.numel()} {view.dtype}")
    return st, view.view(-1)


def run_allreduce(cfg, rank, out_dir):
    threads = set_threads(cfg)
    init_group(cfg, rank)
    n, world = cfg["numel"], cfg["ranks"]
    g = torch.Generator().manual_seed(1000 + rank)
    src = torch.randn(n, generator=g) * 1e-3
    t = src.clone()
    expected = src.clone()
    dist.all_reduce(expected)
    expected /= world
    rows, notes = [], {"threads": threads}

    def run_gloo():
        t.copy_(src)
        dist.barrier()
        t0 = now()
        dist.all_reduce(t)
        return now() - t0

    back_to_back = cfg.get("barrier") == "none"

    def timed_back_to_back(path, op, restore):
        """Times `path` as a loop issues it: no barrier, the input restored
        (untimed) between ops; with gloo first, a block of gloo ops the same way."""
        blocks = [(path, op, restore)]
        if with_gloo:
            blocks.insert(0, ("gloo", lambda: dist.all_reduce(t), restore_t))
        for name, run, restore_input in blocks:
            for i in range(cfg["warmup"] + cfg["iters"]):
                restore_input()
                t0 = now()
                run()
                t1 = now()
                if i >= cfg["warmup"]:
                    rows.append((name, path, i - cfg["warmup"], t1 - t0))

    def timed(path, op, restore, check=None):
        """Times `path`, every op right after a gloo op (both from a barrier),
        so each path has a gloo reference measured under the same load."""
        if back_to_back:
            timed_back_to_back(path, op, restore)
        for i in range(0 if back_to_back else cfg["warmup"] + cfg["iters"]):
            g_s = run_gloo() if with_gloo else None
            restore()
            dist.barrier()
            t0 = now()
            op()
            t1 = now()
            if i >= cfg["warmup"]:
                rows.append((path, path, i - cfg["warmup"], t1 - t0))
                if g_s is not None:
                    rows.append(("gloo", path, i - cfg["warmup"], g_s))
        if check is not None:
            restore()
            dist.barrier()
            op()
            diff = float((check() - expected).abs().max())
            notes[f"{path} max |result - gloo average|"] = diff

    def restore_t():
        t.copy_(src)

    paths = cfg.get("paths", ["gloo", "copy", "inplace", "shared"])
    with_gloo = "gloo" in paths
    if with_gloo and not set(paths) - {"gloo"}:
        with_gloo = False
        timed("gloo", lambda: dist.all_reduce(t), restore_t)
    for method in cfg["methods"] if set(paths) - {"gloo"} else []:
        ar = connect(cfg, rank, method)
        try:
            def copy_op():
                t.copy_(ar.all_reduce({"g": t})["g"])
            if "copy" in paths:
                timed(f"zring {method} all_reduce+copy_", copy_op, restore_t, lambda: t)
            # The two newer paths may not be in the module yet: said so, on every rank alike.
            if "inplace" not in paths:
                pass
            elif hasattr(ar, "all_reduce_in_place"):
                try:
                    timed(f"zring {method} all_reduce_in_place", lambda: ar.all_reduce_in_place({"g": t}),
                          restore_t, lambda: t)
                except (TypeError, AttributeError) as e:
                    notes[f"zring {method} all_reduce_in_place"] = f"unavailable: {e}"
            else:
                notes[f"zring {method} all_reduce_in_place"] = "unavailable (not in the module)"
            if "shared" not in paths:
                pass
            elif hasattr(ar, "make_shared_tensors"):
                try:
                    st, view = shared_view(ar, n)
                    timed(f"zring {method} SharedTensors", lambda: ar.all_reduce_in_place(st),
                          lambda: view.copy_(src), lambda: view)
                    notes[f"zring {method} SharedTensors zero_copy"] = bool(
                        getattr(st, "zero_copy", False))
                except (TypeError, AttributeError, KeyError) as e:
                    notes[f"zring {method} SharedTensors"] = f"unavailable: {e}"
            else:
                notes[f"zring {method} SharedTensors"] = "unavailable (not in the module)"
            notes[f"zring {method} traffic"] = str(ar.traffic)
        finally:
            ar.close()
    with open(os.path.join(out_dir, f"rank-{rank}.csv"), "w") as f:
        f.write("path,block,iter,seconds\n")
        for path, block, i, s in rows:
            f.write(f"{path},{block},{i},{s:.9f}\n")
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
        json.dump(notes, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


# --- mode ddp -----------------------------------------------------------------

class Timeline:
    """What the instrumented hook saw: one record per bucket per step."""

    def __init__(self):
        self.step = -1
        self.calls = []   # [step, bucket index, numel, tensors, call start, call end, done]
        self.ops = []     # [all_reduce start, all_reduce end], in submission order


class TimedAllReduce:
    """Stands in for HookState.allreduce: times each all-reduce the hook thread
    makes (all_reduce, all_reduce_in_place, all_reduce_in_place_packed, ...)."""

    def __init__(self, ar, timeline):
        self._ar = ar
        self._tl = timeline
        self.tid = None
        self.calls = {}   # method name: count

    def __getattr__(self, name):
        attr = getattr(self._ar, name)
        if not (name.startswith("all_reduce") and callable(attr)):
            return attr

        def timed(*args, **kwargs):
            self.tid = threading.get_native_id()
            self.calls[name] = self.calls.get(name, 0) + 1
            t0 = now()
            out = attr(*args, **kwargs)
            self._tl.ops.append((t0, now()))
            return out
        return timed


def legacy_reduce_bucket(state, bucket):
    """zring.torch's hook as of 9021cff (the issue's measurements), rebuilt here
    to compare with the module's current one: one all_reduce of the bucket's
    gradients as a dict (copied into zring), the averages copied back with
    g.copy_, on HookState's single thread."""
    state._check_world()
    buffer, grads, params = bucket.buffer(), bucket.gradients(), bucket.parameters()
    names = [state._name(p) for p in params]
    tensors = {name: g.detach() for name, g in zip(names, grads)}
    future = torch.futures.Future()

    def run():
        try:
            averaged = state.allreduce.all_reduce(tensors)
            with torch.no_grad():
                for name, g in zip(names, grads):
                    g.copy_(averaged[name])
            future.set_result(buffer)
        except BaseException as e:  # noqa: BLE001 - handed to DDP, which raises it
            future.set_exception(e)

    state._worker.submit(run)
    return future


def make_hook(variant, timeline):
    """The comm hook of a variant, timed: zring's comm_hook, torch's own allreduce_hook
    (what DDP does without a hook, written in Python) or one that averages nothing."""
    if variant == "zring":
        import zring.torch as zt
        inner = zt.comm_hook
    elif variant == "zringcopy":
        inner = legacy_reduce_bucket
    elif variant == "gloohook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        inner = default_hooks.allreduce_hook
    else:
        def inner(_state, bucket):
            return _done_future(bucket.buffer())

    def timed(state, bucket):
        rec = [timeline.step, bucket.index(), bucket.buffer().numel(), len(bucket.gradients()),
               now(), None, None]
        fut = inner(state, bucket)
        rec[5] = now()
        timeline.calls.append(rec)

        def done(f):
            rec[6] = now()
            return f.value()
        return fut.then(done)
    return timed


def _done_future(value):
    fut = torch.futures.Future()
    fut.set_result(value)
    return fut


def param_hash(model):
    h = hashlib.sha1()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def evaluate(model, x, y, chunk=256):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(x), chunk):
            out = model(x[i:i + chunk])
            loss += float(torch.nn.functional.cross_entropy(out, y[i:i + chunk], reduction="sum"))
            correct += int((out.argmax(1) == y[i:i + chunk]).sum())
    model.train()
    return correct / len(x), loss / len(x)


def run_ddp(cfg, rank, out_dir):
    from torch.nn.parallel import DistributedDataParallel as DDP
    threads = set_threads(cfg)
    init_group(cfg, rank)
    variant = cfg["variant"]          # gloo | gloohook | zring | zringcopy | local
    task = make_task(cfg)
    model = task.model()
    ddp = DDP(model, bucket_cap_mb=cfg["bucket_cap_mb"],
              gradient_as_bucket_view=bool(cfg.get("bucket_view")))
    timeline = Timeline()
    state = None
    if variant in ("zring", "zringcopy"):
        import zring.torch as zt
        node = rank // cfg["local_ranks"]
        state = zt.HookState(cfg["endpoints"][node], cfg["method"], model=ddp,
                             local_rank=rank % cfg["local_ranks"],
                             timeout_ms=int(cfg["timeout"] * 1000))
        state.allreduce = TimedAllReduce(state.allreduce, timeline)
        ddp.register_comm_hook(state, make_hook(variant, timeline))
    elif variant == "gloohook":
        ddp.register_comm_hook(dist.group.WORLD, make_hook("gloohook", timeline))
    elif variant == "local":
        ddp.register_comm_hook(None, make_hook("local", timeline))
    opt = torch.optim.SGD(ddp.parameters(), lr=cfg["lr"], momentum=0.9)
    xs, ys = task.shard(rank, cfg["steps"], cfg["batch"])
    deadline = now() + cfg["timeout"]
    dist.barrier()
    traffic0 = state.traffic if state else None
    names = {threading.get_native_id(): "main (fwd, bwd, opt)"}
    daemon = cfg.get("daemon_pid")    # this node's zringd, to count its CPU too
    cpu0, daemon0, sys0 = thread_cpu(), thread_cpu(daemon) if daemon else {}, system_busy()
    steps = []
    loss_fn = torch.nn.functional.cross_entropy
    for i in range(cfg["steps"]):
        timeline.step = i
        t0 = now()
        opt.zero_grad()
        out = ddp(xs[i])
        loss = loss_fn(out, ys[i])
        t1 = now()
        loss.backward()
        t2 = now()
        opt.step()
        t3 = now()
        correct = int((out.detach().argmax(1) == ys[i]).sum())
        steps.append((t0, t1, t2, t3, float(loss.detach()), correct))
        if now() > deadline:
            break
    if state is not None and state.allreduce.tid:
        names[state.allreduce.tid] = "zring-hook"
    cpu1, daemon1, sys1 = thread_cpu(), thread_cpu(daemon) if daemon else {}, system_busy()
    traffic1 = state.traffic if state else None
    result = {
        "rank": rank, "variant": variant, "method": cfg.get("method"), "threads": threads,
        "interop_threads": torch.get_num_interop_threads(),
        "bucket_cap_mb": cfg["bucket_cap_mb"], "steps_done": len(steps),
        "zring_calls": state.allreduce.calls if state is not None else {},
        "steps": steps, "hook_calls": timeline.calls, "hook_ops": timeline.ops,
        "cpu_threads": cpu_delta(cpu0, cpu1, names), "daemon_cpu_threads": cpu_delta(daemon0, daemon1),
        "system_busy_s": sys1[0] - sys0[0], "system_total_s": sys1[1] - sys0[1],
    }
    if traffic0 is not None:
        result["wire_bytes"] = traffic1.wire_bytes - traffic0.wire_bytes
        result["dense_bytes"] = traffic1.dense_bytes - traffic0.dense_bytes
        result["ops"] = traffic1.ops - traffic0.ops
    result["param_hash"] = param_hash(model)
    if rank == 0:
        hx, hy = task.held_out(cfg["held_out"])
        result["held_out_accuracy"], result["held_out_loss"] = evaluate(model, hx, hy)
    with open(os.path.join(out_dir, f"rank-{rank}.json"), "w") as f:
        json.dump(result, f)
    if state is not None:
        state.close()
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--rank", type=int, required=True)
    args = p.parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    out_dir = cfg["out"]
    try:
        if cfg["mode"] == "allreduce":
            run_allreduce(cfg, args.rank, out_dir)
        else:
            run_ddp(cfg, args.rank, out_dir)
    except BaseException:  # noqa: BLE001 - the driver reads the log
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    sys.stdout.flush()
    # torch's and zring's threads are done; skip the interpreter's slow teardown.
    os._exit(0)


if __name__ == "__main__":
    main()
