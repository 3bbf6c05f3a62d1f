"""The Goal Gradient Solver's mathematics (DESIGN §6, seeds/000 §3, §4.3, Appendices A and B).

Pure functions only: no bus, no disk, no clock. The `ggs` process and `artoo ggs explain` both run a
round through `step()`, so the numbers an operator replays offline are the numbers the daemon used.

    L  = α·D + β·(1−Ω)·P + λ·Ω
    D  = Σ wᵢ·failᵢ / Σ wᵢ   over subtask verdicts and R4b's task-level verdicts;
         wᵢ = 1 for verifiable criteria (and for any passing criterion), k/N for a failing plausible
         one (k of its N scored attempts failed: a systematic failure weighs more than a transient one)
    P  = logical / (logical + environmental) failures (0.5 when nothing is classified)
    Ω  = min(1, w₁·replans/maxReplans + w₂·elapsed/time_budget)
    ∇L = L − L_prev (0 on the first round)

The cascade (priority order): Ω ≥ θ → abandon; D ≤ δ → success; else the action grid on |∇L| vs ε and
P vs ρ. Then the overrides: R4b's task-level rejection vetoes success (Go defect: GGS delivered
anyway); the Law 2 kill switch (∇L ≥ ε on `kill_threshold` consecutive rounds), R4b's abandon
recommendation and the replan budget (`max_replans` requests) turn an action directive into abandon.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Union

from pydantic import BaseModel, Field

from services.runtime.mkct import (ENV_LOCAL, QUANTIZATION, intent_space, target_entity,
                                   tool_space)
from protocol.messages import (CriterionVerdict, LossBreakdown, Megram, OutcomeSummary,
                               ReplanRequest, SubTaskOutcome, ToolCallRecord)

ACTION_STATES = ("refine", "change_path", "change_approach", "break_symmetry")
TERMINAL_STATES = ("accept", "success", "abandon")
LOGICAL_DIRECTIVES = ("change_approach", "break_symmetry")    # approach wrong: block the tools
# Decisions are taken on values rounded to this many decimals, so 0.5 − 0.4 is 0.1, not 0.0999….
PRECISION = 9

# Fallback failure classification when no verdict carries a class (Go keyword lists, except that
# "permission denied" and Law 1 refusals are environmental: the environment or the operator blocked
# a sound approach).
_LOGICAL_WORDS = ("logic", "wrong approach", "incorrect", "invalid", "cannot", "not possible",
                  "misunderstood", "does not answer", "irrelevant")
_ENV_WORDS = ("network", "timeout", "timed out", "context deadline", "connection", "unavailable",
              "not found", "no such file", "temporary", "rate limit", "permission denied",
              "operation not permitted", "[law1]", "refused", "denied")


# ------------------------------------------------------------------------------------------------
# Hyper-parameters
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GgsParams:
    """Appendix B defaults; `from_settings` reads the ggs_* fields of protocol/settings.py."""
    alpha: float = 0.6
    beta: float = 0.3
    lam: float = 0.4
    w1: float = 0.6
    w2: float = 0.4
    epsilon: float = 0.1
    delta: float = 0.3
    rho: float = 0.5
    theta: float = 0.8
    time_budget_ms: float = 300_000.0
    max_replans: int = 3
    kill_threshold: int = 2

    @classmethod
    def from_settings(cls, s) -> "GgsParams":
        return cls(alpha=s.ggs_alpha, beta=s.ggs_beta, lam=s.ggs_lambda, w1=s.ggs_w1, w2=s.ggs_w2,
                   epsilon=s.ggs_epsilon, delta=s.ggs_delta, rho=s.ggs_rho, theta=s.ggs_theta,
                   time_budget_ms=s.ggs_time_budget_ms, max_replans=s.ggs_max_replans,
                   kill_threshold=s.ggs_kill_threshold)


def _r(x: float) -> float:
    return round(float(x), PRECISION)


# ------------------------------------------------------------------------------------------------
# D — intent-result distance
# ------------------------------------------------------------------------------------------------

def trajectory_consistency(verdict: CriterionVerdict, outcome: SubTaskOutcome | None = None) -> float:
    """k/N for a criterion: the share of scored attempts in which it failed.

    Taken from the verdict's own counters, else from the outcome's gap trajectory; with no evidence
    at all it is 1.0 (treated as systematic: never let missing data shrink a failure)."""
    k, n = verdict.failed_attempts, verdict.attempts
    if n <= 0 and outcome is not None and outcome.gap_trajectory:
        n = len(outcome.gap_trajectory)
        k = sum(1 for p in outcome.gap_trajectory if verdict.criterion in p.unmet_criteria)
    if n <= 0 or k <= 0:
        return 1.0
    return min(1.0, k / n)


def criterion_weight(verdict: CriterionVerdict, outcome: SubTaskOutcome | None = None) -> float:
    if verdict.mode == "verifiable" or verdict.verdict == "pass":
        return 1.0
    return trajectory_consistency(verdict, outcome)


def weighted_criteria(outcomes: Iterable[SubTaskOutcome],
                      task_verdicts: Iterable[CriterionVerdict] = ()) -> list[tuple[float, bool]]:
    """(weight, failed) for every criterion D counts: subtask verdicts, a synthetic verifiable
    criterion for a failed subtask none of whose verdicts failed (it still failed), and R4b's
    task-level verdicts."""
    items: list[tuple[float, bool]] = []
    for o in outcomes:
        verdicts = o.criteria_verdicts
        for v in verdicts:
            items.append((criterion_weight(v, o), v.verdict == "fail"))
        if o.status == "failed" and not any(v.verdict == "fail" for v in verdicts):
            items.append((1.0, True))
        elif not verdicts:
            items.append((1.0, o.status == "failed"))
    for v in task_verdicts:
        items.append((criterion_weight(v), v.verdict == "fail"))
    return items


def distance(outcomes: Iterable[SubTaskOutcome],
             task_verdicts: Iterable[CriterionVerdict] = ()) -> float:
    """D ∈ [0, 1]; 1.0 when there is nothing to judge (nothing was delivered)."""
    items = weighted_criteria(outcomes, task_verdicts)
    total = sum(w for w, _ in items)
    if total <= 0:
        return 1.0
    return _r(sum(w for w, failed in items if failed) / total)


# ------------------------------------------------------------------------------------------------
# P — process implausibility
# ------------------------------------------------------------------------------------------------

def _keyword_class(text: str) -> str:
    text = text.lower()
    logical = any(w in text for w in _LOGICAL_WORDS)
    env = any(w in text for w in _ENV_WORDS)
    if logical and not env:
        return "logical"
    if env and not logical:
        return "environmental"
    return ""


def failure_counts(outcomes: Iterable[SubTaskOutcome],
                   task_verdicts: Iterable[CriterionVerdict] = ()) -> tuple[float, float]:
    """(logical, environmental) failure counts; "mixed" counts half to each.

    Classes come from failing verdicts (subtask and task level); failing that, from the last gap
    trajectory point of each failed subtask; failing that, from keywords in its failure reason, unmet
    criteria and tool errors."""
    outcomes = list(outcomes)
    logical = env = 0.0

    def add(cls: str) -> None:
        nonlocal logical, env
        if cls == "logical":
            logical += 1
        elif cls == "environmental":
            env += 1
        elif cls == "mixed":
            logical += 0.5
            env += 0.5

    failed = [o for o in outcomes if o.status == "failed"]
    for o in failed:
        for v in o.criteria_verdicts:
            if v.verdict == "fail":
                add(v.failure_class)
    for v in task_verdicts:
        if v.verdict == "fail":
            add(v.failure_class)
    if logical + env > 0:
        return logical, env
    for o in failed:
        if o.gap_trajectory and o.gap_trajectory[-1].failure_class:
            add(o.gap_trajectory[-1].failure_class)
    if logical + env > 0:
        return logical, env
    for o in failed:
        parts = [o.failure_reason or ""]
        if o.gap_trajectory:
            parts += o.gap_trajectory[-1].unmet_criteria
        parts += [c.error or "" for c in o.tool_calls]
        parts += ["[law1]" for c in o.tool_calls if c.law1]
        add(_keyword_class(" ".join(parts)))
    return logical, env


def implausibility(outcomes: Iterable[SubTaskOutcome],
                   task_verdicts: Iterable[CriterionVerdict] = ()) -> float:
    """P ∈ [0, 1]: high = the approach is wrong, low = the environment blocked a sound approach."""
    logical, env = failure_counts(outcomes, task_verdicts)
    if logical + env <= 0:
        return 0.5
    return _r(logical / (logical + env))


# ------------------------------------------------------------------------------------------------
# Ω, L, the cascade
# ------------------------------------------------------------------------------------------------

def resource_cost(replans: int, elapsed_ms: float, p: GgsParams) -> float:
    """Ω ∈ [0, 1]: budget pressure from the replan count and the elapsed time."""
    omega = (p.w1 * max(0, replans) / max(1, p.max_replans)
             + p.w2 * max(0.0, elapsed_ms) / max(1.0, p.time_budget_ms))
    return _r(min(1.0, omega))


def loss(D: float, P: float, omega: float, p: GgsParams) -> float:
    """L = α·D + β·(1−Ω)·P + λ·Ω (the process weight decays as the budget runs out)."""
    return _r(p.alpha * D + p.beta * (1.0 - omega) * P + p.lam * omega)


def macro_state(D: float, P: float, omega: float, grad: float, p: GgsParams) -> str:
    """The 24-cell table of Appendix A, by the priority cascade of §3.3 (the test oracle)."""
    if omega >= p.theta:
        return "abandon"
    if D <= p.delta:
        return "success"
    return action_cell(P, grad, p)


def action_cell(P: float, grad: float, p: GgsParams) -> str:
    """The action grid: |∇L| says whether there is directional signal, P which kind of change."""
    signal = abs(grad) >= p.epsilon
    logical = P > p.rho
    if signal:
        return "change_approach" if logical else "refine"
    return "break_symmetry" if logical else "change_path"


def is_worsening(grad: float, p: GgsParams) -> bool:
    return grad >= p.epsilon


def urgency(grad: float, p: GgsParams) -> str:
    """The sign of ∇L modulates urgency within a macro-state (§3.2); inside the ±ε plateau there
    is no directional signal, so urgency stays normal."""
    if abs(grad) < p.epsilon:
        return "normal"
    return "high" if grad > 0 else "low"


def failure_class_of(P: float, p: GgsParams, any_failure: bool = True) -> str:
    if not any_failure:
        return ""
    if P > p.rho:
        return "logical"
    if P < p.rho:
        return "environmental"
    return "mixed"


_ACTION_TEXT = {
    "change_path": "(environmental): keep the approach, change the target or path.",
    "break_symmetry": "(logical): stuck with a wrong approach; use a novel tool class.",
    "refine": "(environmental): the approach is sound; tighten its parameters.",
    "change_approach": "(logical): the approach is wrong; switch method.",
}


@dataclass(frozen=True)
class Decision:
    directive: str            # the macro-state after overrides
    cell: str                 # the raw Appendix A cell
    reason: str               # budget / converged / grid / kill_switch / metaval_abandon / ...
    worsening: int            # consecutive worsening rounds including this one
    urgency: str
    rationale: str


def decide(D: float, P: float, omega: float, grad: float, p: GgsParams, *,
           worsening: int = 0, recommendation: str = "replan", task_rejected: bool = False,
           replans: int = 0, calls_spent: str = "") -> Decision:
    """The full decision: the cascade, then R4b's veto, the Law 2 kill switch, R4b's abandon
    recommendation, the replan budget (the medium loop ends after `max_replans` replan
    requests, seeds/000 §6) and the task's LLM call budget (`calls_spent`: "used of budget" once
    it is reached). `worsening` is the streak before this round; `replans` counts this round's
    request."""
    cell = macro_state(D, P, omega, grad, p)
    streak = worsening + 1 if is_worsening(grad, p) else 0
    directive, reason = cell, {"abandon": "budget", "success": "converged"}.get(cell, "grid")
    g, e = f"{grad:+.3f}", p.epsilon
    if cell == "abandon":
        text = f"Ω={omega:.3f} ≥ θ={p.theta}: the budget is exhausted."
    elif cell == "success":
        text = f"D={D:.3f} ≤ δ={p.delta}: the result is within the convergence threshold."
    else:
        text = ""
    if cell == "success" and task_rejected:
        directive, reason = action_cell(P, grad, p), "metaval_rejected"
        text = (f"D={D:.3f} ≤ δ={p.delta}, but the meta-validator rejected task-level criteria, "
                f"so the result is not delivered as a success. ")
    if directive in ACTION_STATES:
        signal = "≥" if abs(grad) >= e else "<"
        why = (f"(∇L={g})" if signal == "≥" else "(no directional signal)")
        kind = "> ρ" if P > p.rho else "≤ ρ"
        text += (f"|∇L|={abs(grad):.3f} {signal} ε={e} {why} and P={P:.3f} {kind}={p.rho} "
                 + _ACTION_TEXT[directive])
        if streak >= p.kill_threshold:
            directive, reason = "abandon", "kill_switch"
            text = (f"Law 2 kill switch: ∇L ≥ ε={e} on {streak} consecutive rounds "
                    f"(∇L={g}); the loss is diverging, so continuing would only burn budget.")
        elif recommendation == "abandon":
            directive, reason = "abandon", "metaval_abandon"
            text = ("The meta-validator recommends abandon (its replan budget is spent). "
                    + text)
        elif replans >= p.max_replans:
            directive, reason = "abandon", "replan_budget"
            text = (f"The replan budget is spent ({replans} of {p.max_replans} replan "
                    f"requests). " + text)
        elif calls_spent:
            directive, reason = "abandon", "llm_budget"
            text = f"The LLM call budget is spent ({calls_spent} calls). " + text
    return Decision(directive, cell, reason, streak, urgency(grad, p), text.strip())


# ------------------------------------------------------------------------------------------------
# Blocked tools and targets (from the structured ToolCallRecord, never from strings)
# ------------------------------------------------------------------------------------------------

def _dedup(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
    return list(seen)


def failing_calls(outcomes: Iterable[SubTaskOutcome]) -> list[tuple[SubTaskOutcome, ToolCallRecord]]:
    """Calls of failed subtasks that failed themselves (error) or were refused by Law 1: the
    specific inputs that are dead ends. Successful calls of a failed subtask are not dead ends."""
    return [(o, c) for o in outcomes if o.status == "failed"
            for c in o.tool_calls if c.error or c.law1]


def blocked_tools(outcomes: Iterable[SubTaskOutcome]) -> list[str]:
    """Tools used by failed subtasks (a logical failure condemns the method, not one input);
    calls Law 1 refused never ran, so they do not condemn their tool."""
    return _dedup(c.tool for o in outcomes if o.status == "failed"
                  for c in o.tool_calls if not c.law1)


def failed_targets(outcomes: Iterable[SubTaskOutcome]) -> list[str]:
    return _dedup(c.target for _, c in failing_calls(outcomes))


def accumulate(existing: Iterable[str], new: Iterable[str]) -> list[str]:
    """Insertion-ordered union: targets blocked in any round stay blocked, each listed once."""
    return _dedup([*existing, *new])


def must_not(tools: Iterable[str], targets: Iterable[str]) -> list[str]:
    return [f"use the tool '{t}'" for t in tools] + [f"act on '{t}' again" for t in targets]


def failed_criterion(outcomes: Iterable[SubTaskOutcome],
                     task_verdicts: Iterable[CriterionVerdict] = ()) -> str:
    """The first criterion that failed: a failed subtask's failing verdict, else the unmet criteria
    of its last attempt, else R4b's first failing task-level criterion."""
    outcomes = list(outcomes)
    for o in outcomes:
        if o.status != "failed":
            continue
        for v in o.criteria_verdicts:
            if v.verdict == "fail":
                return v.criterion
        if o.gap_trajectory and o.gap_trajectory[-1].unmet_criteria:
            return o.gap_trajectory[-1].unmet_criteria[0]
    for v in task_verdicts:
        if v.verdict == "fail":
            return v.criterion
    return ""


