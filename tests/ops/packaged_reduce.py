"""Run by test_packages with /usr/bin/python3 -I once the Debian packages are
installed: imports the installed module zring, starts a 2-node ring of the
installed /usr/sbin/zringd, has one rank per node reduce through it and asks
the installed zringctl how it went. Prints one `key: value` line per finding;
the test judges them.
"""
import importlib.util
import json
import subprocess
import threading

import numpy
import zring
from zring.local_ring import LocalRing

print("module:", zring.__file__)
print("version:", zring.__version__)

results = {}
errors = []


def rank(ring, node):
    try:
        ar = zring.CompressedAllReduce.connect(ring.ipc(node), "none")
        grads = {"w": numpy.full(1000, float(node + 1), numpy.float32)}
        results[node] = ar.all_reduce(grads)["w"]
        ar.all_reduce_in_place(grads)
    except Exception as e:  # reported below, judged by the test
        errors.append(f"node {node}: {e!r}")


with LocalRing("/usr/sbin/zringd", nodes=2, timeout_ms=5000) as ring:
    threads = [threading.Thread(target=rank, args=(ring, n)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    status = subprocess.run(["/usr/bin/zringctl", "status", "--endpoint", ring.ipc(0), "--json"],
                            capture_output=True, text=True, timeout=30)
    report = json.loads(status.stdout) if status.returncode == 0 else {}
    print("zringctl status:", status.returncode, status.stderr.strip())
    print("ops done:", report.get("ops_done"))

for e in errors:
    print("error:", e)
for node, values in sorted(results.items()):
    print(f"rank {node} average:", float(values.min()), float(values.max()))

libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libzring.so" in line})
print("libzring:", " ".join(libs))

if importlib.util.find_spec("torch") is None:
    print("zring.torch: no torch")
else:
    import zring.torch  # noqa: F401 (the import is the check)
    print("zring.torch: imported")
