"""The counts the chaos soak prints at the end."""


def _counts(counter):
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"


def print_report(soak):
    t, a, ring = soak.tally, soak.args, soak.ring
    print()
    print(f"chaos soak: seed {a.seed}, {soak.elapsed:.0f} s of faults (asked {a.duration:.0f} s), "
          f"{ring.nodes} nodes x {ring.local_ranks} local ranks, timeout_ms {ring.timeout_ms} "
          f"(clients {ring.client_timeout_ms}), heartbeat_ms {ring.heartbeat_ms}")
    print(f"  rounds       {t.rounds}: exact on every rank {t.rounds_exact}, partly failed "
          f"{t.rounds_partial}, failed on every rank {t.rounds_failed}")
    print(f"  ops          {t.rank_ops} answered (rank x round): exact {t.exact}, errors "
          f"{sum(t.errors.values())}; {t.no_answer} not answered (client killed)")
    print(f"  errors       {_counts(t.errors)}")
    print(f"  worst time to error {t.worst_error_s:.2f} s (deadline timeout_ms + 1 s = {soak.deadline_s:.1f} s, "
          f"violation past {soak.deadline_s + a.margin:.1f} s); {t.late} past their deadline")
    print(f"  worst client timeout (its zringd stopped) {t.worst_client_timeout_s:.2f} s "
          f"(deadline client timeout + 1 s = {soak.client_deadline_s:.1f} s)")
    if t.worst_error_at:
        print(f"    worst: {t.worst_error_at[:300]}")
    print(f"  methods      {_counts(t.methods)}")
    print(f"  client forms {_counts(t.apis)}")
    injected = sum(f["injected"] for f in t.faults.values())
    recovered = sum(f["recovered"] for f in t.faults.values())
    print(f"  faults       {injected} injected, {recovered} recoveries")
    for kind in sorted(t.faults):
        f = t.faults[kind]
        print(f"    {kind:18} {f['injected']:3} injected ({f['mid_op']} mid-op), recovered "
              f"{f['recovered']} (worst {f['worst_recovery_s']:.2f} s after the repair); errors "
              f"{_counts(f['errors'])}; worst time to error {f['worst_s']:.2f} s")
    print(f"  restarts     zringd {sum(ring.restarts)}, clients {sum(ring.client_starts) - ring.world_size}")
    if soak.runner.garbage_sent:
        print(f"  garbage      bursts by form: {_counts(soak.runner.garbage_sent)}")
    for n, status in enumerate(soak.final_status):
        keys = ("ops_done", "ops_failed", "formations", "dropped", "malformed", "disconnects")
        shown = ", ".join(f"{k} {status[k]}" for k in keys if k in status)
        print(f"  {ring.name(n)} since its last start: {shown or status.get('error', 'no status')}")
    print(f"  left behind  {soak.left_behind or 'nothing'}")
    if t.violations:
        print(f"FAIL: {len(t.violations)} violations:")
        for v in t.violations[:50]:
            print(f"  - {v}")
    else:
        print("PASS: every op was exact or a clear error in time, the ring recovered after every "
              "fault, nothing was left behind")
