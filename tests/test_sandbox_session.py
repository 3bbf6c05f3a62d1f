"""One sandbox per subtask attempt (issue 34): the attempt's commands share one bubblewrap
namespace with a command server as its PID 1, and each command still gets the confinement,
limits and time-out of a one-shot sandbox; nothing of a command outlives it."""
from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import uuid

import psutil
import pytest

from protocol.settings import load_settings
from services.safety import sandbox, sandbox_session
from services.safety.tools import Toolbox

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sandbox_session.SERVER_PYTHON,
    reason="bubblewrap or the system python3 is missing")

TAG = f"{uuid.uuid4().int % 10**6:06d}"   # digits: a valid `sleep` interval


@pytest.fixture
def box(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTOO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ARTOO_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("ARTOO_SHELL_TIMEOUT_S", "2")
    monkeypatch.setenv("ARTOO_SANDBOX_MAX_FILE_BYTES", str(1 << 20))
    settings = load_settings()
    settings.ensure_dirs()
    (settings.home / "secret.txt").write_text("CANARY\n")
    tb = Toolbox(settings)
    tb.prewarm()
    yield tb
    tb.close()


def server_pid(tb: Toolbox) -> int:
    session = tb._session(tb.network, True)
    assert session.ready.wait(30) and not session.error, session.error
    return session.proc.pid


def sleepers(mark: str) -> list:
    return [p for p in psutil.process_iter(["cmdline"])
            if mark in " ".join(p.info["cmdline"] or [])]


def test_the_commands_of_an_attempt_share_one_sandbox(box):
    pid = server_pid(box)
    for _ in range(3):
        out = box.run("shell", {"command": "basename $PWD; echo $HOME; cat /proc/1/cmdline | "
                                           "tr '\\0' ' ' | head -c 40"})
        assert out.error is None and out.output.startswith("ws\n/home/agent\n")
    assert server_pid(box) == pid                       # no new sandbox per command
    assert box._session(box.network, True).spawn_ms > 0


def test_each_command_keeps_the_confinement(box):
    home = str(box.settings.home)
    out = box.run("shell", {"command": f"cat {home}/secret.txt; echo x > /usr/escaped; "
                                       f"echo x > {home}/escaped; id -u"})
    assert "CANARY" not in out.output
    assert not os.path.exists("/usr/escaped") and not os.path.exists(f"{home}/escaped")
    out = box.run("shell", {"command": "grep CapEff /proc/self/status; cat /proc/1/environ"})
    assert "0000000000000000" in out.output and "Permission denied" in out.output
    out = box.run("shell", {"command": "head -c 5000000 /dev/zero > big.bin; ls -l big.bin"})
    assert os.path.getsize(os.path.join(box.workspace, "big.bin")) <= 1 << 20   # file-size limit
    out = box.run("shell", {"command": "getent hosts pypi.org || echo no network"})
    assert "no network" in out.output


def test_nothing_of_a_command_outlives_it(box):
    pid = server_pid(box)
    box.run("shell", {"command": f"nohup sleep 97{TAG} >/dev/null 2>&1 &"})
    box.run("shell", {"command": f"setsid sleep 98{TAG} >/dev/null 2>&1 < /dev/null & disown"})
    assert not sleepers(f"97{TAG}") and not sleepers(f"98{TAG}")
    out = box.run("shell", {"command": "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; "
                                       "echo; done"})
    assert f"97{TAG}" not in out.output and f"98{TAG}" not in out.output
    assert "python3" in out.output                       # the server, PID 1
    out = box.run("shell", {"command": "kill -9 -1; kill -9 1; echo still"})
    assert "still" in out.output
    assert server_pid(box) == pid                        # the server is out of a command's reach
    out = box.run("shell", {"command": ":(){ :|:& };:"})
    out = box.run("shell", {"command": "echo after the bomb"})
    assert out.output.strip() == "after the bomb" and server_pid(box) == pid


def test_a_command_times_out_and_the_next_one_runs(box):
    out = box.run("shell", {"command": f"sleep 99{TAG}; echo never"})
    assert out.error and "timed out" in out.error and "never" not in out.output
    assert not sleepers(f"99{TAG}")
    out = box.run("shell", {"command": "echo next; exit 3"})
    assert out.output == "next\n" and out.error.startswith("exit status 3")


def test_a_dead_sandbox_is_replaced_and_never_reruns_a_command(box):
    pid = server_pid(box)
    os.killpg(pid, signal.SIGKILL)                       # the namespace dies between commands
    psutil.Process(pid).wait(10)
    out = box.run("shell", {"command": "echo fresh"})
    assert out.output == "fresh\n" and server_pid(box) != pid


def test_without_reuse_every_command_gets_its_own_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("ARTOO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ARTOO_WORKSPACE", str(tmp_path / "ws"))
    settings = dataclasses.replace(load_settings(), sandbox_reuse=False)
    tb = Toolbox(settings)
    tb.prewarm()
    assert not tb._sessions
    assert tb.run("shell", {"command": "basename $PWD"}).output == "ws\n"
    assert not tb._sessions


@pytest.mark.parametrize("reuse", [True, False])
def test_echo_prints_its_backslash_escapes_as_sh_does(tmp_path, monkeypatch, reuse):
    """Commands run in bash with XSI echo, in the attempt's sandbox and in a one-shot one:
    models write `echo "red\\ngreen"` for two lines (a checker's literal one-line output
    contradicted a right file)."""
    monkeypatch.setenv("ARTOO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ARTOO_WORKSPACE", str(tmp_path / "ws"))
    tb = Toolbox(dataclasses.replace(load_settings(), sandbox_reuse=reuse))
    tb.prewarm()
    try:
        out = tb.run("shell", {"command": 'echo "red\\ngreen\\tblue"; echo $BASHOPTS'})
        assert out.output.startswith("red\ngreen\tblue\n") and "xpg_echo" in out.output
        assert bool(tb._sessions) is reuse
    finally:
        tb.close()


@pytest.mark.skipif(sandbox.SETPRIV is None, reason="setpriv (util-linux) is missing")
def test_a_sandbox_whose_owner_is_gone_never_starts(tmp_path):
    """The parent-death signal is set after the fork: an owner that died in between is never
    signalled for, so the chain starts nothing unless its parent is still the owner."""
    mark = tmp_path / "ran"
    argv = sandbox.with_pdeathsig(["touch", str(mark)])
    assert subprocess.run(argv).returncode == 0 and mark.exists()      # started by its owner
    mark.unlink()
    # started by another process, as the owner's orphan would be (re-parented)
    out = subprocess.run(["sh", "-c", '"$@"; echo "rc=$?"', "sh", *argv],
                         capture_output=True, text=True)
    assert out.stdout.strip() == "rc=125" and not mark.exists()


def test_a_command_and_its_environment_reach_the_server_byte_for_byte(box):
    """The request framing (`encode_request`): newlines, quotes, non-ASCII text and bytes that
    are not UTF-8 in the command, and '=' and newlines in a variable's value, all arrive as sent."""
    pid = server_pid(box)
    session = box._session(box.network, True)
    session.env["ARTOO_PROBE"] = "a=b\nc ü"
    chunks: list[bytes] = []
    code, timed_out = session.run("printf '%s|' \"$ARTOO_PROBE\"\necho 'two\n lines' \"ü\" "
                                  "$'\\xff' \udcfe", 10, chunks.append)
    out = b"".join(chunks)
    assert (code, timed_out) == (0, False), out
    assert out == "a=b\nc ü|two\n lines ü ".encode() + b"\xff \xfe\n"
    assert server_pid(box) == pid
    with pytest.raises(ValueError, match="null byte"):
        sandbox_session.encode_request("echo a\0b", 1.0, "/", {})


def test_the_commands_path_chooses_the_shell_as_execvpe_would(box):
    """The server walks the command's PATH itself (os.execvpe imports `warnings` in every
    forked child, ~1 ms per command): the first executable `bash` on that PATH runs, an entry
    without one (or with one that cannot run) is passed over, and a shell that appears between
    two commands is found by the second."""
    session = box._session(box.network, True)
    assert session.ready.wait(30) and not session.error, session.error
    ws = box.workspace
    for d in ("none", "noexec", "fake"):
        os.makedirs(os.path.join(ws, d))
    with open(os.path.join(ws, "noexec", "bash"), "w") as f:
        f.write("#!/bin/sh\necho must not run\n")
    session.env["PATH"] = f"{ws}/none:{ws}/noexec:{ws}/fake:" + session.env.get(
        "PATH", "/usr/bin:/bin")

    def run() -> str:
        chunks: list[bytes] = []
        code, _ = session.run("echo real", 10, chunks.append)
        return f"{code} " + b"".join(chunks).decode()

    assert run() == "0 real\n"
    fake = os.path.join(ws, "fake", "bash")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho fake shell\n")
    os.chmod(fake, 0o755)
    assert run() == "0 fake shell\n"
    session.env["PATH"] = f"{ws}/none"
    assert run().startswith("127 ")                  # no shell on the PATH: as execvpe fails
