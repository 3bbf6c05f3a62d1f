"""Every path, limit and threshold of artoo with its named default, in one place (DESIGN §11).

Values come from the environment (and a `.env` file in the working directory or in $ARTOO_HOME),
falling back to the defaults below. `protocol` imports nothing else of ours, so every process can
read its configuration before it has anything else.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass, field, fields
from pathlib import Path

# ipc:// paths are limited by sun_path (108 bytes on Linux); keep a margin for the file name.
_MAX_IPC_DIR = 80


def _load_dotenv_files() -> None:
    """Load `.env` from the working directory and from $ARTOO_HOME without overriding the env."""
    candidates = [Path.cwd() / ".env"]
    home = os.environ.get("ARTOO_HOME")
    if home:
        candidates.append(Path(home) / ".env")
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.partition("=")
            key = key.strip().removeprefix("export ").strip()
            value = value.strip().strip("'\"")
            os.environ.setdefault(key, value)


def _env(name: str, default, cast=None):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    cast = cast or type(default)
    if cast is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    try:
        return cast(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid value for {name}: {raw!r} ({exc})") from None


@dataclass(frozen=True)
class Settings:
    # --- locations -----------------------------------------------------------------------------
    home: Path = field(default_factory=lambda: Path("~/.artoo").expanduser())
    workspace: Path = field(default_factory=lambda: Path("~/artoo_workspace").expanduser())
    run_dir_override: str = ""           # ARTOO_RUN_DIR: where ipc sockets and pid files live

    # --- bus -----------------------------------------------------------------------------------
    xsub_endpoint: str = ""              # ARTOO_BUS_XSUB (publishers connect here); ipc default
    xpub_endpoint: str = ""              # ARTOO_BUS_XPUB (subscribers connect here)
    capture_endpoint: str = ""           # ARTOO_BUS_CAPTURE (PUSH from the proxy to the tap)
    control_endpoint: str = ""           # ARTOO_BUS_CONTROL (steerable proxy: STATISTICS etc.)
    curve_dir_override: str = ""         # ARTOO_CURVE_DIR: CURVE keys for tcp:// endpoints
    bus_listen: str = ""                 # ARTOO_BUS_LISTEN HOST:PORT: also serve the bus on tcp
                                         # (xsub PORT, xpub PORT+1, CURVE) for worker hosts
    bus_join: str = ""                   # ARTOO_BUS_JOIN HOST:PORT: this is a worker host of that bus
    host_roles: str = ""                 # ARTOO_ROLES: the programs this host runs ("" = all)
    host_name: str = ""                  # ARTOO_HOST_NAME: this host in heartbeats (default hostname)
    host_instances: str = ""             # ARTOO_HOST_INSTANCES FIRST/TOTAL: this host's instances of
                                         # each partitioned role are FIRST.. of TOTAL across hosts
    bus_capture: bool = True             # ARTOO_CAPTURE: feed every message to the tap
    bus_sign: bool = True                # ARTOO_BUS_SIGN: HMAC every envelope (protocol/signing.py)
    # --- observation plane (traces: the standard OTEL_* variables, services/runtime/telemetry.py)
    metrics_port: int = 9464             # ARTOO_METRICS_PORT: the Prometheus endpoint (0 = any free)
    metrics_addr: str = "127.0.0.1"      # ARTOO_METRICS_ADDR: the address it listens on
    bus_key_file_override: str = ""      # ARTOO_BUS_KEY_FILE: the HMAC key (default home/bus.key)
    bus_max_age_s: float = 1800.0        # signed envelopes older than this are refused (0 = off;
                                         # never below ack_give_up_s + 60: re-sends keep their ts)
    max_frame_bytes: int = 1 << 20       # receivers refuse larger envelopes
    proxy_max_frame_bytes: int = 8 << 20  # the proxy disconnects publishers above this
    hwm: int = 100_000                   # generous high-water mark on every bus socket
    heartbeat_interval_s: float = 1.0
    missing_after_s: float = 3.0         # a role silent this long is reported missing
    ready_timeout_s: float = 15.0        # handshake: own message back through the proxy
    ack_initial_s: float = 0.25          # first re-send of an unacknowledged work message
    ack_max_backoff_s: float = 4.0
    ack_give_up_s: float = 900.0         # stop re-sending after this long (counted as lost)
    dedup_capacity: int = 50_000         # message ids remembered by each receiver
    request_timeout_s: float = 10.0      # request/reply (memory queries)
    reply_keep_s: float = 60.0           # a re-sent request is answered from the reply cache
    handler_threads: int = 8             # worker threads for handlers that call LLMs or tools
    cpu_latency: str = "off"             # ARTOO_CPU_LATENCY: "busy" keeps idle CPUs polling while a
                                         # process has bus work (PM QoS; protocol/bus/cpulatency.py)
    cpu_latency_linger_s: float = 2.0    # ... until this long after its last work message
    observer_gather_ms: float = 20.0     # the tap, auditor and metrics take what arrived at most
                                         # this often (protocol/bus/common.Gather; 0 = as it comes)

    # --- tasks ---------------------------------------------------------------------------------
    task_deadline_s: float = 900.0       # every task ends with a FinalResult by then at the latest
    subtask_deadline_s: float = 300.0    # the spawner kills an effector after this
    max_concurrent_effectors: int = 8
    clarification_rounds: int = 2
    executor_max_turns: int = 10
    validator_max_attempts: int = 2      # maxRetries: scored attempts per subtask
    max_replans: int = 3                 # R4b recommends abandon on its third ReplanRequest
    # ARTOO_TASK_LLM_CALLS: the most LLM calls a task makes, a bound (0 = none): no call past it
    # is made, no replan once it is reached. A remote model's plans run several subtasks of
    # ~5 calls each (executor, validator, two checks).
    task_llm_calls: int = 30
    local_task_llm_calls: int = 6        # the same when the executor runs on the bundled local model
    tool_output_chars: int = 4000        # head+tail budget per tool result in a prompt
    shell_timeout_s: float = 30.0
    search_timeout_s: float = 15.0
    approval_timeout_s: float = 120.0    # Law 1: no answer by then means deny
    plan_max_subtasks: int = 8           # a plan with more subtasks is a violation (re-asked once)
    offer_interval_s: float = 1.0        # the dispatcher re-offers an unclaimed subtask this often
    effector_exit_grace_s: float = 2.0   # an effector gone this long without an outcome = failed
    clarification_timeout_s: float = 300.0  # an unanswered question means "proceed as best you can"
    scheduler_tick_s: float = 1.0        # the scheduler looks at $ARTOO_HOME/schedules.json this often

    # --- effectors: spawner, tools, Law 1 ------------------------------------------------------
    claim_hold_s: float = 3.0            # a spawner holds a slot this long for an unanswered claim
    effector_ack_wait_s: float = 30.0    # an effector waits this long for its outcome's acks
    effector_deadline_margin_s: float = 5.0  # it reports a failed outcome this long before its kill
    shell_output_max_chars: int = 200_000  # raw shell output kept (head + tail) before the prompt cut
    read_roots: str = ""                 # ARTOO_READ_ROOTS: extra read-only roots for tools (":")
    sandbox: str = "on"                  # ARTOO_SANDBOX: "off" runs agent commands unconfined
    sandbox_network: bool = False        # ARTOO_SANDBOX_NETWORK: every run may use the network
    sandbox_max_procs: int = 256         # processes per tool command (a fork bomb stops there)
    sandbox_max_file_bytes: int = 1 << 30  # the largest file a tool command may write
    sandbox_reuse: bool = True           # ARTOO_SANDBOX_REUSE: one sandbox per subtask attempt
                                         # (a command server inside), not one per command
    search_url: str = ""                 # ARTOO_SEARCH_URL: SearXNG-style JSON search endpoint
    undo_max_bytes: int = 200 << 20      # larger approved deletes/overwrites get no undo copy
    # MCP servers as tools ($ARTOO_HOME/mcp.json; services/safety/mcp.py)
    mcp_timeout_s: float = 30.0          # one MCP tool call (a server that hangs is stopped)
    mcp_start_timeout_s: float = 60.0    # start + initialize of one server (npx may download)
    mcp_max_tools: int = 8               # MCP tools offered to the executor (the most relevant)
    mcp_local_max_tools: int = 3         # the same on the bundled local model
    mcp_prompt_chars: int = 2400         # the MCP part of the executor's prompt at most

    # --- GGS (seeds/000 Appendix B) ------------------------------------------------------------
    ggs_alpha: float = 0.6
    ggs_beta: float = 0.3
    ggs_lambda: float = 0.4
    ggs_w1: float = 0.6
    ggs_w2: float = 0.4
    ggs_epsilon: float = 0.1
    ggs_delta: float = 0.3
    ggs_rho: float = 0.5
    ggs_theta: float = 0.8
    ggs_time_budget_ms: float = 300_000.0
    ggs_max_replans: int = 3
    ggs_kill_threshold: int = 2

    # --- memory (seeds/000 §4) -----------------------------------------------------------------
    memory_map_size: int = 1 << 30       # initial LMDB map size; grows on MapFullError
    ggs_watchdog_interval_s: float = 0.25  # how often GGS checks task deadlines
    ggs_tombstone_ttl_s: float = 3600.0    # ended tasks remembered this long (late messages ignored)
    ggs_tombstone_max: int = 10_000        # ... and at most this many
    memory_max_calibration_entries: int = 10
    dreamer_interval_s: float = 300.0
    dreamer_after_final_s: float = 3.0
    dreamer_gc_threshold: float = 0.1
    dreamer_promote_attention: float = 5.0
    dreamer_promote_decision: float = 3.0
    memory_ignore_attention: float = 0.5  # action Ignore below this attention
    memory_decision_band: float = 0.2     # |decision| ≤ band → Caution; above → Exploit / Avoid
    memory_max_content_chars: int = 4000  # longer Megram contents are cut on write
    memory_write_batch: int = 20_000      # Megrams per LMDB commit at most (group commit)
    memory_query_top_n: int = 10          # strongest contributing Megrams returned by QueryMK
    dreamer_demote_k: float = 0.05        # k of a C rule after trust bankruptcy (now level K)
    dreamer_bankruptcy_tolerance: float = 0.0  # newer evidence must oppose a rule by more
    dreamer_prompt_sources: int = 10      # newest source contents shown to the distilling LLM
    memory_tag_cache_mb: int = 64         # packed entries of large tags kept between writes
    dreamer_max_promotions: int = 20      # LLM distillations per cycle (strongest groups first)

    # --- world model (seed 002) ----------------------------------------------------------------
    world: str = "on"                    # ARTOO_WORLD: "off" = no projection, no proposals
    world_map_size: int = 256 << 20      # initial LMDB map size of world.lmdb; grows when full
    world_ema_lambda: float = 0.3        # λ: sentiment EMA s' = (1−λ)s + λx
    world_tau_s: float = 3600.0          # τ: recency = exp(−Δt/τ)
    world_alpha_r: float = 0.4           # α_r: importance weight of recency
    world_alpha_f: float = 0.6           # α_f: importance weight of frequency
    world_mention_cap: int = 10          # N_cap: mentions counted up to this
    world_stale_after_s: float = 7 * 86400.0   # θ_stale: active → stale without a mention
    world_rep_threshold: int = 3         # θ_rep: same intent this many times within Δt ...
    world_rep_window_s: float = 7 * 86400.0    # Δt: ... proposes a schedule
    world_neg_valence: float = 0.5       # θ_v: v < −θ_v ...
    world_arousal: float = 0.5           # θ_a: ... and a > θ_a proposes a reactive goal
    world_urgency_s: float = 3600.0      # θ_urgency: a stated deadline nearer than this
    world_query_timeout_s: float = 5.0   # the perceiver waits this long for the projection
    world_projection_entities: int = 5   # entities in a goal's projection at most
    world_projection_facts: int = 8      # facts in a goal's projection at most
    world_projection_chars: int = 1200   # and its text at most this long
    world_replay_interval_s: float = 30.0  # catch up from the audit log this often (0 = at start)
    world_fail_threshold: int = 3        # θ_fail: a schedule's last N runs failed → SYSTEM goal
    world_storage_max_bytes: int = 5 << 30   # ARTOO_HOME above this → SYSTEM goal (0 = never)
    world_system_check_s: float = 600.0  # how often the storage bound is checked (0 = never)
    world_extract_per_hour: int = 0      # model calls reading facts from answers (0 = never)
    priority_alpha: float = 0.5          # p(g,t) = α·p_base + β·u(g,t) + γ·ξ(g,e(t))
    priority_beta: float = 0.3
    priority_gamma: float = 0.2

    # --- audit ---------------------------------------------------------------------------------
    tap_fsync_interval_s: float = 0.1
    tap_segment_bytes: int = 64 << 20
    tap_replay_bytes: int = 256 << 20    # capture relay keeps unacknowledged messages up to this
    audit_report_interval_s: float = 300.0
    audit_max_findings: int = 1000       # entries kept per anomaly list per window (rest counted)
    audit_drift_min_samples: int = 5     # a window needs this many observations to judge drift
    audit_drift_rate_delta: float = 0.25  # rate drift: |window − baseline| at least this
    audit_drift_latency_ratio: float = 2.0  # latency drift: window mean ≥ ratio × baseline
    audit_baseline_windows: int = 6      # a role's baseline = mean of its last N windows
    audit_thrash_rounds: int = 2         # break_symmetry rounds in a row without D improving
    audit_correction_threshold: int = 5  # ReplanRequest.correction_count that counts as thrashing

    # --- LLM -----------------------------------------------------------------------------------
    llm_timeout_s: float = 120.0
    llm_retries: int = 3
    llm_backoff_s: float = 0.5
    llm_preconnect: bool = True          # a spare effector opens its connection (GET /models)
    llm_transport: str = "auto"          # "sdk": every call through the openai SDK's own path
    local_model_path: str = ""           # ARTOO_LOCAL_MODEL
    local_llm_port: int = 0              # 0 = a free loopback port claimed at `artoo up`
    local_llm_ctx: int = 4096            # context window of the local llama.cpp server
    local_llm_threads: int = 0           # its CPU threads; 0 = every core

    # --- derived paths -------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        if self.run_dir_override:
            return Path(self.run_dir_override)
        candidate = self.home / "run"
        if len(str(candidate)) <= _MAX_IPC_DIR:
            return candidate
        digest = hashlib.sha1(str(self.home).encode()).hexdigest()[:10]
        return Path("/tmp") / f"artoo-{digest}"

    @property
    def curve_dir(self) -> Path:
        """Keys and allow-list for tcp:// bus endpoints (protocol/curve.py)."""
        return Path(self.curve_dir_override) if self.curve_dir_override else self.home / "curve"

    @property
    def bus_key_file(self) -> Path:
        """The per-daemon HMAC key for signed envelopes: in the data dir, mode 0600."""
        return Path(self.bus_key_file_override) if self.bus_key_file_override \
            else self.home / "bus.key"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def tasks_dir(self) -> Path:
        return self.home / "tasks"

    @property
    def schedules_file(self) -> Path:
        """Scheduled goals (`artoo schedule`): the CLI writes them, the scheduler role runs them."""
        return self.home / "schedules.json"

    @property
    def audit_dir(self) -> Path:
        return self.home / "audit"

    @property
    def memory_path(self) -> Path:
        return self.home / "memory.lmdb"

    @property
    def world_path(self) -> Path:
        return self.home / "world.lmdb"

    @property
    def world_on(self) -> bool:
        return self.world.strip().lower() not in ("off", "0", "false", "no")

    def endpoint(self, name: str) -> str:
        """The bus endpoint `name` (xsub, xpub, capture, control), ipc under run_dir by default;
        a worker host (`bus_join`) reaches the main host's xsub/xpub over tcp."""
        configured = getattr(self, f"{name}_endpoint")
        if not configured and self.bus_join and name in TCP_PORT_OFFSETS:
            configured = tcp_endpoint(self.bus_join, name)
        return configured or f"ipc://{self.run_dir}/{name}.sock"

    @property
    def host(self) -> str:
        """This host's name in heartbeats and status (two hosts of one bus need two names)."""
        return self.host_name or socket.gethostname()

    def ensure_dirs(self) -> None:
        for path in (self.home, self.logs_dir, self.tasks_dir, self.audit_dir, self.workspace):
            path.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.run_dir, 0o700)

    def as_dict(self) -> dict:
        return {f.name: (str(v) if isinstance(v := getattr(self, f.name), Path) else v)
                for f in fields(self)}


