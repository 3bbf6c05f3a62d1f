"""Agent tools: confinement (workspace, data dir, `..`, `~`, symlinks, absolute paths), the shell
(timeouts kill the process group, bounded output, Law 1 gating with undo copies), file tools,
search and the web_search fallback."""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from services.safety import law1
from services.safety.tools import Toolbox, head_tail


class Approvals:
    """Records what the gate asked; answers with a fixed decision (pure logic, no bus)."""

    def __init__(self, approved: bool):
        self.approved = approved
        self.asked: list[dict] = []

    def __call__(self, **kwargs):
        self.asked.append(kwargs)
        return law1.Decision(self.approved, "operator" if self.approved else "no-operator")


@pytest.fixture
def box(settings):
    approvals = Approvals(False)
    tb = Toolbox(settings, approve=approvals, undo=law1.UndoStore(settings, "run-tools"))
    tb.approvals = approvals
    return tb


def test_head_tail_counts_characters():
    text = "é" * 2000 + "中" * 10000
    cut = head_tail(text, 4000)
    assert cut.startswith("é" * 1333) and cut.endswith("中" * 2667)
    assert "[8000 characters omitted]" in cut
    assert head_tail("short", 4000) == "short"


def test_writes_are_confined_to_the_workspace(box, settings, tmp_path):
    ws = Path(settings.workspace)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "escape").symlink_to(outside)
    attempts = {
        "../evil.txt": "'..' is refused",
        "sub/../../evil.txt": "'..' is refused",
        "~/evil.txt": "'~' paths are refused",
        str(outside / "evil.txt"): "outside the workspace",
        "/etc/artoo-evil": "outside the workspace",
        "escape/evil.txt": "through a symlink",
        str(settings.home / "memory.lmdb" / "x"): "data dir",
        str(settings.home / "audit" / "evil"): "data dir",
    }
    for path, why in attempts.items():
        result = box.run("write_file", {"path": path, "content": "x"})
        assert result.error and why in result.error, (path, result)
        assert result.law1 and result.error.startswith("[LAW1]")
    assert list(outside.iterdir()) == []
    assert not (settings.home / "memory.lmdb" / "x").exists()


def test_reads_refuse_the_data_dir_and_outside(box, settings):
    (settings.home / "secret.txt").write_text("artoo state")
    for path in (str(settings.home / "secret.txt"), "../home/secret.txt", "/etc/hostname", "~"):
        result = box.run("read_file", {"path": path})
        assert result.error and "refused" in result.error, path
        assert "artoo state" not in result.output
    for tool, args in (("list", {"path": str(settings.home)}),
                       ("glob", {"pattern": "*.txt", "root": str(settings.home)}),
                       ("search_text", {"pattern": "artoo", "path": str(settings.home)})):
        assert "refused" in (box.run(tool, args).error or ""), tool


def test_read_roots_allow_extra_reads(settings, tmp_path):
    extra = tmp_path / "docs"
    extra.mkdir()
    (extra / "a.md").write_text("hello docs")
    tb = Toolbox(replace(settings, read_roots=str(extra)))
    assert tb.run("read_file", {"path": str(extra / "a.md")}).output == "hello docs"
    assert tb.run("write_file", {"path": str(extra / "b.md"), "content": "x"}).law1


def test_file_tools(box, settings):
    ws = Path(settings.workspace)
    wrote = box.run("write_file", {"path": "deep/dir/file.txt", "content": "alpha\nbeta\n"})
    assert wrote.error is None and (ws / "deep/dir/file.txt").read_text() == "alpha\nbeta\n"
    assert box.run("read_file", {"path": "deep/dir/file.txt"}).output == "alpha\nbeta\n"
    assert box.run("read_file", {"path": str(ws / "deep/dir/file.txt")}).error is None
    assert "dir/" in box.run("list", {"path": "deep"}).output
    assert box.run("glob", {"pattern": "*.txt"}).output == "deep/dir/file.txt"
    hits = box.run("search_text", {"pattern": "be.a"}).output
    assert hits == "deep/dir/file.txt:2: beta"
    assert "no matches" in box.run("search_text", {"pattern": "gamma"}).output
    assert "missing argument" in box.run("read_file", {}).error
    assert "unknown tool" in box.run("format_disk", {}).error
    (ws / "bin.dat").write_bytes(b"\x00\x01")
    assert "binary" in box.run("read_file", {"path": "bin.dat"}).error


def test_overwrite_needs_approval_and_keeps_an_undo_copy(settings):
    ws = Path(settings.workspace)
    (ws / "doc.txt").write_text("version 1")
    denied = Toolbox(settings, approve=Approvals(False))
    result = denied.run("write_file", {"path": "doc.txt", "content": "version 2"})
    assert result.law1 and result.output.startswith("[LAW1]")
    assert (ws / "doc.txt").read_text() == "version 1"
    approvals = Approvals(True)
    allowed = Toolbox(settings, approve=approvals, undo=law1.UndoStore(settings, "run-ow"))
    result = allowed.run("write_file", {"path": "doc.txt", "content": "version 2"})
    assert result.error is None and "undo copy" in result.output
    assert approvals.asked[0]["kind"] == "overwrite"
    assert (ws / "doc.txt").read_text() == "version 2"
    law1.restore(settings, "run-ow")
    assert (ws / "doc.txt").read_text() == "version 1"
    same = allowed.run("write_file", {"path": "doc.txt", "content": "version 1"})
    assert "unchanged" in same.output and len(approvals.asked) == 1


