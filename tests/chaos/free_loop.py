"""The free-running form of the soak (--loop free).

Every client runs its own training loop (chaos_client.py "loop"): step
after step, each planned from (seed, step) alone so all ranks submit the
same manifest at the same step. A step that fails is retried, as
docs/errors.md advises for peer_lost, aborted and ring_changed (--on-error retry), or
skipped, as a loop that logs the error and goes on would (--on-error
skip). Nothing holds the ranks together but zring itself: if one rank
sees more or fewer failures than another, or comes back from a stop
with an old step while the others are further on, it is out of step,
and zring must fail such an op rather than average different steps.

The driver only watches: it collects every rank's outcome of every step
and checks a step (checks.RoundChecker, as a lockstep round) once every
rank has reported it or has left the loop before it. A killed client is
replaced as an elastic launcher would: every loop is stopped, the new
client starts, and all of them go on from the step after the furthest one.
Error-feedback methods are not run here (a rank's residual would depend on
which of its steps its zringd ran, which the driver cannot see).
"""

import json
import select
import signal
import time

from checks import Aborted
from workload import step_plan


class FreeLoop:
    def __init__(self, soak, methods):
        self.soak = soak
        self.ring = soak.ring
        self.methods = methods
        world = self.ring.world_size
        self.loopers = [None] * world      # the client running each rank's loop
        self.loop_end = [None] * world     # the last step of a loop that ended
        self.last_report = [0.0] * world   # when each rank last reported
        self.outcomes = {}                 # step -> {rank: answer}
        self.next_check = 0

        def plan_of(step):
            plan = self.plan(step)
            return plan["method"], plan["shapes"]

        soak.checker.plan_of = plan_of

    # --- running the loops ---------------------------------------------------------

    def start(self, first_step):
        self.soak.wait_clients(None)
        self.next_check = first_step  # every step before it is checked
        now = time.monotonic()
        for rank, client in enumerate(self.ring.clients):
            client.send_line(json.dumps({"cmd": "loop", "first_step": first_step, "methods": self.methods,
                                         "pause_ms": self.soak.args.step_ms,
                                         "on_error": self.soak.args.on_error}))
            self.loopers[rank], self.loop_end[rank], self.last_report[rank] = client, None, now

    def stop(self, episode):
        """Ends every loop; returns the furthest step any rank ran."""
        for rank, client in enumerate(self.loopers):
            if self.loop_end[rank] is None and client.running():
                client.send_line(json.dumps({"cmd": "stop"}))
        while any(end is None for end in self.loop_end):
            self.pump(episode)
        return max(self.loop_end)

    def restart(self, episode):
        """An elastic restart: every loop stops, then all go on together."""
        furthest = self.stop(episode)
        self.start(furthest + 1)

    def pump(self, episode):
        """Reads what the clients said, runs due fault actions, checks the
        steps that are complete; returns [(step, exact, first t0)]."""
        soak = self.soak
        soak.tick(episode)
        fds = [c.popen.stdout.fileno() for r, c in enumerate(self.loopers)
               if self.loop_end[r] is None and not c.popen.stdout.closed]
        select.select(fds, [], [], 0.02)
        now = time.monotonic()
        for rank, client in enumerate(self.loopers):
            if self.loop_end[rank] is not None:
                continue
            lines, ended = client.read_lines()
            for line in lines:
                answer = json.loads(line)
                self.last_report[rank] = now
                if "stopped_at" in answer:
                    self.loop_end[rank] = answer["stopped_at"]
                elif "round" in answer:
                    self.outcomes.setdefault(answer["round"], {}).setdefault(rank, []).append(answer)
            if self.loop_end[rank] is None and ended:
                client.popen.wait()
                self.loop_end[rank] = max([s for s, o in self.outcomes.items() if rank in o],
                                          default=self.next_check - 1)
                if not client.killed:
                    soak.tally.violation(f"client rank {rank} exited with status {client.popen.returncode} "
                                         f"in its loop:\n{client.log_tail()}")
                    soak.ring.start_client(rank)
            last = soak.runner.last_event_before(now) or 0.0
            if (self.loop_end[rank] is None and not client.stopped
                    and now - max(self.last_report[rank], last) > soak.hang_s):
                soak.tally.violation(f"rank {rank} ({episode or 'no fault'}) reported no step for "
                                     f"{soak.hang_s:.0f} s: a hang")
                client.signal(signal.SIGKILL)
                soak.ring.start_client(rank)
        return self.check_complete(episode)

    def check_complete(self, episode):
        """Checks each step once every rank is done with it: it has a result
        for it, or went on past it (skipped it), or its loop ended."""
        checked = []
        while True:
            step = self.next_check
            got = self.outcomes.get(step, {})

            def done(rank):
                attempts = got.get(rank, [])
                return ((attempts and attempts[-1]["ok"]) or self.loop_end[rank] is not None
                        or any(rank in self.outcomes.get(later, {}) for later in (step + 1, step + 2)))

            if not all(done(rank) for rank in range(len(self.loopers))):
                return checked
            if not got:
                return checked
            plan = dict(self.plan(step), cmd="round", round=step)
            t1 = max(a["t1"] for attempts in got.values() for a in attempts)
            in_episode = episode is not None and t1 >= episode.began
            label = episode if in_episode else self.soak.quiet_label
            fault = episode if in_episode else None
            checker = self.soak.checker
            # Every attempt but each rank's last is a failed one, retried.
            for rank, attempts in got.items():
                for answer in attempts[:-1]:
                    checker.check_failed_attempt(step, plan, rank, answer, fault, self.soak.runner, label)
            exact = checker.check(step, plan, {rank: a[-1] for rank, a in got.items()}, fault,
                                  self.soak.runner, self.soak.residuals, set(), label)
            checked.append((step, exact, min(a[-1]["t0"] for a in got.values())))
            del self.outcomes[step]
            self.next_check += 1

    def plan(self, step):
        return step_plan(self.soak.args.seed, step, self.methods)

    # --- the soak -------------------------------------------------------------------

    def run_for(self, seconds, episode=None):
        """Steps for a while; every one must be exact (no fault in progress)."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.pump(episode)
            self.replace_new_clients(episode)

    def replace_new_clients(self, episode):
        """A new client (after a kill) joins through an elastic restart."""
        for rank, client in enumerate(self.ring.clients):
            if client is not self.loopers[rank] and client.running():
                ready, _ = self.ring.poll_ready(client) if not client.ready else (True, False)
                if ready:
                    self.restart(episode)
                return

    def play_episode(self, episode, began):
        soak, stats = self.soak, self.soak.tally.faults[episode.kind]
        episode.begin(time.monotonic())
        print(f"[{time.monotonic() - began:6.1f} s] {episode} under free-running loops", flush=True)
        while True:
            checked = self.pump(episode)
            self.replace_new_clients(episode)
            now = time.monotonic()
            if not episode.finished:
                continue
            if any(exact and t0 >= episode.repaired_at for _, exact, t0 in checked):
                episode.recovered_after = now - episode.repaired_at
                stats["recovered"] += 1
                stats["worst_recovery_s"] = max(stats["worst_recovery_s"], episode.recovered_after)
                break
            if now - episode.repaired_at > soak.recovery_s:
                raise Aborted(soak.tally.violation(
                    f"{episode}: no step was exact on every rank within {soak.recovery_s:.0f} s of "
                    f"the repair: the ring did not recover"))
        stats["mid_op"] += any(t0 <= episode.injected_at <= t1 for t0, t1 in episode.intervals)
        print(f"           recovered {episode.recovered_after:.2f} s after the repair", flush=True)