TCP_PORT_OFFSETS = {"xsub": 0, "xpub": 1}   # a listening main host: xsub at PORT, xpub at PORT+1


def parse_hostport(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv4, a name, or [IPv6]) → (host, port); ValueError with a clear message."""
    host, sep, port = (value or "").strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65535:
        raise ValueError(f"{value!r} is not HOST:PORT (PORT and PORT+1 are used)")
    return host, int(port)


def parse_instances(value: str) -> tuple[int, int]:
    """`FIRST/TOTAL` → (first, total): this host's instances of each partitioned role are numbered
    from FIRST, out of TOTAL instances across all hosts (e.g. main 0/4 and a worker 2/4 with
    ARTOO_SCALE=2 each). "" → (0, 0): numbered from 0, as many as this host runs."""
    if not (value or "").strip():
        return 0, 0
    first, sep, total = value.strip().partition("/")
    if not sep or not first.isdigit() or not total.isdigit() or int(first) >= int(total):
        raise ValueError(f"{value!r} is not FIRST/TOTAL with FIRST < TOTAL (e.g. 2/4)")
    return int(first), int(total)


def tcp_endpoint(hostport: str, name: str) -> str:
    host, port = parse_hostport(hostport)
    if ":" in host:
        host = f"[{host}]"
    return f"tcp://{host}:{port + TCP_PORT_OFFSETS[name]}"


# Environment variable for each field: ARTOO_<FIELD> unless listed here.
_ENV_NAMES = {
    "home": "ARTOO_HOME",
    "workspace": "ARTOO_WORKSPACE",
    "run_dir_override": "ARTOO_RUN_DIR",
    "xsub_endpoint": "ARTOO_BUS_XSUB",
    "xpub_endpoint": "ARTOO_BUS_XPUB",
    "capture_endpoint": "ARTOO_BUS_CAPTURE",
    "control_endpoint": "ARTOO_BUS_CONTROL",
    "curve_dir_override": "ARTOO_CURVE_DIR",
    "host_roles": "ARTOO_ROLES",
    "local_model_path": "ARTOO_LOCAL_MODEL",
    "bus_capture": "ARTOO_CAPTURE",
    "bus_key_file_override": "ARTOO_BUS_KEY_FILE",
}


def env_name(field_name: str) -> str:
    return _ENV_NAMES.get(field_name, f"ARTOO_{field_name.upper()}")


UNSAFE_WORKSPACES = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc",
                     "/root", "/run", "/sbin", "/sys", "/usr", "/var", "/tmp")


def workspace_problem(path: str, settings: "Settings") -> str:
    """Why `path` may not be a run's workspace ("" when it may): it must be an existing
    directory that is not the filesystem root, HOME itself, a system directory, or inside (or a
    parent of) artoo's data dir."""
    import os
    real = os.path.realpath(os.path.expanduser(path))
    home = os.path.realpath(os.path.expanduser("~"))
    data = os.path.realpath(settings.home)
    if not os.path.isdir(real):
        return f"{path} is not a directory"
    if real in UNSAFE_WORKSPACES or real == home:
        return f"{real} is unsafe as a workspace (the root, HOME itself or a system directory)"
    if real == data or real.startswith(data + os.sep) or data.startswith(real + os.sep):
        return f"{real} contains or is inside artoo's data dir {data}"
    return ""


