"""Measured beats predicted: what an advice rests on, and no predicted gain over a measured-best config
that the model's own error could explain.

A config file may come with a side file (`kernels.moe_configs.meta_path`, written by `advisor tune` and
for the shipped tuned files) recording, per token count, the config that was timed fastest on a GPU among
`compared` configs. When the launch's current config is that record's, on that GPU, a suggestion from the
model alone must beat it by more than the model's error: the suggested config's 90% quantile must lie
below the current config's 10% quantile (`Candidate.interval`). Otherwise the measured config stays the
suggestion and the reason says so.

`weigh` is called once per advice, by `advisor.advice.suggest.advise`, and sets `Advice.basis`:
"measured" when the verdict rests on timings (configs timed in this run with --measure, or a measured-best
record that the prediction does not beat), "predicted" when it rests on the model. Every report format
shows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from advisor.advice.search import Advice, Subject
from kernels.moe_configs import MeasuredEntry, device_file_name, meta_path, read_config_meta

MEASURED, PREDICTED = "measured", "predicted"
_KEY_LINE = re.compile(r'^\s*"(\d+)"\s*:')


@dataclass(frozen=True)
class MeasuredBest:
    """The record that the launch's current config was timed fastest for token count `tokens` on `gpu`."""

    entry: MeasuredEntry
    tokens: int
    gpu: str
    side_file: Path

    def describe(self) -> str:
        return (f"measured the fastest of {self.entry.compared} configs for M={self.tokens} on {self.gpu} "
                # The side file times the launch that was swept (GEMM1 of the layer), not the layer the
                # table predicts: say so, or the two times read as a contradiction.
                f"(the swept GEMM1 ran {self.entry.us:.1f} us; {self.side_file.name})")


def measured_best(subject: Subject) -> MeasuredBest | None:
    """The side-file record of the entry the subject's config is read from, when it holds the subject's current
    config and was measured on the subject's GPU; else None."""
    loc = subject.location
    if loc is None or not loc.path.endswith(".json"):
        return None
    path = Path(loc.path)
    if not meta_path(path).exists():
        return None
    meta = read_config_meta(path)
    if meta is None or device_file_name(meta.device_name) != device_file_name(subject.spec.name):
        return None
    try:
        line = path.read_text().splitlines()[loc.line - 1]
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    key = _KEY_LINE.match(line)
    entry = meta.measured.get(int(key.group(1))) if key else None
    if entry is None or entry.config != subject.current:
        return None  # another config now (edited, or written by apply): the measurement is not of it
    return MeasuredBest(entry, int(key.group(1)), meta.device_name, meta_path(path))


def beyond_error(advice: Advice) -> bool:
    """Whether the best config's predicted time is below the current one's by more than the model's error:
    the whole 10-90% interval of the best below the current config's."""
    return advice.best.interval[1] < advice.current.interval[0]


def weigh(advice: Advice) -> Advice:
    """Set `advice.basis`; keep a measured-best current config unless the prediction beats it beyond its error."""
    if advice.measured:
        advice.basis = MEASURED
        return advice
    record = measured_best(advice.subject)
    if record is None:
        advice.basis = PREDICTED
        return advice
    if advice.best.config == advice.current.config:
        advice.basis = MEASURED
        advice.why = f"{advice.why}; {record.describe()}"
        return advice
    if beyond_error(advice):
        advice.basis = PREDICTED
        lo, hi = advice.best.interval
        advice.why = (f"{advice.why}; the current config was {record.describe()}, and the prediction beats it "
                      f"beyond the model's error ({lo:.1f}-{hi:.1f} us vs {advice.current.interval[0]:.1f}-"
                      f"{advice.current.interval[1]:.1f} us, 10-90%)")
        return advice
    best, current = advice.best, advice.current
    gain = advice.speedup
    advice.ranked = [current] + [c for c in advice.ranked if c.config != current.config]
    advice.basis = MEASURED
    advice.why = (f"the current config was {record.describe()}; the model's best, {best.config.label()}, is "
                  f"predicted {gain:.2f}x faster, within the model's error ({best.interval[0]:.1f}-"
                  f"{best.interval[1]:.1f} us vs {current.interval[0]:.1f}-{current.interval[1]:.1f} us, 10-90%), "
                  "so the measured config stays")
    return advice
