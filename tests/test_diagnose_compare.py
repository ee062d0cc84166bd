"""`advisor diagnose --compare`: two diagnoses of one launch cause by cause, on a change whose effect is
known by construction (GROUP_M 1 -> 8 on a GEMM whose 132 N blocks fill one wave per M block: only
the L2 re-reads go, see tests/test_diagnose_l2.py), and on the command line."""

from __future__ import annotations

import json

import pytest

from advisor.advice.diagnose import diagnose
from advisor.advice.diagnose_compare import compare, render_compare
from advisor.cli import main
from tests.test_diagnose_l2 import LONG, gemm


def test_a_change_that_removes_one_cause_names_it():
    before_subject, after_subject = gemm("384,33792,4096", 1), gemm("384,33792,4096", 8)
    before = diagnose(before_subject, time_us=LONG)
    rereads = next(c.us for c in before.causes if c.name == "L2 re-reads")
    assert rereads > 100
    # The change saves exactly the re-reads: after it, every other cause and the unexplained rest stay.
    after = diagnose(before_subject, after_subject.current, time_us=LONG - rereads)
    cmp = compare(before, after)
    assert cmp.removed.name == "L2 re-reads"
    assert cmp.removed.removed_us == pytest.approx(rereads, rel=1e-9)
    assert cmp.time_saved_us == pytest.approx(rereads, rel=1e-9)
    assert cmp.causes[-1].name == "unexplained" and cmp.causes[-1].removed_us == pytest.approx(0.0, abs=1e-6)
    assert all(c.removed_us == pytest.approx(0.0, abs=1e-9) for c in cmp.causes if c.name != "L2 re-reads"
               and c.name != "unexplained")
    lines = render_compare(cmp)
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith("removed: L2 re-reads") for line in lines)


def test_a_change_no_cause_accounts_for_is_unexplained():
    subject = gemm("384,33792,4096", 8)
    cmp = compare(diagnose(subject, time_us=LONG), diagnose(subject, time_us=LONG - 50))
    assert cmp.removed is None and cmp.causes[-1].removed_us == pytest.approx(50.0)
    assert any("no named cause shrank" in line for line in render_compare(cmp))


ARGS = ["diagnose", "kernels/fused_moe.py", "--preset", "mixtral-8x7b", "--tp", "2", "--tokens", "1024",
        "--config", "M128 N256 K64 G1 w8 s3", "--measured", "605.8"]


def test_group_size_on_the_command_line(capsys):
    # RESULTS 16's H100 sweep: G1 605.8 us, G32 538.9 us on the same tile.
    assert main([*ARGS, "--compare", "M128 N256 K64 G32 w8 s3", "--compare-measured", "538.9",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["removed"] == "L2 re-reads" and doc["time_saved_us"] == pytest.approx(66.9)
    assert doc["before"]["config"] == "M128 N256 K64 G1 w8 s3" and doc["after"]["time_us"] == 538.9
    causes = {c["name"]: c for c in doc["causes"]}
    assert causes["L2 re-reads"]["removed_us"] > 0 and causes["padding"]["removed_us"] == 0
    assert sum(c["before_us"] for c in doc["causes"]) == pytest.approx(doc["before"]["gap_us"], abs=0.01)
    assert sum(c["after_us"] for c in doc["causes"]) == pytest.approx(doc["after"]["gap_us"], abs=0.01)
    assert main([*ARGS, "--compare", "M128 N256 K64 G32 w8 s3", "--compare-measured", "538.9"]) == 0
    text = capsys.readouterr().out
    assert "removed: L2 re-reads" in text and all(len(line) <= 80 for line in text.splitlines())


@pytest.mark.parametrize(("extra", "message"), [
    (["--compare-measured", "500"], "give the config too"),
    (["--compare", "M128 N256 K64 G32 w8 s3", "--compare-measured", "-1"], "--compare-measured -1.0"),
    (["--compare", "M128 N999 K64 G32 w8 s3"], "N999"),
])
def test_bad_compare_arguments_are_one_line_errors(capsys, extra, message):
    assert main([*ARGS, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