def load_settings(**overrides) -> Settings:
    """Build Settings from the environment (+ .env), with explicit keyword overrides on top."""
    _load_dotenv_files()
    defaults = Settings()
    values = {}
    for f in fields(Settings):
        default = getattr(defaults, f.name)
        if isinstance(default, Path):
            raw = os.environ.get(env_name(f.name))
            values[f.name] = Path(raw).expanduser() if raw else default
        else:
            values[f.name] = _env(env_name(f.name), default)
    values.update(overrides)
    for key in ("home", "workspace"):
        values[key] = Path(values[key]).expanduser().resolve()
    for key, value in read_host_file(values["home"]).items():
        if key in HOST_FIELDS and not os.environ.get(env_name(key)) and key not in overrides:
            values[key] = value
    return Settings(**values)


HOST_FIELDS = ("bus_listen", "bus_join", "host_roles", "host_name", "host_instances")
HOST_FILE = "host.json"


def read_host_file(home: Path) -> dict:
    """This data dir's host role (`artoo up --listen/--join/--roles/--host-name` saves it there),
    so every later command of the host (`run`, `status`, `down`) talks to the same bus."""
    try:
        data = json.loads((Path(home) / HOST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: str(v) for k, v in data.items() if k in HOST_FIELDS} if isinstance(data, dict) \
        else {}


def write_host_file(settings: Settings) -> None:
    body = {k: getattr(settings, k) for k in HOST_FIELDS if getattr(settings, k)}
    path = settings.home / HOST_FILE
    if not body:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{HOST_FILE}.tmp")
    tmp.write_text(json.dumps(body, indent=1))
    os.replace(tmp, path)