# ------------------------------------------------------------------------------------------------
# Outputs
# ------------------------------------------------------------------------------------------------

def merge_outputs(values: list[Any]) -> Any:
    """None for nothing, the value itself for one, a list for several."""
    values = [v for v in values if v is not None and v != ""]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def outcome_key(o: SubTaskOutcome) -> str:
    """Subtask ids are fresh every round; the intent identifies "the same piece of work"."""
    return o.intent or o.subtask_id


# ------------------------------------------------------------------------------------------------
# Memory: the quantization matrix
# ------------------------------------------------------------------------------------------------

def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def tool_list(outcomes: Iterable[SubTaskOutcome], status: str) -> list[str]:
    return _dedup(f"{c.tool}:{_clip(c.target, 120)}" if c.target else c.tool
                  for o in outcomes if o.status == status for c in o.tool_calls)


def terminal_content(state: str, outcomes: list[SubTaskOutcome], summary: str) -> str:
    """What happened, for the planner of a future run of this intent (Law 0: only facts)."""
    if state == "abandon":
        tools = tool_list(outcomes, "failed")
        head = "Failed." + (f" Tools tried: {', '.join(tools)}." if tools else "")
        return _clip(f"{head} Gap: {summary}" if summary else head, 1000)
    tools = tool_list(outcomes, "matched")
    head = "Succeeded." + (f" Tools: {', '.join(tools)}." if tools else "")
    return _clip(f"{head} Result: {summary}" if summary else head, 1000)


