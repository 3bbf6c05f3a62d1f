"""Unit tests of the pure MKCT math (memory_server/mkct.py) and the calibration mapping
(services/calibration.build_constraints). No I/O: these are the formulas of seeds/000 §4.3–§4.5."""
from __future__ import annotations

import math

import numpy as np
import pytest

from memory_server import mkct
from services.runtime import mkct as tags
from protocol.messages import Megram, MemoryResult, SopRecord
from services.roles.calibration import build_constraints

NOW = 1_800_000_000.0
DAY = mkct.SECONDS_PER_DAY


def entries(*rows):
    """rows: (f, sigma, k, age_days[, recalled_days_ago[, level]])"""
    arr = np.zeros(len(rows), dtype=mkct.ENTRY_DTYPE)
    for i, row in enumerate(rows):
        f, sigma, k, age = row[:4]
        arr[i]["f"], arr[i]["sigma"], arr[i]["k"] = f, sigma, k
        arr[i]["created"] = NOW - age * DAY
        if len(row) > 4 and row[4] is not None:
            arr[i]["recalled"] = NOW - row[4] * DAY
        arr[i]["level"] = mkct.LEVEL_CODE[row[5] if len(row) > 5 else "M"]
    return arr


def test_dual_channel_positive_and_negative_do_not_cancel_attention():
    pot = mkct.potentials(entries((0.6, +1, 0, 0), (0.4, -1, 0, 0)), NOW)
    assert pot.attention == pytest.approx(1.0)
    assert pot.decision == pytest.approx(0.2)
    assert pot.action == "Caution"


def test_empty_tag_is_ignore():
    assert mkct.potentials(entries(), NOW) == mkct.Potentials(0.0, 0.0, "Ignore")


def test_timeless_single_success_is_exploit():
    pot = mkct.potentials(entries((0.9, +1, 0, 365)), NOW)
    assert (pot.attention, pot.decision, pot.action) == (pytest.approx(0.9), pytest.approx(0.9),
                                                         "Exploit")


def test_strong_failure_is_avoid():
    assert mkct.potentials(entries((0.95, -1, 0.05, 0)), NOW).action == "Avoid"


def test_decay_uses_days_since_creation():
    pot = mkct.potentials(entries((0.9, +1, 0.2, 10)), NOW)
    assert pot.attention == pytest.approx(0.9 * math.exp(-0.2 * 10))
    assert pot.decision == pytest.approx(0.9 * math.exp(-2.0))


def test_half_lives_of_the_quantization_matrix():
    for k, half_life in ((0.05, 13.86), (0.2, 3.47), (0.5, 1.39)):
        assert mkct.decay(k, NOW - half_life * DAY, NOW) == pytest.approx(0.5, abs=1e-3)


def test_recall_resets_the_decay_origin():
    stale = mkct.potentials(entries((0.9, +1, 0.2, 7)), NOW)
    assert stale.attention == pytest.approx(0.9 * math.exp(-1.4))      # ≈ 0.22
    recalled = mkct.potentials(entries((0.9, +1, 0.2, 7, 0)), NOW)
    assert recalled.attention == pytest.approx(0.9)
    half = mkct.potentials(entries((0.9, +1, 0.2, 7, 3)), NOW)
    assert half.attention == pytest.approx(0.9 * math.exp(-0.6))
    # a recall older than the creation changes nothing (origin = max(created, recalled))
    older = mkct.potentials(entries((0.9, +1, 0.2, 7, 30)), NOW)
    assert older.attention == pytest.approx(stale.attention)


def test_future_timestamps_count_as_fresh_not_amplified():
    assert mkct.potentials(entries((0.5, +1, 0.5, -2)), NOW).attention == pytest.approx(0.5)


