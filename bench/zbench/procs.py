"""Child processes that never outlive the driver.

Every child gets PR_SET_PDEATHSIG (SIGKILL), so it dies with the driver even
when the driver is killed outright, and its own session, so a Ctrl-C in the
terminal reaches the driver only and the driver stops its children in order.
Processes are only ever stopped by the pid the driver got when it started
them.
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


class Failed(Exception):
    """A child exited badly or ran out of time; the message says which and why."""


class Child:
    def __init__(self, name, argv, log_path, env=None, append=False):
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "ab" if append else "wb")
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.popen = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=full_env,
                                      preexec_fn=_die_with_parent, start_new_session=True)

    @property
    def pid(self):
        return self.popen.pid

    def running(self):
        return self.popen.poll() is None

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def stop(self, grace=3.0):
        """SIGTERM, then SIGKILL after `grace` seconds; always reaps."""
        if self.running():
            try:
                self.popen.send_signal(signal.SIGTERM)
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
            except ProcessLookupError:
                pass
        self._log.close()


class Group:
    """The children of one step of the benchmark (a ring, a set of clients)."""

    def __init__(self):
        self.children = []

    def spawn(self, name, argv, log_path, env=None, append=False):
        child = Child(name, argv, log_path, env, append)
        self.children.append(child)
        return child

    def wait(self, timeout, also_alive=()):
        """Waits for every child to exit 0. Raises Failed as soon as one exits
        otherwise (the others would only wait for it), when one of
        `also_alive` (processes they need) exits, or at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            for other in also_alive:
                if not other.running():
                    raise Failed(f"{other.name} exited with status {other.popen.returncode} "
                                 f"while {self.children[0].name} and the others ran")
            running = False
            for child in self.children:
                code = child.popen.poll()
                if code is None:
                    running = True
                elif code != 0:
                    raise Failed(f"{child.name} exited with status {code}; "
                                 f"last lines of {child.log_path}:\n{child.log_tail()}")
            if not running:
                return
            if time.monotonic() > deadline:
                late = [c.name for c in self.children if c.running()]
                raise Failed(f"{', '.join(late)} still running after {timeout:.0f} s; "
                             f"last lines of {self.children[0].log_path}:\n"
                             f"{self.children[0].log_tail()}")
            time.sleep(0.05)

    def stop(self):
        for child in reversed(self.children):
            child.stop()
        self.children = []
