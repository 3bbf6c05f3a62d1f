"""Seed 002's formulas, pure (no I/O, no bus): what the `world` process and the roles share.

* Emotion (Def. 3): a primary label from a small lexicon, mapped to (valence, arousal) by the
  seed's table; arousal raised by text-level intensity: a' = min(1, a_base + Δa_text), Δa_text
  from emphasis (UPPER-CASE words, *stars*, stretched letters), exclamation marks and length.
* Entity state (§1.4): sentiment EMA s' = (1−λ)·s + λ·x (λ 0.3); lifecycle active → stale after
  θ_stale without a mention (never deleted, only decayed); importance
  I = α_r·exp(−Δt/τ) + α_f·min(n, N_cap)/N_cap (α_r 0.4, α_f 0.6, τ 3600 s, N_cap 10).
* Goal priority (Def. 5): p(g,t) = α·p_base(g) + β·u(g,t) + γ·ξ(g,e(t)) (0.5/0.3/0.2), with the
  seed's urgency steps (overdue 1.0, < 1 h 0.9, < 24 h 0.7, else 0.5) and emotion modifier
  (a REACTIVE goal under negative valence 0.8; otherwise 0.5 + 0.3·a·max(0, −v), so a distressed
  user's own goal ranks above a calm one's but below a reactive goal).
* Goal generation triggers (Def. 6): repetition count(intent, Δt) ≥ θ_rep; negative emotional
  state v < −θ_v ∧ a > θ_a; time pressure t_deadline − t < θ_urgency.

Every default is a setting (protocol/settings.py, `world_*` and `priority_*`).
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Optional

# ---------------------------------------------------------------------------------------------
# emotion (Definition 3)
# ---------------------------------------------------------------------------------------------

EMOTIONS: dict[str, tuple[float, float]] = {       # label -> (valence, arousal), seed 002's table
    "joy": (0.8, 0.6),
    "excitement": (0.7, 0.9),
    "sadness": (-0.6, 0.2),
    "anger": (-0.8, 0.9),
    "fear": (-0.6, 0.7),
    "surprise": (0.1, 0.8),
    "anxiety": (-0.5, 0.6),
    "neutral": (0.0, 0.3),
}

_LEXICON: dict[str, tuple[str, ...]] = {
    "anger": ("angry", "furious", "broken", "broke", "hate", "wtf", "damn", "damned", "ridiculous",
              "annoying", "annoyed", "fed up", "sick of", "unacceptable", "terrible", "awful",
              "useless", "stupid", "crap", "again?!", "still broken", "still not", "not again",
              "keeps failing", "keeps crashing", "for god's sake", "seriously", "infuriating",
              "mad", "pissed", "garbage", "sucks"),
    "fear": ("scared", "afraid", "terrified", "panic", "frightened", "dread", "lose everything",
             "data loss"),
    "anxiety": ("worried", "worry", "anxious", "nervous", "stressed", "stress", "concerned",
                "asap", "hurry", "urgent", "urgently", "deadline", "running out of time",
                "in time", "quickly please"),
    "sadness": ("sad", "disappointed", "disappointing", "unfortunately", "depressed", "unhappy",
                "miss", "lost", "gave up", "hopeless", "sorry"),
    "joy": ("thanks", "thank you", "great", "awesome", "love", "happy", "glad", "nice", "perfect",
            "wonderful", "excellent", "good job", "well done", "pleased", "cool"),
    "excitement": ("excited", "can't wait", "cannot wait", "amazing", "wow", "fantastic",
                   "thrilled", "incredible", "yay", "woohoo"),
    "surprise": ("surprised", "unexpected", "unexpectedly", "whoa", "suddenly", "didn't expect",
                 "did not expect", "strange", "weird", "odd"),
}
# ties go to the first label here: a message both angry and anxious is read as angry
_ORDER = ("anger", "fear", "anxiety", "sadness", "excitement", "surprise", "joy")
_NEGATORS = ("not", "no", "never", "n't", "hardly")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'’]*")
_STRETCH = re.compile(r"([A-Za-z])\1{2,}")            # "sooo", "pleeease"
_STARRED = re.compile(r"\*[^*\s][^*]{0,40}\*|_[^_\s][^_]{0,40}_")
_ACRONYMS = frozenset({"OK", "ID", "URL", "API", "CSV", "JSON", "YAML", "HTTP", "HTTPS", "SQL",
                       "PDF", "CPU", "RAM", "SSH", "DNS", "TCP", "UDP", "UTC", "AWS", "GCP", "USB",
                       "CLI", "TODO", "README", "HTML", "CSS", "XML", "LLM", "GPU", "IP", "TXT",
                       "MD", "PR", "UI", "OS"})


@dataclass(frozen=True)
class Emotion:
    valence: float
    arousal: float
    label: str
    base_arousal: float = 0.0
    delta_arousal: float = 0.0
    cues: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"valence": round(self.valence, 3), "arousal": round(self.arousal, 3),
                "label": self.label, "cues": list(self.cues)}


def _hits(lower: str, phrase: str) -> list[int]:
    """Start offsets of `phrase` in `lower` as whole words."""
    pattern = r"(?<![a-z])" + re.escape(phrase) + r"(?![a-z])"
    return [m.start() for m in re.finditer(pattern, lower)]


def _negated(lower: str, at: int) -> bool:
    before = lower[max(0, at - 14):at].split()
    return any(w in _NEGATORS or w.endswith("n't") for w in before[-2:])


def intensity(text: str) -> tuple[float, list[str]]:
    """Δa_text: emphasis (UPPER-CASE words, *stars*, stretched letters), '!' and length."""
    cues: list[str] = []
    delta = 0.0
    caps = [w for w in _WORDS.findall(text) if len(w) >= 3 and w.isupper() and w not in _ACRONYMS]
    if caps:
        delta += min(0.2, 0.1 * len(caps))
        cues.append(f"caps:{len(caps)}")
    emph = len(_STARRED.findall(text)) + len(_STRETCH.findall(text))
    if emph:
        delta += min(0.1, 0.05 * emph)
        cues.append(f"emphasis:{emph}")
    bangs = text.count("!") + text.count("！")
    if bangs:
        delta += min(0.2, 0.05 * bangs + (0.05 if "!!" in text or "?!" in text else 0.0))
        cues.append(f"exclamation:{bangs}")
    if len(text) > 200:
        delta += min(0.1, (len(text) - 200) / 2000)
        cues.append("long")
    return round(delta, 4), cues


def detect_emotion(text: str) -> Emotion:
    """The emotion vector e(t) = (v, a) of one user message, by code (seed 002 Def. 3)."""
    lower = (text or "").lower().replace("’", "'")
    scores: dict[str, float] = {}
    cues: list[str] = []
    for label, phrases in _LEXICON.items():
        for phrase in phrases:
            for at in _hits(lower, phrase):
                if _negated(lower, at):
                    if label in ("joy", "excitement"):      # "not happy" reads as sadness
                        scores["sadness"] = scores.get("sadness", 0.0) + 1.0
                        cues.append(f"not {phrase}")
                    continue
                scores[label] = scores.get(label, 0.0) + (1.0 + 0.5 * phrase.count(" "))
                cues.append(phrase)
    if re.search(r"\bagain\b", lower) and scores.get("anger", 0.0) + scores.get("sadness", 0.0):
        scores["anger"] = scores.get("anger", 0.0) + 0.5
        cues.append("again")
    label = "neutral"
    if scores:
        best = max(scores.values())
        label = next(lab for lab in _ORDER if scores.get(lab) == best)
    valence, base = EMOTIONS[label]
    delta, icues = intensity(text or "")
    arousal = min(1.0, base + delta)
    return Emotion(valence=valence, arousal=round(arousal, 4), label=label, base_arousal=base,
                   delta_arousal=delta, cues=tuple(dict.fromkeys(cues + icues)))


# ---------------------------------------------------------------------------------------------
# entity state (§1.4)
# ---------------------------------------------------------------------------------------------

def ema(previous: Optional[float], value: float, lam: float = 0.3) -> float:
    """Sentiment EMA: s' = (1 − λ)·s + λ·x; the first observation is taken as it is."""
    if previous is None:
        return float(value)
    return (1.0 - lam) * float(previous) + lam * float(value)


