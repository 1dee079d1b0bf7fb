"""Child processes of the chaos soak, and proof that none is left behind.

Every child runs in its own session (a Ctrl-C in the terminal reaches the
driver only, which then stops its children itself) and gets
PR_SET_PDEATHSIG = SIGKILL, so the kernel kills it if the driver dies
without cleaning up. Every child is registered when it starts; stop_all()
(the driver calls it from `finally`, from atexit and from its signal
handlers) continues any stopped child, sends SIGTERM, waits, then SIGKILLs
and reaps. Processes are only ever signalled by the pid they were started
with.
"""

import ctypes
import os
import signal
import subprocess
import time

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Child:
    """One started process; `talking` ones have their stdin and stdout on pipes."""

    def __init__(self, name, argv, log_path, env=None, talking=False):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.stopped = False  # SIGSTOPped by the soak and not yet continued
        self.killed = False   # SIGKILLed by the soak
        self._buffer = b""
        with open(log_path, "ab") as log:
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.PIPE if talking else subprocess.DEVNULL,
                stdout=subprocess.PIPE if talking else log, stderr=log, env=env,
                preexec_fn=_die_with_parent, start_new_session=True)
        if talking:
            os.set_blocking(self.popen.stdout.fileno(), False)

    @property
    def pid(self):
        return self.popen.pid

    def running(self):
        return self.popen.poll() is None

    def signal(self, sig):
        if self.running():
            try:
                self.popen.send_signal(sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGSTOP:
            self.stopped = True
        elif sig == signal.SIGCONT:
            self.stopped = False
        elif sig == signal.SIGKILL:
            self.killed = True

    def send_line(self, text):
        """Writes a line to its stdin; False when it is gone."""
        try:
            self.popen.stdin.write(text.encode() + b"\n")
            self.popen.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def read_lines(self):
        """The complete lines it wrote since the last call, and whether its
        stdout is at its end (the process exited or closed it)."""
        ended = False
        while True:
            try:
                chunk = os.read(self.popen.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            except (OSError, ValueError):
                ended = True
                break
            if not chunk:
                ended = True
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [line.decode(errors="replace") for line in lines if line.strip()], ended

    def log_tail(self, lines=12):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read()[-20000:].decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def stop(self, grace_s):
        """Continues it if stopped, SIGTERM, SIGKILL after grace_s; reaps.
        Returns its exit status and whether it exited within the grace."""
        in_time = True
        if self.running():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                in_time = False
                self.signal(signal.SIGKILL)
                self.popen.wait()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        return self.popen.returncode, in_time


class Registry:
    """Every child the soak started, in order."""

    def __init__(self):
        self.children = []

    def spawn(self, name, argv, log_path, env=None, talking=False):
        child = Child(name, argv, log_path, env, talking)
        self.children.append(child)
        return child

    def stop_all(self, grace_s=3.0):
        for child in reversed(self.children):
            child.stop(grace_s)


def processes_mentioning(text):
    """(pid, command line) of every process but this one whose command line
    contains text (the soak's run directory is in every child's)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if text in cmdline:
            found.append((int(entry), cmdline))
    return found


def wait_gone(pids, timeout_s):
    """Waits until none of pids exists (zombies of other parents count as gone)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                        alive.append(pid)
            except OSError:
                pass
        if not alive:
            return []
        time.sleep(0.05)
    return alive