def megram_id(*parts: str) -> str:
    """Deterministic 16-character ids: a write re-sent after a crash names the same record."""
    return "g" + hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:15]


def make_megram(state: str, space: str, entity: str, content: str, now: float,
                id_parts: tuple[str, ...]) -> Megram:
    f, sigma, k = QUANTIZATION[state]
    return Megram(id=megram_id(*id_parts), level="M", created_at=now, space=space, entity=entity,
                  content=content, state=state, f=f, sigma=sigma, k=k)


def terminal_megram(state: str, task_id: str, intent_slug: str, content: str, now: float,
                    entity: str = ENV_LOCAL) -> Megram:
    """Macro-event: space = `intent:<slug>`, entity = the local environment (memory's tags)."""
    return make_megram(state, intent_space(intent_slug or task_id), entity, content, now,
                       (task_id, "terminal", state))


def action_megrams(state: str, task_id: str, round_no: int, outcomes: Iterable[SubTaskOutcome],
                   now: float) -> list[Megram]:
    """Micro-events: one Megram per blocked (tool, target) of this round; space `tool:<name>`,
    entity `target:<value>`. For the logical directives the failed subtasks' other calls count
    too (their tool class is what gets blacklisted)."""
    outcomes = list(outcomes)
    pairs: list[tuple[SubTaskOutcome, ToolCallRecord]] = failing_calls(outcomes)
    if state in LOGICAL_DIRECTIVES:
        pairs += [(o, c) for o in outcomes if o.status == "failed" for c in o.tool_calls
                  if not c.law1]
    out, seen = [], set()
    for o, c in pairs:
        if not c.target or (c.tool, c.target) in seen:
            continue
        seen.add((c.tool, c.target))
        why = c.error or ("refused by Law 1" if c.law1 else "") or o.failure_reason or "failed"
        content = _clip(f"{o.intent or o.subtask_id}: {why}", 500)
        out.append(make_megram(state, tool_space(c.tool), target_entity(c.target), content, now,
                               (task_id, str(round_no), state, c.tool, c.target)))
    return out