def recency(now: float, last_mentioned: float, tau_s: float = 3600.0) -> float:
    """exp(−Δt/τ), Δt = now − last mention (never above 1 for a mention in the future)."""
    dt = max(0.0, now - last_mentioned)
    return math.exp(-dt / tau_s) if tau_s > 0 else 0.0


def frequency(mentions: int, cap: int = 10) -> float:
    return min(max(0, mentions), cap) / cap if cap > 0 else 0.0


def importance(now: float, last_mentioned: float, mentions: int, *, alpha_r: float = 0.4,
               alpha_f: float = 0.6, tau_s: float = 3600.0, cap: int = 10) -> float:
    """I(e, t) = α_r·recency + α_f·min(mentions, N_cap)/N_cap."""
    return alpha_r * recency(now, last_mentioned, tau_s) + alpha_f * frequency(mentions, cap)


def lifecycle(now: float, last_mentioned: float, stale_after_s: float) -> str:
    """active while mentioned within θ_stale, stale after: never deleted, only decayed."""
    return "active" if now - last_mentioned <= stale_after_s else "stale"


STALE_WEIGHT = 0.5       # a stale entity's importance counts half in context formation


def context_weight(now: float, entity: dict, *, stale_after_s: float, **kw) -> float:
    """An entity's weight in the projection: its importance, halved once stale."""
    imp = importance(now, entity["last_mentioned"], entity["mentions"], **kw)
    if lifecycle(now, entity["last_mentioned"], stale_after_s) == "stale":
        imp *= STALE_WEIGHT
    return imp