def test_shell_runs_in_the_workspace(box, settings):
    result = box.run("shell", {"command": "pwd; echo err >&2; ls"})
    assert result.error is None
    assert os.path.realpath(settings.workspace) in result.output and "err" in result.output
    failed = box.run("shell", {"command": "ls no-such-file"})
    assert failed.error.startswith("exit status 2")
    env = box.run("shell", {"command": "env"}).output
    assert "OPENAI_API_KEY" not in env and "ARTOO_HOME" not in env


def test_shell_gate_denies_and_does_not_run(box, settings):
    ws = Path(settings.workspace)
    (ws / "keep.txt").write_text("keep")
    result = box.run("shell", {"command": "rm keep.txt"})
    assert result.law1 and "[LAW1]" in result.output and result.error
    assert (ws / "keep.txt").exists()
    assert box.approvals.asked[0]["paths"] == [str(ws / "keep.txt")]
    assert box.approvals.asked[0]["classification"] == law1.DESTRUCTIVE
    protected = box.run("shell", {"command": f"cat {settings.home}/x"})
    assert protected.law1 and "data dir" in protected.error
    assert len(box.approvals.asked) == 1          # the data dir is never even asked about


def test_shell_approved_delete_is_undoable(settings):
    ws = Path(settings.workspace)
    (ws / "gone.txt").write_text("precious")
    tb = Toolbox(settings, approve=Approvals(True), undo=law1.UndoStore(settings, "run-rm"))
    result = tb.run("shell", {"command": "rm gone.txt"})
    assert result.error is None and "approved by operator" in result.output
    assert not (ws / "gone.txt").exists()
    assert law1.restore(settings, "run-rm") == [str(ws / "gone.txt")]
    assert (ws / "gone.txt").read_text() == "precious"
    # code whose targets cannot be enumerated: the workspace itself is copied first
    code = tb.run("shell", {"command": "python3 -c \"import os; os.remove('gone.txt')\""})
    assert code.error is None and not (ws / "gone.txt").exists()
    law1.restore(settings, "run-rm")
    assert (ws / "gone.txt").read_text() == "precious"


def test_shell_timeout_kills_the_process_group(settings):
    tb = Toolbox(replace(settings, shell_timeout_s=1.0))
    marker = f"artoo-timeout-{os.getpid()}"
    result = tb.run("shell", {"command": f"sleep 30 & exec -a {marker} sleep 31"})
    assert result.error and "timed out" in result.error
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] and (marker in " ".join(p.info["cmdline"]) or
                                          p.info["cmdline"][:2] == ["sleep", "30"]
                                          and p.ppid() == 1)]
        if not left:
            break
        time.sleep(0.05)
    assert not left


def test_shell_output_is_bounded(settings):
    tb = Toolbox(replace(settings, shell_output_max_chars=30_000))
    result = tb.run("shell", {"command": "head -c 5000000 /dev/zero | tr '\\0' 'a'; echo END"})
    assert len(result.output) < 40_000
    assert result.output.rstrip().endswith("END") and "bytes of output omitted" in result.output


def test_shell_hides_data_dir_lines(box, settings):
    root = Path(settings.home).parent
    result = box.run("shell", {"command": f"echo {settings.home}/audit; echo fine"})
    assert result.law1                              # named in the command: refused outright
    assert box.run("shell", {"command": f"ls -d {root}/*"}).law1   # the glob reaches it
    listing = box.run("shell", {"command": f"find {root} -maxdepth 1"})
    assert str(settings.home) not in listing.output     # the sandbox does not mount it at all
    # unconfined (ARTOO_SANDBOX=off), lines that name it are hidden from the output
    bare = Toolbox(replace(settings, sandbox="off"))
    listing = bare.run("shell", {"command": f"find {root} -maxdepth 1"})
    assert str(settings.home) not in listing.output and "hidden" in listing.output


def test_web_search_unavailable_then_configured(box, settings):
    result = box.run("web_search", {"query": "artoo"})
    assert result.error.startswith("web_search unavailable")
    assert "web_search" not in box.available()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"results": [{"title": "Artoo", "content": "a runtime",
                                            "url": "https://example.com/artoo"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/search"
        tb = Toolbox(replace(settings, search_url=url))
        found = tb.run("web_search", {"query": "artoo"})
        assert found.error is None
        assert found.output == "Artoo\na runtime\nhttps://example.com/artoo"
    finally:
        server.shutdown()
        server.server_close()