# ------------------------------------------------------------------------------------------------
# One round
# ------------------------------------------------------------------------------------------------

class Trajectory(BaseModel):
    """What GGS remembers about a task between rounds (persisted by the process)."""
    replans: int = 0                      # ReplanRequests evaluated (Ω's replan count)
    directives: int = 0                   # PlanDirectives issued (replans actually made)
    l_prev: Optional[float] = None
    worsening: int = 0
    prev_directive: str = "init"
    blocked_targets: list[str] = Field(default_factory=list)


@dataclass
class RoundResult:
    D: float
    P: float
    omega: float
    L: float
    grad: float
    directive: str
    cell: str
    reason: str
    urgency: str
    rationale: str
    prev_directive: str
    replans: int
    elapsed_ms: float = 0.0
    blocked_tools: list[str] = field(default_factory=list)
    blocked_targets: list[str] = field(default_factory=list)
    failed_criterion: str = ""
    failure_class: str = ""
    trajectory: Trajectory = field(default_factory=Trajectory)

    @property
    def loss(self) -> LossBreakdown:
        return LossBreakdown(D=self.D, P=self.P, Omega=self.omega, L=self.L)

    @property
    def terminal(self) -> bool:
        return self.directive in TERMINAL_STATES

    def as_dict(self) -> dict:
        return {"D": self.D, "P": self.P, "Omega": self.omega, "L": self.L, "grad_l": self.grad,
                "directive": self.directive, "cell": self.cell, "reason": self.reason,
                "urgency": self.urgency, "rationale": self.rationale,
                "prev_directive": self.prev_directive, "replan_round": self.replans,
                "elapsed_ms": self.elapsed_ms,
                "blocked_tools": self.blocked_tools, "blocked_targets": self.blocked_targets,
                "failed_criterion": self.failed_criterion, "failure_class": self.failure_class}