# ---------------------------------------------------------------------------------------------
# goal priority (Definition 5)
# ---------------------------------------------------------------------------------------------

GOAL_TYPES = ("USER", "AUTO", "SYSTEM", "REACTIVE")
GOAL_STATUSES = ("PENDING", "ACTIVE", "COMPLETED", "FAILED", "BLOCKED", "DEFERRED", "REJECTED")
BASE_PRIORITY = {"USER": 0.5, "AUTO": 0.5, "SYSTEM": 0.6, "REACTIVE": 0.7}


def urgency(now: float, deadline: Optional[float]) -> float:
    """u(g, t) ∈ [0, 1], monotonically increasing as the deadline nears (seed 002 §5.3 steps)."""
    if not deadline:
        return 0.5
    remaining = deadline - now
    if remaining <= 0:
        return 1.0
    if remaining < 3600:
        return 0.9
    if remaining < 86400:
        return 0.7
    return 0.5


def emotion_modifier(goal_type: str, valence: float, arousal: float) -> float:
    """ξ(g, e(t)) ∈ [0, 1]: reactive goals rank higher under negative valence."""
    if goal_type == "REACTIVE" and valence < 0:
        return 0.8
    return 0.5 + 0.3 * max(0.0, min(1.0, arousal)) * max(0.0, -valence)


def priority(goal_type: str, now: float, *, deadline: Optional[float] = None,
             valence: float = 0.0, arousal: float = 0.3, base: Optional[float] = None,
             alpha: float = 0.5, beta: float = 0.3, gamma: float = 0.2) -> float:
    """p(g, t) = α·p_base + β·u(g, t) + γ·ξ(g, e(t)), clipped to [0, 1]."""
    p_base = BASE_PRIORITY.get(goal_type, 0.5) if base is None else base
    p = alpha * p_base + beta * urgency(now, deadline) + gamma * emotion_modifier(
        goal_type, valence, arousal)
    return max(0.0, min(1.0, p))


# ---------------------------------------------------------------------------------------------
# goal generation triggers (Definition 6)
# ---------------------------------------------------------------------------------------------

def repetition(times: Iterable[float], now: float, window_s: float, threshold: int) -> bool:
    """mention count(intent, Δt) ≥ θ_rep."""
    return sum(1 for t in times if now - window_s <= t <= now) >= threshold


def negative_state(valence: float, arousal: float, theta_v: float = 0.5,
                   theta_a: float = 0.5) -> bool:
    """v(t) < −θ_v ∧ a(t) > θ_a."""
    return valence < -theta_v and arousal > theta_a


def time_pressure(now: float, deadline: Optional[float], theta_urgency_s: float) -> bool:
    """t_deadline − t < θ_urgency (and the deadline not long gone: a day at most)."""
    if not deadline:
        return False
    return -86400.0 < deadline - now < theta_urgency_s


_STEPS = ((60.0, "1m"), (300.0, "5m"), (900.0, "15m"), (3600.0, "1h"), (6 * 3600.0, "6h"),
          (86400.0, "1d"), (7 * 86400.0, "7d"))


