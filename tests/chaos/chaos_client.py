"""A training process of the chaos soak: all-reduces what the driver says.

    chaos_client.py --endpoint ipc:///.../n2.sock --rank 2 --local-rank 0 --seed 7 --timeout-ms 2000

It reads one JSON command a line on stdin and answers each with one JSON
line on stdout:

    {"cmd": "round", "round": 12, "method": "quant:8", "shapes": "small", "api": "copy", "fresh": false}
        -> {"round": 12, "ok": true, "digest": "...", "t0": ..., "t1": ...}
        -> {"round": 12, "ok": false, "kind": "timeout", "message": "...", "phase": "op", ...}
    {"cmd": "dump", "path": "/.../r12-2.npz"}   the last result, for a diagnosis
    {"cmd": "loop", "first_step": 40, "methods": [...], "pause_ms": 10}
        -> the free-running loop: steps 40, 41, ... one after another, each
           planned by workload.step_plan (the same on every rank), each
           answered as a round is ({"round": 40, ...}); a step that fails is
           retried ("on_error": "retry") or skipped ("skip").
           Until {"cmd": "stop"} -> {"stopped_at": <the last step run>}
    {"cmd": "quit"}

A round builds this rank's tensors (workload.make_inputs), connects first if
it has no connection or the method changed or "fresh" is set (a new
connection takes the local rank over, which resets its error-feedback
residuals in zringd), and all-reduces them through one of the client's
forms: all_reduce (copy), all_reduce_in_place of numpy arrays (in_place) or
of zring.SharedTensors (shared). t0 and t1 are time.monotonic() (the
system-wide CLOCK_MONOTONIC, the driver's clock too) before and after. A
zring.Error is answered with its kind and message; anything else with kind
"python:<type>", which the driver counts as a defect.
"""

import argparse
import json
import os
import select
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import zring  # noqa: E402
import workload  # noqa: E402


class Worker:
    def __init__(self, args):
        self.args = args
        self.ar = None
        self.method = None
        self.shared = {}  # shape set -> zring.SharedTensors of self.ar
        self.last = None
        self.quit = False

    def disconnect(self):
        for tensors in self.shared.values():
            tensors.close()
        self.shared = {}
        if self.ar is not None:
            self.ar.close()
        self.ar = None

    def connect(self, method):
        self.disconnect()
        self.method = method
        self.ar = zring.CompressedAllReduce.connect(self.args.endpoint, method,
                                                    local_rank=self.args.local_rank,
                                                    timeout_ms=self.args.timeout_ms)
        if self.ar.rank != self.args.rank or self.ar.world_size != self.args.world_size:
            raise RuntimeError(f"connected as rank {self.ar.rank} of {self.ar.world_size}, "
                               f"expected rank {self.args.rank} of {self.args.world_size}")

    def reduce(self, tensors, shapes, api):
        if api == "copy":
            return self.ar.all_reduce(tensors)
        if api == "in_place":
            out = {name: value.copy() for name, value in tensors.items()}
            self.ar.all_reduce_in_place(out)
            return out
        shared = self.shared.get(shapes)
        if shared is None:
            shared = self.ar.make_shared_tensors({n: v.shape for n, v in tensors.items()})
            self.shared[shapes] = shared
        for name, value in tensors.items():
            shared[name][...] = value
        self.ar.all_reduce_in_place(shared)
        return {name: np.array(shared[name]) for name in tensors}

    def round(self, command):
        answer = {"round": command["round"]}
        tensors, _ = workload.make_inputs(self.args.seed, command["round"], self.args.rank,
                                          command["method"], command["shapes"])
        phase = "connect"
        answer["t0"] = time.monotonic()
        try:
            if self.ar is None or command.get("fresh") or self.method != command["method"]:
                self.connect(command["method"])
            phase = "op"
            result = self.reduce(tensors, command["shapes"], command["api"])
            answer["t1"] = time.monotonic()
            self.last = result
            answer.update(ok=True, digest=workload.digest(result))
        except zring.Error as e:
            answer.update(t1=time.monotonic(), ok=False, kind=e.kind, message=e.message, phase=phase)
            if phase == "connect":
                self.ar = None  # the next round connects again
        except Exception as e:  # a defect: the driver reports it
            answer.update(t1=time.monotonic(), ok=False, kind="python:" + type(e).__name__,
                          message=str(e), phase=phase)
            self.ar = None
        return answer


class Lines:
    """Lines from stdin without Python's buffering, so that the loop can look
    for a command between two steps without waiting."""

    def __init__(self):
        self.buffer = b""
        self.closed = False

    def next(self, wait):
        while b"\n" not in self.buffer and not self.closed:
            if not wait and not select.select([0], [], [], 0)[0]:
                return None
            chunk = os.read(0, 65536)
            self.closed = not chunk
            self.buffer += chunk
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def loop(worker, command, lines):
    step = command["first_step"]
    while True:
        stop = lines.next(wait=False)
        if stop is not None or lines.closed:
            worker.quit = lines.closed or stop["cmd"] == "quit"
            return {"stopped_at": step - 1}
        plan = workload.step_plan(worker.args.seed, step, command["methods"])
        answer = worker.round(dict(plan, round=step))
        print(json.dumps(answer), flush=True)
        if answer["ok"] or command.get("on_error") == "skip":
            step += 1
        time.sleep(command.get("pause_ms", 0) / 1000.0)  # the step's compute


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--local-rank", type=int, default=0)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--timeout-ms", type=int, required=True)
    args = parser.parse_args()
    worker = Worker(args)
    print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
    lines = Lines()
    while True:
        command = lines.next(wait=True)
        if command is None or command["cmd"] == "quit":
            break
        if command["cmd"] == "round":
            answer = worker.round(command)
        elif command["cmd"] == "loop":
            answer = loop(worker, command, lines)
        elif command["cmd"] == "dump":
            np.savez(command["path"], **(worker.last or {}))
            answer = {"dumped": command["path"]}
        else:
            answer = {"error": f"unknown command {command['cmd']!r}"}
        print(json.dumps(answer), flush=True)
        if worker.quit:
            break
    worker.disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
