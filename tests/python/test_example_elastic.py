"""examples/elastic: a node killed part-way through training and started
again; every worker must end with the same weights, and the timeline must
show the ring shrink, grow back and the joiner take rank 0's state."""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_the_elastic_example_ends_with_identical_weights_after_a_death_and_a_return(zringd):
    pytest_timeout_s = 600
    # 150 steps of 10 ms (the example's own run: 400 of 25 ms): what is checked
    # is the death, the return and the weights, not the accuracy (tolerance 1).
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "elastic", "elastic.py"), "--zringd",
         zringd, "--steps", "150", "--step-ms", "10", "--tolerance", "1"],
        capture_output=True, text=True, timeout=pytest_timeout_s)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "weights of the 4 workers at the end: identical" in out, out
    assert "killed n2 (its zringd and its worker)" in out, out
    assert "'world': 3" in out and "'world': 4" in out, out
    assert "state from rank 0 {'step':" in out and "'mine': True}" in out, out