@pytest.mark.parametrize("att, dec, action", [
    (0.49, 0.49, "Ignore"), (0.4999999, -0.4, "Ignore"), (0.5, 0.5, "Exploit"),
    (0.5, 0.2, "Caution"), (0.5, -0.2, "Caution"), (1.0, 0.2000001, "Exploit"),
    (1.0, -0.2000001, "Avoid"), (1.0, 0.0, "Caution"), (0.6 + 0.4, 0.6 - 0.4, "Caution"),
    (3 * 0.1 + 0.2, 0.1 + 0.1, "Caution"),   # float noise must not cross the boundary
])
def test_action_thresholds_at_their_boundaries(att, dec, action):
    assert mkct.classify(att, dec) == action


def test_quantization_matrix_is_the_paper_table():
    assert tags.QUANTIZATION["abandon"] == (0.95, -1.0, 0.05)
    assert tags.QUANTIZATION["accept"] == (0.90, 1.0, 0.05)
    assert tags.QUANTIZATION["change_path"] == (0.30, 0.0, 0.2)
    assert tags.QUANTIZATION["refine"] == (0.10, 0.5, 0.5)
    assert len(tags.QUANTIZATION) == 7


def test_gc_mask_spares_rules_and_fresh_entries():
    arr = entries((0.1, 0.5, 0.5, 0.01), (0.9, 1, 0.05, 1), (0.01, 1, 0, 365, None, "C"),
                  (0.01, 1, 0, 365, None, "T"), (0.3, 0, 0.2, 30, None, "K"))
    att, _ = mkct.contributions(arr, NOW)
    assert mkct.gc_mask(arr, att, 0.1).tolist() == [True, False, False, False, True]


def test_strongest_orders_by_attention():
    att = np.array([0.1, 0.9, 0.5, 0.7])
    assert mkct.strongest(att, 2).tolist() == [1, 3]
    assert mkct.strongest(att, 10).tolist() == [1, 3, 2, 0]
    assert mkct.strongest(att, 0).tolist() == []


def test_consolidation_signal_thresholds():
    assert mkct.consolidation_signal(5.4, 5.4, 5.0, 3.0) == "best_practice"
    assert mkct.consolidation_signal(4.5, 4.5, 5.0, 3.0) is None
    assert mkct.consolidation_signal(5.7, -5.7, 5.0, 3.0) == "constraint"
    assert mkct.consolidation_signal(9.0, 2.9, 5.0, 3.0) is None


def test_a_rule_never_counts_against_itself():
    # a Constraint distilled from three older failures: its own σ = −1 and theirs are not "newer"
    arr = entries((0.95, -1, 0.05, 2), (0.95, -1, 0.05, 2), (0.95, -1, 0.05, 2),
                  (1.0, -1, 0.0, 0, None, "C"))
    _, dec = mkct.contributions(arr, NOW)
    newer = mkct.newer_evidence_decision(arr, dec, 3)
    assert newer == 0.0
    assert not mkct.contradicts(-1.0, newer)


def test_newer_evidence_contradicts_in_the_opposite_direction_only():
    arr = entries((1.0, +1, 0.0, 5, None, "C"), (0.95, -1, 0.05, 1), (0.9, +1, 0.05, 10))
    _, dec = mkct.contributions(arr, NOW)
    newer = mkct.newer_evidence_decision(arr, dec, 0)
    assert newer < 0                                  # only the 1-day-old failure is newer
    assert mkct.contradicts(+1.0, newer)              # Best Practice contradicted
    assert not mkct.contradicts(-1.0, newer)          # a Constraint would be confirmed
    assert mkct.contradicts(-1.0, 0.5) and not mkct.contradicts(-1.0, 0.0)


def test_tag_conventions():
    assert tags.intent_space("count-files") == "intent:count-files"
    assert tags.intent_space("intent:count-files") == "intent:count-files"
    assert tags.tool_space("shell") == "tool:shell"
    assert tags.target_entity("/etc") == "target:/etc"


# ---------------------------------------------------------------------------------------------
# calibration mapping (seeds/000 §4.5)
# ---------------------------------------------------------------------------------------------

def _m(content, sigma, f=0.9, state="accept"):
    return Megram(space="intent:x", entity="env:local", content=content, sigma=sigma, f=f, k=0.05,
                  state=state)


