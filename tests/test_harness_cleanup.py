"""The tests' own process harness: what a test starts ends with the test run, even one killed
before its fixtures could stop it (a CI time-out, Ctrl+C twice, an OOM kill)."""
from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from conftest import REPO, _PDEATHSIG

STARTER = ("import sys, time; sys.path.insert(0, 'tests'); from conftest import start_process; "
           "p = start_process(['-c', 'import time; time.sleep(300)'], "
           "{'ARTOO_HOME': sys.argv[1]}, 'sleeper'); print(p.pid, flush=True); time.sleep(300)")


def gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True            # dead; reaping is its new parent's business
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not _PDEATHSIG, reason="setpriv (util-linux) is missing")
def test_a_process_a_test_started_ends_when_the_test_run_is_killed(tmp_path):
    runner = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    try:
        pid = int(runner.stdout.readline())
        assert not gone(pid, 0.2)                    # it runs while the test run does
    finally:
        runner.kill()
        runner.wait()
    assert gone(pid, 10), psutil.Process(pid).cmdline()