def suggested_every(times: list[float]) -> str:
    """The interval a repetition suggests: the median gap, rounded up to a usual step."""
    ts = sorted(times)
    gaps = sorted(b - a for a, b in zip(ts, ts[1:]) if b > a)
    if not gaps:
        return "1d"
    median = gaps[len(gaps) // 2]
    for seconds, text in _STEPS:
        if median <= seconds * 1.5:
            return text
    return "7d"


# ---------------------------------------------------------------------------------------------
# deadlines the user states ("by 17:00", "in 2 hours", "tomorrow", "2026-12-01 09:00")
# ---------------------------------------------------------------------------------------------

_IN = re.compile(r"\bin\s+(\d+(?:\.\d+)?)\s*(min(?:ute)?s?|h(?:ou)?rs?|hours?|days?)\b", re.I)
_BY_CLOCK = re.compile(r"\b(?:by|before|until|due(?: at)?|deadline(?: is| at)?:?)\s+"
                       r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b", re.I)
_ISO = re.compile(r"\b(?:by|before|until|due|deadline(?: is)?:?)\s+(\d{4}-\d{2}-\d{2})"
                  r"(?:[ T](\d{1,2}):(\d{2}))?", re.I)
_TOMORROW = re.compile(r"\b(?:by|before|until|due)\s+tomorrow\b", re.I)
_EOD = re.compile(r"\b(?:by|before|until)\s+(?:the\s+)?end of (?:the\s+)?day\b|\bby tonight\b",
                  re.I)


def stated_deadline(text: str, now: Optional[float] = None) -> Optional[float]:
    """The deadline a message states, as epoch seconds (local time), or None."""
    now = time.time() if now is None else now
    base = datetime.fromtimestamp(now)
    m = _IN.search(text or "")
    if m and re.search(r"\b(due|deadline|needs?|must|have to|by|within|done|ready|finish)",
                       text, re.I):
        n, unit = float(m.group(1)), m.group(2).lower()
        mult = 60.0 if unit.startswith("min") else 86400.0 if unit.startswith("d") else 3600.0
        return now + n * mult
    m = _ISO.search(text or "")
    if m:
        try:
            day = datetime.strptime(m.group(1), "%Y-%m-%d")
        except ValueError:
            return None
        hour, minute = (int(m.group(2)), int(m.group(3))) if m.group(2) else (23, 59)
        return day.replace(hour=min(hour, 23), minute=min(minute, 59)).timestamp()
    m = _BY_CLOCK.search(text or "")
    if m:
        hour, minute = int(m.group(1)), int(m.group(2) or 0)
        if m.group(3):
            hour = hour % 12 + (12 if m.group(3).lower() == "pm" else 0)
        if hour > 23 or minute > 59:
            return None
        when = base.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if when.timestamp() <= now:
            when += timedelta(days=1)
        return when.timestamp()
    if _TOMORROW.search(text or ""):
        return (base + timedelta(days=1)).replace(hour=23, minute=59, second=0).timestamp()
    if _EOD.search(text or ""):
        return base.replace(hour=23, minute=59, second=0).timestamp()
    return None


# ---------------------------------------------------------------------------------------------
# the projection as the roles read it
# ---------------------------------------------------------------------------------------------

PROJECTION_HEADER = ("What artoo knows from earlier sessions (world model: facts checked by code, "
                     "valid now):")


def split_projection(context: str) -> tuple[str, str]:
    """A subtask's context as (the rest, the world's projection block): the dispatcher appends
    the projection, bounded by the world process (`world_projection_chars`)."""
    if PROJECTION_HEADER not in (context or ""):
        return context or "", ""
    rest, block = context.split(PROJECTION_HEADER, 1)
    return rest.rstrip(), PROJECTION_HEADER + block


def context_text(context: str, budget: int, cut) -> str:
    """The context as a prompt shows it: the rest cut to `budget` by `cut` (head and tail), the
    projection whole — a head-and-tail cut of both together dropped its best-ranked facts, which
    sit in the middle."""
    rest, projection = split_projection(context)
    rest = cut(rest, budget) if rest.strip() else ""
    return "\n\n".join(p for p in (rest, projection) if p)


def projected_facts(context: str) -> list[str]:
    """The fact lines of the world's projection inside a subtask's context ("- [when] text"),
    as the world process wrote them (world_server/model.py)."""
    block = split_projection(context)[1].splitlines()[1:]
    facts = []
    for line in block:
        if not line.startswith("- ["):
            break
        facts.append(line[2:])
    return facts