Round = Union[ReplanRequest, OutcomeSummary]


def step(traj: Trajectory, msg: Round, p: GgsParams, *, elapsed_ms: float | None = None,
         D: float | None = None, P: float | None = None, calls_spent: str = "") -> RoundResult:
    """Evaluate one round (a ReplanRequest, or R4b's OutcomeSummary = accept) against the task's
    trajectory; returns the metrics, the decision and the next trajectory. `D`/`P` override the
    computed values (offline what-if analysis in `artoo ggs explain`)."""
    accept = isinstance(msg, OutcomeSummary)
    replans = traj.replans + (0 if accept else 1)
    outcomes, verdicts = msg.outcomes, msg.task_criteria_verdicts
    if D is None:
        # R4b accepted: with no criteria reported the distance is 0, not "nothing delivered".
        D = distance(outcomes, verdicts) if (outcomes or verdicts or not accept) else 0.0
    else:
        D = _r(D)
    P = implausibility(outcomes, verdicts) if P is None else _r(P)
    elapsed_ms = msg.elapsed_ms if elapsed_ms is None else elapsed_ms
    omega = resource_cost(replans, elapsed_ms, p)
    L = loss(D, P, omega, p)
    grad = 0.0 if traj.l_prev is None else _r(L - traj.l_prev)
    any_failure = any(o.status == "failed" for o in outcomes) or any(
        v.verdict == "fail" for v in verdicts)
    if accept:
        decision = Decision("accept", "accept", "accepted", 0,
                            urgency(grad, p), "The meta-validator accepted the merged result.")
    else:
        rejected = any(v.verdict == "fail" for v in verdicts)
        decision = decide(D, P, omega, grad, p, worsening=traj.worsening,
                          recommendation=msg.recommendation, task_rejected=rejected,
                          replans=replans, calls_spent=calls_spent)
    directive = decision.directive
    targets = accumulate(traj.blocked_targets, failed_targets(outcomes))
    tools = blocked_tools(outcomes) if directive in LOGICAL_DIRECTIVES else []
    nxt = Trajectory(replans=replans,
                     directives=traj.directives + (1 if directive in ACTION_STATES else 0),
                     l_prev=L, worsening=decision.worsening, prev_directive=directive,
                     blocked_targets=targets)
    return RoundResult(D=D, P=P, omega=omega, L=L, grad=grad, directive=directive,
                       cell=decision.cell, reason=decision.reason, urgency=decision.urgency,
                       rationale=decision.rationale, prev_directive=traj.prev_directive,
                       replans=replans, elapsed_ms=elapsed_ms, blocked_tools=tools,
                       blocked_targets=targets,
                       failed_criterion=failed_criterion(outcomes, verdicts),
                       failure_class=failure_class_of(P, p, any_failure), trajectory=nxt)