def test_exploit_carries_the_concrete_successful_content():
    res = MemoryResult(op="calibrate", attention=0.9, decision=0.9, action="Exploit",
                       megrams=[_m("Succeeded. Tools: shell:ls -la /data. Result: 42", +1)])
    lines, must_not, rules, megrams = build_constraints(res)
    assert lines == ["SHOULD PREFER (worked before): Succeeded. Tools: shell:ls -la /data. "
                     "Result: 42"]
    assert must_not == [] and (rules, megrams) == (0, 1)


def test_avoid_and_caution_lines():
    res = MemoryResult(op="calibrate", attention=2.0, decision=-1.0, action="Avoid",
                       megrams=[_m("Failed. Gap: no such file /nope", -1, 0.95, "abandon"),
                                _m("Succeeded once", +1)])
    lines, must_not, _, _ = build_constraints(res)
    assert lines == ["MUST NOT (failed before): Failed. Gap: no such file /nope"]
    assert must_not == []                 # the merged set holds Avoid *rules*, not episodes
    res.action = "Caution"
    lines, _, _, _ = build_constraints(res)
    assert [line.split(":")[0] for line in lines] == ["CAUTION (mixed results before — confirm "
                                                      "each step)"] * 2


def test_ignore_injects_nothing_but_ggs_blocks_still_apply():
    res = MemoryResult(op="calibrate", attention=0.3, decision=0.3, action="Ignore",
                       megrams=[_m("faint", +1, 0.3)])
    lines, must_not, _, _ = build_constraints(res, ["search"], ["/root/secret", "/root/secret"])
    assert lines == ["MUST NOT use tool: search (blocked by GGS)",
                     "MUST NOT use again: /root/secret (failed before, blocked by GGS)"]
    assert must_not == ["tool:search", "target:/root/secret"]
    # a program that failed stands as its first line and its length, never shell-quoted whole
    # (the 1.5B copied its '"'"' quoting into its next program)
    program = "python3 -c 'import csv\nrows = [r['\"'\"'status'\"'\"'] for r in x]'"
    lines, _, _, _ = build_constraints(None, [], [program])
    assert lines == ["MUST NOT use again: python3 -c 'import csv … (2 lines) (failed before, "
                     "blocked by GGS)"]


def test_rules_route_by_sigma_and_merge_into_must_not():
    res = MemoryResult(op="calibrate", action="Ignore", sops=[
        SopRecord(id="a", space="intent:x", entity="env:local", content="Use find -name.",
                  sigma=1.0),
        SopRecord(id="b", space="global:user", entity="env:local",
                  content="Never touch /etc.", sigma=-1.0)])
    lines, must_not, rules, _ = build_constraints(res, ["shell"])
    assert lines[0] == "MUST NOT (proven rule): Never touch /etc."
    assert lines[1] == "MUST NOT use tool: shell (blocked by GGS)"
    assert lines[2] == "SHOULD PREFER (proven rule): Use find -name."
    assert must_not == ["Never touch /etc.", "tool:shell"] and rules == 2


def test_memory_entries_are_capped_and_deduplicated():
    res = MemoryResult(op="calibrate", attention=20, decision=15, action="Exploit",
                       sops=[SopRecord(id=str(i), space="s", entity="e", content=f"rule {i}",
                                       sigma=1.0) for i in range(4)],
                       megrams=[_m(f"success {i % 8}", +1) for i in range(20)])
    lines, _, rules, megrams = build_constraints(res, max_entries=10)
    assert (rules, megrams) == (4, 6) and len(lines) == 10
    assert len(set(lines)) == 10


def test_unavailable_memory_keeps_the_ggs_constraints():
    lines, must_not, rules, megrams = build_constraints(None, ["shell"], [])
    assert lines == ["MUST NOT use tool: shell (blocked by GGS)"]
    assert must_not == ["tool:shell"] and (rules, megrams) == (0, 0)
