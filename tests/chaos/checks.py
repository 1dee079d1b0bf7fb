"""What the chaos soak checks about every round, and what it counts.

A round is one all-reduce on every rank (the driver sends all ranks the
same round and waits for every answer). Each rank's answer must be either

- a result whose bits are those of every other rank with a result, and
  those of the exact average (workload.reference), or
- a zring.Error of a kind a fault can cause (timeout, peer_lost, aborted,
  ring_changed, connection_failed) with a message, within the deadline the product
  promises (docs/errors.md): timeout_ms + 1 s after the later of the op's
  start and the last fault action before the error; for the errors a client
  raises itself when its zringd stops answering ("went silent", "no answer
  from zringd") its own timeout + 1 s. Past the deadline an error is
  counted as late, past the deadline plus a margin for a loaded machine it
  is a violation.

Anything else is a violation: other bits, another kind of error (a
manifest_mismatch here means ranks were paired with other rounds), an
exception that is not a zring.Error, no answer at all.
"""

import collections

import workload

FAULT_KINDS = ("timeout", "peer_lost", "aborted", "ring_changed", "connection_failed")


class Aborted(Exception):
    """The soak cannot go on (the violation is recorded)."""


class Tally:
    def __init__(self):
        self.rounds = 0
        self.rounds_exact = 0
        self.rounds_partial = 0
        self.rounds_failed = 0
        self.rank_ops = 0
        self.exact = 0
        self.errors = collections.Counter()
        self.no_answer = 0
        self.late = 0
        self.worst_error_s = 0.0
        self.worst_error_at = ""
        self.worst_client_timeout_s = 0.0
        self.methods = collections.Counter()
        self.apis = collections.Counter()
        self.violations = []
        # per fault kind: injected, mid-op, errors by kind, worst, recoveries
        self.faults = collections.defaultdict(lambda: {
            "injected": 0, "mid_op": 0, "errors": collections.Counter(), "worst_s": 0.0,
            "recovered": 0, "worst_recovery_s": 0.0})

    def violation(self, text):
        self.violations.append(text)
        if len(self.violations) <= 30:
            print(f"VIOLATION: {text}", flush=True)
        elif len(self.violations) == 31:
            print("(further violations are counted, not printed)", flush=True)


class Residuals:
    """Every rank's error-feedback residual as zringd holds it: a dict of
    arrays when known, None when the soak cannot know it (then the rank
    connects afresh before its next op, which resets it to zero)."""

    def __init__(self, world):
        self.state = [{} for _ in range(world)]

    def forget(self, rank):
        self.state[rank] = None


