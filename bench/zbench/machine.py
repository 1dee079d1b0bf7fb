"""What ran where, for the benchmark reports: load, commit, processor."""

import os
import platform
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load():
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


def git_describe():
    """The commit the benchmark ran, noting uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def tcp_congestion_control():
    """The kernel's default TCP congestion control (BBR paces even on loopback)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            return f.read().strip()
    except OSError:
        return "unknown"