def parse_round(raw: dict) -> tuple[Round, dict]:
    """A round of `artoo ggs explain` input: a ReplanRequest body (default) or, with
    "kind": "accept", an OutcomeSummary body; optional "D"/"P" override the computed values."""
    if not isinstance(raw, dict):
        raise ValueError(f"a round must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind", "replan")
    if kind not in ("replan", "accept"):
        raise ValueError(f"kind must be 'replan' or 'accept', got {kind!r}")
    body = {k: v for k, v in raw.items() if k not in ("kind", "D", "P")}
    body.setdefault("task_id", "explain")
    msg: Round = (OutcomeSummary if kind == "accept" else ReplanRequest).model_validate(body)
    overrides = {}
    for key in ("D", "P"):
        if key in raw:
            value = float(raw[key])
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{key} must be within [0, 1], got {value}")
            overrides[key] = value
    return msg, overrides


def replay(rounds: list[dict], p: GgsParams) -> list[dict]:
    """Run a list of rounds through `step` as the daemon would; rounds after a terminal state are
    reported as ignored (the daemon drops messages for an ended task)."""
    traj, out, ended = Trajectory(), [], False
    for i, raw in enumerate(rounds, 1):
        try:
            msg, overrides = parse_round(raw)
        except Exception as exc:  # noqa: BLE001 - pydantic or value errors, reported per round
            raise ValueError(f"round {i}: {exc}") from None
        if ended:
            out.append({"round": i, "ignored": "the task already ended"})
            continue
        res = step(traj, msg, p, **overrides)
        traj = res.trajectory
        ended = res.terminal
        out.append({"round": i, **res.as_dict()})
    return out
