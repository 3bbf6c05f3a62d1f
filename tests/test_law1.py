"""Law 1 gate: the corpus, classification details, the undo store, `artoo gate` / `artoo undo`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import law1_corpus as corpus
from services.safety import law1
from services.safety.law1 import DESTRUCTIVE, READ_ONLY, UNKNOWN, WORKSPACE_WRITE

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("law1")
    ws, data = root / "ws", root / "home"
    data.mkdir()
    for name in corpus.WORKSPACE_FILES:
        path = ws / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("original\n")
    return ws, data


def classify(sandbox, command: str, cwd=None):
    ws, data = sandbox
    return law1.classify(command, workspace=ws, protected=[data], cwd=cwd or ws)


def test_corpus_sizes():
    assert len(corpus.DESTRUCTIVE) >= 150
    assert len(corpus.BENIGN) >= 150
    assert len(set(corpus.DESTRUCTIVE)) == len(corpus.DESTRUCTIVE)
    assert len(set(corpus.BENIGN)) == len(corpus.BENIGN)


def test_every_destructive_command_is_gated(sandbox):
    missed = []
    for command in corpus.DESTRUCTIVE:
        result = classify(sandbox, command)
        if not (result.needs_approval or result.protected):
            missed.append(f"{command!r}: {result.level} ({result.reason})")
    assert not missed, "not gated:\n" + "\n".join(missed)


def test_benign_commands_are_rarely_gated(sandbox):
    gated = [c for c in corpus.BENIGN if classify(sandbox, c).needs_approval]
    assert len(gated) <= 0.03 * len(corpus.BENIGN), gated
    not_read_only = [c for c in corpus.BENIGN if classify(sandbox, c).level != READ_ONLY]
    assert len(not_read_only) <= 0.03 * len(corpus.BENIGN), not_read_only


def test_inside_the_tool_sandbox_benign_commands_almost_never_ask(sandbox):
    """Issue 15: with the OS sandbox under the gate, unknown programs run unattended; what asks
    is what the gate sees delete or overwrite. Benign false gates stay under 1%; every
    destructive spelling the gate resolves still asks."""
    from services.safety.sandbox import asks_operator
    asks = [c for c in corpus.BENIGN if asks_operator(classify(sandbox, c), confined=True)]
    assert len(asks) <= 0.01 * len(corpus.BENIGN), asks
    for command in corpus.DESTRUCTIVE:
        result = classify(sandbox, command)
        if result.level == DESTRUCTIVE and not result.protected:
            assert asks_operator(result, confined=True), command


def test_workspace_writes_need_no_approval(sandbox):
    wrong = [(c, classify(sandbox, c).level) for c in corpus.WORKSPACE_WRITES
             if classify(sandbox, c).level != WORKSPACE_WRITE]
    assert not wrong


def test_data_dir_is_refused_not_approvable(sandbox):
    _, data = sandbox
    for command in corpus.PROTECTED:
        result = classify(sandbox, command.format(data=data))
        assert result.protected and not result.needs_approval, command
        assert "data dir" in result.reason


def test_a_sibling_path_sharing_the_data_dirs_prefix_is_not_the_data_dir(tmp_path):
    data, ws = tmp_path / "rm1", tmp_path / "rm1ws"
    data.mkdir()
    ws.mkdir()
    (ws / "a.ini").write_text("port=1\n")
    ok = law1.classify(f"grep port {ws}/a.ini", workspace=ws, protected=[data], cwd=ws)
    assert ok.level == READ_ONLY and not ok.protected
    bad = law1.classify(f"cat {data}/memory.lmdb", workspace=ws, protected=[data], cwd=ws)
    assert bad.protected
    assert law1.mentions_path(f"ls {data}", str(data))
    assert not law1.mentions_path(f"ls {ws}", str(data))
    # a later, whole occurrence after a prefix-only one; a trailing slash; the end of the text
    assert law1.mentions_path(f"ls {ws} {data}/x", str(data) + "/")
    assert law1.mentions_path(f"cd {ws}; cd {data}", str(data))
    assert not law1.mentions_path(f"{data}.bak {data}~ {data}-old", str(data))


def test_overwrite_depends_on_the_file_existing(sandbox):
    ws, _ = sandbox
    existing = classify(sandbox, "echo x > notes.txt")
    assert existing.level == DESTRUCTIVE
    assert existing.paths == [str(ws / "notes.txt")]
    assert "overwrites existing" in existing.reason
    fresh = classify(sandbox, "echo x > brand-new.txt")
    assert fresh.level == WORKSPACE_WRITE and not fresh.needs_approval
    appended = classify(sandbox, "echo x >> notes.txt")
    assert appended.level == WORKSPACE_WRITE


def test_reasons_and_undo_paths(sandbox):
    ws, _ = sandbox
    rm = classify(sandbox, "rm -f notes.txt data.csv")
    assert rm.level == DESTRUCTIVE and rm.needs_approval
    assert rm.paths == [str(ws / "notes.txt"), str(ws / "data.csv")]
    assert "deletes" in rm.reason
    find = classify(sandbox, "find . -name '*.log' -delete")
    assert find.snapshot_roots == [str(ws)]
    hidden = classify(sandbox, "echo $(rm notes.txt)")
    assert hidden.paths == [str(ws / "notes.txt")]
    python = classify(sandbox, "python3 -c 'print(1)'")
    assert python.level == UNKNOWN and "runs code" in python.reason
    outside = classify(sandbox, "rm /etc/hosts")
    assert outside.paths == [] and "outside the workspace" in outside.reason


def test_paths_resolve_against_cd_and_symlinks(sandbox, tmp_path):
    ws, _ = sandbox
    escape = classify(sandbox, "cd .. && touch x")
    assert escape.level == DESTRUCTIVE and "outside the workspace" in escape.reason
    inside = classify(sandbox, "cd src && touch x")
    assert inside.level == WORKSPACE_WRITE
    subshell = classify(sandbox, "(cd /tmp) && touch y")
    assert subshell.level == WORKSPACE_WRITE     # a subshell's cd does not leak
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = ws / "link-out"
    link.symlink_to(target)
    try:
        result = classify(sandbox, "echo x > link-out/file.txt")
        assert result.level == DESTRUCTIVE and "outside the workspace" in result.reason
    finally:
        link.unlink()


def test_unparseable_fails_closed(sandbox):
    result = classify(sandbox, "echo 'unterminated")
    assert result.level == UNKNOWN and result.needs_approval
    assert classify(sandbox, "").level == READ_ONLY


def test_substitution_bashlex_cannot_parse_is_classified_by_its_parts(sandbox):
    """bashlex fails on `x=$(a && b)`; the gate lifts the substitution out and classifies both
    parts (issue 15: a benign command was gated for it)."""
    assert classify(sandbox, 'x=$(test -f notes.txt && echo yes); echo "$x"').level == READ_ONLY
    hidden_rm = classify(sandbox, 'x=$(test -f notes.txt && rm notes.txt); echo "$x"')
    assert hidden_rm.level == DESTRUCTIVE and hidden_rm.needs_approval
    built = classify(sandbox, "y=$(ls && echo ok); $y notes.txt")
    assert built.level == UNKNOWN
    assert classify(sandbox, "x=$(echo 'a)' && (ls").level == UNKNOWN     # still unparseable


def test_undo_store_restores_files_and_dirs(settings):
    ws = Path(settings.workspace)
    (ws / "keep.txt").write_text("precious\n")
    (ws / "tree" / "sub").mkdir(parents=True)
    (ws / "tree" / "sub" / "f.txt").write_text("deep\n")
    store = law1.UndoStore(settings, "run-undo-1")
    note = store.save([str(ws / "keep.txt"), str(ws / "tree"), "/etc/hosts"], command="rm ...")
    assert "2 path(s)" in note                       # /etc/hosts is not ours to copy
    (ws / "keep.txt").write_text("clobbered\n")
    import shutil
    shutil.rmtree(ws / "tree")
    restored = law1.restore(settings, "run-undo-1")
    assert sorted(restored) == sorted([str(ws / "keep.txt"), str(ws / "tree")])
    assert (ws / "keep.txt").read_text() == "precious\n"
    assert (ws / "tree" / "sub" / "f.txt").read_text() == "deep\n"
    assert law1.restore(settings, "no-such-run") == []


def test_undo_store_respects_its_size_cap(settings):
    from dataclasses import replace
    small = replace(settings, undo_max_bytes=10)
    ws = Path(settings.workspace)
    (ws / "big.bin").write_bytes(b"x" * 100)
    note = law1.UndoStore(small, "run-undo-2").save([str(ws / "big.bin")], command="rm big.bin")
    assert note.startswith("no undo copy")
    assert law1.undo_entries(small, "run-undo-2") == []


def _artoo(args, env):
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_gate_and_undo_commands(settings, artoo_env):
    env = dict(os.environ)
    ws = Path(settings.workspace)
    (ws / "notes.txt").write_text("hello\n")
    gate = _artoo(["gate", "--json", "--", "rm", "-rf", "notes.txt"], env)
    assert gate.returncode == 0, gate.stderr
    report = json.loads(gate.stdout)
    assert report["classification"] == DESTRUCTIVE and report["needs_approval"] is True
    assert report["paths"] == [str(ws / "notes.txt")]
    text = _artoo(["gate", "--", "ls -la | wc -l"], env)
    assert text.returncode == 0 and READ_ONLY in text.stdout
    law1.UndoStore(settings, "run-cli-undo").save([str(ws / "notes.txt")], command="rm notes.txt")
    (ws / "notes.txt").unlink()
    undo = _artoo(["undo", "run-cli-undo"], env)
    assert undo.returncode == 0, undo.stderr
    assert (ws / "notes.txt").read_text() == "hello\n"
    missing = _artoo(["undo", "run-that-never-was"], env)
    assert missing.returncode == 1 and "nothing to undo" in missing.stderr
