"""The side-by-side all-reduce benchmark: zring against Gloo and Open MPI.

bench/run.sh is the one command; bench/allreduce_bench.py the driver; the
modules here are its parts:

    plan      sizes, methods, iterations per size
    procs     child processes that never outlive the driver
    network   loopback, or one network namespace per node behind shaped links
    runners   how each implementation is started, one process per rank
    stats     per-op times (max over ranks), median/min/max, algbw, busbw
    report    summary CSV, tables on the console and in Markdown
    svg       the plots, as hand-written SVG
"""