class RoundChecker:
    def __init__(self, tally, world, seed, deadline_s, client_deadline_s, margin_s):
        self.tally = tally
        self.world = world
        self.seed = seed
        self.deadline_s = deadline_s
        self.client_deadline_s = client_deadline_s
        self.margin_s = margin_s
        self.history = {}  # round -> (method, shapes)
        self.plan_of = self.history.get  # round -> (method, shapes) or None
        self.explained = 0

    def inputs(self, round_, method, shapes):
        made = [workload.make_inputs(self.seed, round_, r, method, shapes) for r in range(self.world)]
        masks = [m for _, m in made]
        return [t for t, _ in made], (masks if masks[0] is not None else None)

    def check(self, round_, command, answers, episode, events, residuals, ambiguous, label):
        """Checks one round; answers: rank -> answer dict (None: the client was
        killed). episode: the fault in progress, if any; label says where the
        round stands. ambiguous: ranks whose residual may have been reset to
        zero during the round (their zringd was killed). Updates residuals."""
        t, method, shapes = self.tally, command["method"], command["shapes"]
        self.history[round_] = (method, shapes)
        where = f"round {round_} ({method}, {shapes}, {command['api']}; {label or 'before any fault'})"
        t.rounds += 1
        t.methods[method] += 1
        t.apis[command["api"]] += 1
        inputs, masks = self.inputs(round_, method, shapes)
        feedback = workload.has_feedback(method)
        expected = self.expected(method, inputs, masks, residuals, ambiguous if feedback else ())
        ok_digests = {}
        for rank in range(self.world):
            answer = answers.get(rank)
            if answer is None:
                t.no_answer += 1
                residuals.forget(rank)
                continue
            t.rank_ops += 1
            if episode is not None:
                episode.intervals.append((answer["t0"], answer["t1"]))
            if answer["ok"]:
                ok_digests[rank] = answer["digest"]
            else:
                self.check_error(rank, answer, where, episode, events)
                residuals.forget(rank)
        if ok_digests:
            self.check_results(ok_digests, expected, where, residuals, feedback, round_)
        for rank in ambiguous:
            residuals.forget(rank)
        exact_all = (len(ok_digests) == self.world and len(set(ok_digests.values())) == 1
                     and next(iter(ok_digests.values())) in expected)
        if exact_all:
            t.rounds_exact += 1
        elif ok_digests:
            t.rounds_partial += 1
        else:
            t.rounds_failed += 1
        return exact_all

    def expected(self, method, inputs, masks, residuals, ambiguous):
        """digest -> residuals after the op, for every possibility (several
        only when a rank's residual may have been reset during the round)."""
        out = {}
        choices = [[]]
        feedback = workload.has_feedback(method)
        for rank in range(self.world):
            options = [residuals.state[rank] if feedback else None]
            if rank in ambiguous:
                options.append({})
            choices = [c + [o] for c in choices for o in options]
        for before in choices:
            averages, after = workload.reference(method, inputs, masks, before)
            out.setdefault(workload.digest(averages), after)
        return out

    def check_results(self, ok_digests, expected, where, residuals, feedback, round_):
        t = self.tally
        groups = collections.defaultdict(list)
        for rank, d in ok_digests.items():
            groups[d].append(rank)
        if len(groups) > 1:
            t.violation(f"{where}: the ranks got different bits: " +
                        "; ".join(f"ranks {v} one result" for v in groups.values()))
        for d, ranks in groups.items():
            if d in expected:
                t.exact += len(ranks)
                if feedback:
                    for rank in ranks:
                        residuals.state[rank] = expected[d][rank]
            else:
                t.violation(f"{where}: ranks {ranks} got a result that is not the exact average"
                            f"{self.explain(round_, d)}")
                for rank in ranks:
                    residuals.forget(rank)

    def explain(self, round_, got):
        """Whether the wrong bits are the average of this round's inputs on
        some ranks and another round's on the others (ranks paired with other
        rounds' submissions). Tried for the first few wrong results only."""
        method, shapes = self.history[round_]
        if workload.has_feedback(method) or self.explained >= 5:
            return ""
        self.explained += 1
        inputs, masks = self.inputs(round_, method, shapes)
        subsets = [[r for r in range(self.world) if bits >> r & 1] for bits in range(1, (1 << self.world) - 1)]
        for other in (round_ - 1, round_ + 1, round_ - 2, round_ + 2, round_ - 3, round_ + 3):
            if other < 0 or self.plan_of(other) != (method, shapes):
                continue
            old, old_masks = self.inputs(other, method, shapes)
            for ranks in subsets:
                mixed = [old[r] if r in ranks else inputs[r] for r in range(self.world)]
                mixed_masks = None if masks is None else [
                    old_masks[r] if r in ranks else masks[r] for r in range(self.world)]
                averages, _ = workload.reference(method, mixed, mixed_masks)
                if workload.digest(averages) == got:
                    return (f": it is the average with the inputs of round {other} on ranks {ranks} "
                            f"(ranks were paired with other rounds' submissions)")
        return " (nor a mix of its inputs with another round's up to 3 away)"

    def check_failed_attempt(self, round_, command, rank, answer, episode, events, label):
        """A failed attempt at a step that the rank then retried (free loop)."""
        where = f"round {round_} ({command['method']}, {command['shapes']}, {command['api']}; {label})"
        self.tally.rank_ops += 1
        if episode is not None:
            episode.intervals.append((answer["t0"], answer["t1"]))
        if answer["ok"]:
            self.tally.violation(f"{where}: rank {rank} retried a step that had worked")
        else:
            self.check_error(rank, answer, where, episode, events)

    def check_error(self, rank, answer, where, episode, events):
        t = self.tally
        kind, message = answer["kind"], answer.get("message", "")
        t.errors[kind] += 1
        if episode is not None:
            t.faults[episode.kind]["errors"][kind] += 1
        what = f"{where}: rank {rank}: {kind}: {message}"
        if episode is None:
            t.violation(f"{what} (an op failed with no fault in progress)")
        if kind not in FAULT_KINDS:
            t.violation(f"{what} (not an error a fault may cause)")
            return
        if not message:
            t.violation(f"{what} (an error without a message)")
        last = events.last_event_before(answer["t1"])
        since = max(answer["t0"], last if last is not None else answer["t0"])
        took = answer["t1"] - since
        print(f"    round {answer['round']} rank {rank}: {kind} after {took:.2f} s: {message[:160]}",
              flush=True)
        client_side = "went silent" in message or "no answer from zringd" in message
        deadline = self.client_deadline_s if client_side else self.deadline_s
        if client_side:
            t.worst_client_timeout_s = max(t.worst_client_timeout_s, took)
        elif took > t.worst_error_s:
            t.worst_error_s = took
            t.worst_error_at = what
        if episode is not None:
            stats = t.faults[episode.kind]
            stats["worst_s"] = max(stats["worst_s"], took)
        if took > deadline:
            t.late += 1
            print(f"late: {took:.2f} s > {deadline:.1f} s: {what}", flush=True)
        if took > deadline + self.margin_s:
            t.violation(f"{what}: the error came {took:.2f} s after the op began or the last fault "
                        f"action, beyond the deadline {deadline:.1f} s + {self.margin_s:.1f} s margin")
