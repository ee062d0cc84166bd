"""What `suggest` names without timings on a launch the transfer model predicts (search.keep_current), and which
configs `suggest --measure K` times (advisor/advice/timed_pick.py): scripted subjects, no GPU."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

from advisor.advice.search import KEEP_Z, Candidate, Subject, close_call, search
from advisor.measure.timing import MeasurementError
from ceilings.hardware import resolve_gpu
from ceilings.launch import Config, ValueSample
from ceilings.roofline import Ceiling

GENERIC = "generic (SASS x evaluated control flow)"
SD = 0.25  # the transfer model's spread between configs of one launch, in the scripted meta
MODEL = SimpleNamespace(meta={"intervals": {"ranking_sd": 0.1, "ranking_sd_outside": 0.3, "ranking_sd_generic": SD}})
KEEP_MARGIN = math.exp(KEEP_Z * math.sqrt(2.0) * SD)


def cfg(block: int, warps: int = 4) -> Config:
    return Config({"BLOCK": block}, warps, 3)


A, B, C, D, E = cfg(64), cfg(128), cfg(256), cfg(512), cfg(1024)


class Scripted(Subject):
    """A launch whose predicted times are given per config (a dict the test may change between timings, as the
    kernel's calibration would), with a scripted GPU: `measured` per config, or a MeasurementError."""

    def __init__(self, predicted: dict[Config, float], current: Config, source: str = GENERIC,
                 measured: dict[Config, float | list[float]] | None = None,
                 ceilings: dict[Config, float] | None = None):
        self.predicted, self.current, self.source = predicted, current, source
        self.measured = dict(measured or {})
        self.ceiling_us = ceilings or {}
        self.gpu = resolve_gpu("h100")
        self.kernel, self.label, self.location = "scripted_kernel", "scripted launch", None
        self.runs: list[Config] = []
        self.after_run = None

    def space(self):
        return list(self.predicted)

    def ceilings(self, configs):
        return [Ceiling(self.spec.name, self.kernel, c.to_dict(), self.ceiling_us.get(c, 10.0), "dram",
                        {"dram": 10.0}, 264, 264, 1.0, 2, {}, self.source) for c in configs]

    def predict(self, configs, model=None):
        return [Candidate(c, ceiling, self.predicted[c], (0.8 * self.predicted[c], 1.3 * self.predicted[c]), [])
                for c, ceiling in zip(configs, self.ceilings(configs), strict=True)]

    def measurer(self):
        def run(config):
            self.runs.append(config)
            us = self.measured.get(config)
            if us is None:
                raise MeasurementError(f"scripted {config.label()}: out differs from the reference")
            if isinstance(us, list):
                us = us.pop(0) if len(us) > 1 else us[0]
            if self.after_run:
                self.after_run(config)
            return us
        return run


# ------------------------------------------------------------------------------------ without timings

def test_a_gain_below_the_keep_margin_keeps_the_current_config_on_a_generic_launch():
    gain = (1.0 + KEEP_MARGIN) / 2  # between no gain and the margin
    advice = search(Scripted({A: 10.0, B: 10.0 / gain, C: 12.0}, A), confirm=False, model=MODEL)
    assert advice.best.config == A and advice.speedup == 1.0 and not advice.gains(1.0)
    assert [c.config for c in advice.ranked][:2] == [A, B]  # the model's best listed second
    assert f"{B.label()} is predicted {gain:.2f}x faster" in advice.why and "--measure" in advice.why
    assert any("the current config stays" in n for n in advice.notes)


def test_a_gain_just_under_the_margin_is_shown_under_it():
    """Set 12's tiny resize read "predicted 1.16x faster, less than the 1.16x": the two are shown with as many
    decimals as tell them apart."""
    gain = KEEP_MARGIN - 0.002
    assert f"{gain:.2f}" == f"{KEEP_MARGIN:.2f}"  # the case: equal at two decimals
    advice = search(Scripted({A: 10.0, B: 10.0 / gain}, A), confirm=False, model=MODEL)
    assert advice.best.config == A
    assert f"is predicted {gain:.3f}x faster, less than the {KEEP_MARGIN:.3f}x" in advice.why


def test_a_config_only_the_climb_reached_must_clear_the_80_percent_margin():
    """The same gain names a config of the first neighbourhood but not one the climb reached (several steps
    from the current config: search.CLIMBED_Z); past that margin the climbed config is named."""
    from advisor.advice.search import CLIMBED_Z

    climbed_margin = math.exp(CLIMBED_Z * math.sqrt(2.0) * SD)
    gain = (KEEP_MARGIN + climbed_margin) / 2  # past the first margin, short of the second
    near = search(Scripted({A: 10.0, B: 10.0 / gain}, A), confirm=False, model=MODEL)
    assert near.best.config == B
    far = Scripted({A: 10.0, B: 10.0 / gain}, A)
    far.climbed = {B}
    kept = search(far, confirm=False, model=MODEL)
    assert kept.best.config == A and "several steps from the current one" in kept.why
    far_ahead = Scripted({A: 10.0, B: 10.0 / (climbed_margin * 1.05)}, A)
    far_ahead.climbed = {B}
    assert search(far_ahead, confirm=False, model=MODEL).best.config == B


def test_a_gain_beyond_the_keep_margin_names_the_models_best_with_the_close_call_note_below_80_percent():
    gain = KEEP_MARGIN * 1.05
    assert gain < math.exp(0.8416 * math.sqrt(2.0) * SD)  # still within the 80% margin: said to be a close call
    advice = search(Scripted({A: 10.0, B: 10.0 / gain}, A), confirm=False, model=MODEL)
    assert advice.best.config == B and advice.gains(1.0)
    assert "confirm it with --measure" in advice.why
    assert not any("the current config stays" in n for n in advice.notes)


def test_an_exact_demand_launch_keeps_the_models_best_however_small_the_gain():
    """The shipped families' launches: the in-family model's best is named (RESULTS 8), the close call said."""
    advice = search(Scripted({A: 10.0, B: 9.8}, A, source="exact (fused MoE)"), confirm=False, model=MODEL)
    assert advice.best.config == B and advice.gains(1.0)
    assert close_call(advice, MODEL) and any("within the model's error" in n for n in advice.notes)


# ------------------------------------------------------------------------------------------ --measure K

def test_measure_k_times_the_current_config_first_then_exactly_k_others_by_prediction():
    subject = Scripted({A: 10.0, B: 8.0, C: 9.0, D: 9.5, E: 11.0}, A,
                       measured={A: 10.0, B: 9.0, C: 7.0, D: 9.6, E: 5.0})
    advice = search(subject, top_k=5, confirm=False, model=MODEL, measure=2)
    assert subject.runs == [A, B, C, A]  # not max(top_k, K): K others, the predicted fastest first; A again last
    assert advice.measured == 3 and advice.basis == "predicted"  # basis is set by measured.weigh (suggest.advise)
    assert [c.config for c in advice.ranked] == [C, B, A] and advice.best.measured_us == 7.0


def test_each_config_to_time_is_chosen_after_the_timings_before_it_re_rank_the_rest():
    """The kernel's calibration changes the predictions after a timing: the next pick follows the new ranking."""
    predicted = {A: 10.0, B: 8.0, C: 9.0, D: 9.5}
    subject = Scripted(predicted, A, measured={A: 10.0, B: 12.0, C: 9.0, D: 6.0})

    def calibrate(config):
        if config == B:  # B ran slow: configs like it (C) are now predicted slower, D faster
            predicted.update({C: 14.0, D: 7.0})
    subject.after_run = calibrate
    advice = search(subject, confirm=False, model=MODEL, measure=2)
    assert subject.runs == [A, B, D, A]
    assert advice.best.config == D


def test_a_config_that_fails_does_not_count_and_the_next_is_timed():
    subject = Scripted({A: 10.0, B: 8.0, C: 9.0, D: 9.5}, A, measured={A: 10.0, C: 9.5, D: 8.0})
    advice = search(subject, confirm=False, model=MODEL, measure=2)
    assert subject.runs == [A, B, C, D, A]
    assert advice.measured == 3 and advice.best.config == D
    assert any("out differs" in n and "left out" in n for n in advice.notes)


def test_the_two_fastest_within_the_noise_are_timed_again_and_keep_their_faster_time():
    subject = Scripted({A: 10.0, B: 8.0, C: 9.0}, A, measured={A: 10.0, B: [7.3, 7.2], C: [7.2, 7.5]})
    advice = search(subject, confirm=False, model=MODEL, measure=2)
    assert subject.runs == [A, B, C, C, B, A]  # the two fastest, fastest first, once more each; A last
    assert {c.config: c.measured_us for c in advice.ranked} == {A: 10.0, B: 7.2, C: 7.2}
    assert any("timed twice each" in n for n in advice.notes)
    far = Scripted({A: 10.0, B: 8.0, C: 9.0}, A, measured={A: 10.0, B: 5.0, C: 8.0})
    search(far, confirm=False, model=MODEL, measure=2)
    assert far.runs == [A, B, C, A]  # clearly apart: no second timing (but the current's steadiness check)


def test_the_current_config_is_timed_again_last_and_an_unsteady_gpu_is_said():
    steady = Scripted({A: 10.0, B: 8.0, C: 9.0}, A, measured={A: [10.0, 10.3], B: 8.0, C: 7.0})
    advice = search(steady, confirm=False, model=MODEL, measure=2)
    assert steady.runs == [A, B, C, A] and not any("not steady" in n for n in advice.notes)
    assert {c.config: c.measured_us for c in advice.ranked}[A] == 10.0  # the faster of its two times
    # another process took the GPU during the timings: C (really the fastest) and the current config's last
    # timing ran slow; each config is timed once more and keeps its faster time, which puts C first again
    shared = Scripted({A: 10.0, B: 8.0, C: 9.0}, A, measured={A: [10.0, 16.0], B: [8.0, 8.1], C: [11.0, 7.0]})
    advice = search(shared, confirm=False, model=MODEL, measure=2)
    assert shared.runs == [A, B, C, A, B, C]  # the others again, in the order of their first times
    assert any("10.0 us first and 16.0 us last (60% apart)" in n and "not steady" in n for n in advice.notes)
    assert [(c.config, c.measured_us) for c in advice.ranked[:3]] == [(C, 7.0), (B, 8.0), (A, 10.0)]
    # the current among the two fastest: its near-tie second timing is the last one, not a third
    tied = Scripted({A: 10.0, B: 8.0}, A, measured={A: [7.0, 7.1], B: [7.1, 7.2]})
    advice = search(tied, confirm=False, model=MODEL, measure=1)
    assert tied.runs == [A, B, A, B] and not any("not steady" in n for n in advice.notes)


def test_a_config_that_does_not_compile_is_pruned_with_why_and_a_current_one_cannot_run():
    class Failing(Scripted):
        def compile_problems(self, configs):  # as LaunchSubject words a compile stopped past the limit
            why = "its compile ran past the 120 s limit (TRITON_ADVISOR_COMPILE_LIMIT)"
            return {c: why for c in configs if c in (B, self.failing_current)}

        def predict(self, configs, model=None):
            assert B not in configs and self.failing_current not in configs  # never asked of the model
            return super().predict(configs, model)

    subject = Failing({A: 10.0, B: 2.0, C: 8.0}, A)  # the best prediction would have been the stalled one
    subject.failing_current = None
    advice = search(subject, confirm=False, model=MODEL)
    assert advice.best.config == C and B not in [c.config for c in advice.ranked]
    assert advice.pruned == {"its compile ran past the # s limit (TRITON_ADVISOR_COMPILE_LIMIT)": 1}
    subject = Failing({A: 10.0, B: 2.0, C: 8.0}, A)
    subject.failing_current = A
    advice = search(subject, confirm=False, model=MODEL)
    assert advice.cannot_run.startswith("its compile ran past the 120 s limit") and advice.best.config == C


def test_timings_on_made_up_control_data_are_flagged():
    """DeepSpeed's grouped GEMM (RESULTS 39): its group sizes come from an earlier kernel, the trace has no
    contents for them, the measurer fills them with zeros and every CTA exits: 2.4 us timed for a 120-GFLOP
    launch. Where the ceiling says the kernel's exits depend on memory, the measured advice says so."""
    import dataclasses
    from types import SimpleNamespace

    from advisor.advice.timed_pick import made_up_control_data
    from ceilings.launch import TensorArg

    exits = SimpleNamespace(notes=["early exit before line 121: condition not determined by the launch: the floor "
                                   "counts what follows 0 times, the expected work once"])
    sizes = TensorArg.contiguous("m_size", (8,), "int32")
    launch = SimpleNamespace(tensors=(TensorArg.contiguous("a", (64, 64), "bfloat16"), sizes))
    (note,) = made_up_control_data(SimpleNamespace(launch=launch), SimpleNamespace(ceiling=exits))
    assert "timed with zeros in m_size" in note and "`advisor record`" in note
    # with the sizes' contents in the trace, or a kernel whose work no memory decides: nothing to say
    known = SimpleNamespace(tensors=(launch.tensors[0], dataclasses.replace(sizes, values=(1,) * 8)))
    assert made_up_control_data(SimpleNamespace(launch=known), SimpleNamespace(ceiling=exits)) == []
    plain = SimpleNamespace(notes=["warm L2: ..."])
    assert made_up_control_data(SimpleNamespace(launch=launch), SimpleNamespace(ceiling=plain)) == []


def test_a_config_that_computes_another_result_takes_its_warps_and_stages_twins_out_of_the_timing():
    """An int4 GEMV's K tile past its quantisation group computes another result under every num_warps and
    num_stages; the fresh set of RESULTS 52 spent `--measure 4`'s attempts on such twins. Once one is found
    wrong, its twins are not timed and do not use up the attempts."""
    from advisor.measure.timing import WrongResult

    twin = B.replace(num_warps=8)
    subject = Scripted({A: 10.0, B: 5.0, twin: 5.1, C: 9.0, D: 9.5}, A, measured={A: 10.0, C: 9.5, D: 8.0})

    def run(config):
        subject.runs.append(config)
        if config.params == B.params:
            raise WrongResult(f"scripted {config.label()}: out differs from the reference")
        return subject.measured[config]

    subject.measurer = lambda: run
    advice = search(subject, confirm=False, model=MODEL, measure=2)
    assert subject.runs == [A, B, C, D, A]  # the twin was never run
    assert advice.best.config == D


def test_a_config_differing_only_in_num_stages_from_one_tried_waits_until_every_other_is_tried():
    """A sliding-window decode (RESULTS 54): the model ranked three num_stages twins first, the loop timed all
    three, and the 1.4x faster config of another warp count was never reached. A twin waits its turn."""
    b3, b4, b2 = B, B.replace(num_stages=4), B.replace(num_stages=2)
    warps2 = B.replace(num_warps=2)
    subject = Scripted({A: 10.0, b3: 6.0, b4: 6.1, b2: 6.2, warps2: 7.0, C: 9.0}, A,
                       measured={A: 10.0, b3: 8.0, b4: 7.9, b2: 8.1, warps2: 5.5, C: 9.5})
    advice = search(subject, confirm=False, model=MODEL, measure=3)
    assert subject.runs[:4] == [A, b3, warps2, C]  # another warp count is another config; b4, b2 not yet
    assert advice.best.config == warps2
    subject = Scripted({A: 10.0, b3: 6.0, b4: 6.1, C: 9.0}, A, measured={A: 10.0, b3: 8.0, b4: 7.9, C: 9.5})
    search(subject, confirm=False, model=MODEL, measure=3)
    assert subject.runs[:4] == [A, b3, C, b4]  # once no other is left, the twins are timed


def test_a_config_that_makes_the_gpu_fault_ends_the_timing_and_the_configs_timed_before_it_are_compared():
    """RESULTS 54: a grid guessed wrong ran past a tensor (illegal memory access); the CUDA context is then lost,
    so `suggest --measure` crashed with an internal error. Now it stops there and compares what it timed."""
    from advisor.measure.timing import GPUFault

    subject = Scripted({A: 10.0, B: 8.0, C: 9.0, D: 9.5}, A, measured={A: 10.0, B: 9.0, D: 8.0})
    base = subject.measurer()

    def run(config):
        if config == C:
            subject.runs.append(config)
            raise GPUFault("scripted C: the launch made the GPU fault (CUDA error: an illegal memory access)")
        return base(config)

    subject.measurer = lambda: run
    advice = search(subject, confirm=False, model=MODEL, measure=3)
    assert subject.runs == [A, B, C]  # nothing runs after the fault, not even the re-timing of the current
    assert advice.best.config == B and advice.best.measured_us == 9.0
    assert any("GPU fault" in n and "timing stopped there" in n for n in advice.notes)


def test_a_cuda_fault_is_told_from_a_python_error():
    from advisor.measure.timing import is_gpu_fault

    class AcceleratorError(RuntimeError):  # torch 2.11's name for it
        pass

    assert is_gpu_fault(AcceleratorError("CUDA error: an illegal memory access was encountered\nSearch for ..."))
    assert is_gpu_fault(RuntimeError("CUDA error: device-side assert triggered"))
    assert not is_gpu_fault(RuntimeError("The size of tensor a (4) must match the size of tensor b (8)"))
    assert not is_gpu_fault(ValueError("CUDA error: not a runtime error"))


GATHER = '''
import triton
import triton.language as tl


@triton.jit
def gather_rows(x_ptr, idx_ptr, scale_ptr, w_ptr, out_ptr, hidden, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    row_idx = idx_ptr + t
    cols = tl.arange(0, BLOCK)
    src = tl.load(row_idx).to(tl.int64)
    w = tl.load(w_ptr + cols)  # int8 payload: zeros time alike
    x = tl.load(x_ptr + src * hidden + cols, mask=cols < hidden)
    tl.store(out_ptr + t * hidden + cols, x * w * tl.load(scale_ptr), mask=cols < hidden)
'''


def test_timings_on_zeros_in_an_index_tensor_the_kernel_loads_say_so(tmp_path):
    """RESULTS 55: a MoE combine's 65,536 source rows (256 KiB) had no contents in the trace, so the GPU timed a
    gather of row 0 (4-5x faster than its bytes allow) and said nothing; an expert histogram's atomics all hit
    counter 0."""
    from advisor.advice.timed_pick import made_up_indices
    from ceilings.launch import Launch, TensorArg

    path = tmp_path / "gather.py"
    path.write_text(GATHER)

    def launch(values):
        tensors = (TensorArg.contiguous("x_ptr", (65536, 4096), "bfloat16"),
                   TensorArg("idx_ptr", (65536,), "int32", (1,), values=values),
                   TensorArg.contiguous("scale_ptr", (1,), "float32"), TensorArg.contiguous("w_ptr", (4096,), "int8"),
                   TensorArg.contiguous("out_ptr", (65536, 4096), "bfloat16"))
        return Launch(str(path), "gather_rows", (65536,), tensors, (("hidden", 4096),), (),
                      Config({"BLOCK": 4096}, 8, 2))

    (note,) = made_up_indices(SimpleNamespace(launch=launch(None)))
    assert note.startswith("timed with zeros in idx_ptr (int32, 65536)") and "w_ptr" not in note
    assert made_up_indices(SimpleNamespace(launch=launch(tuple(range(65536))))) == []
    sampled = launch(None)
    drawn = ValueSample((3, 70, 9), 3, 70)
    sampled = dataclasses.replace(sampled, tensors=tuple(
        dataclasses.replace(t, sample=drawn) if t.name == "idx_ptr" else t for t in sampled.tensors))
    assert made_up_indices(SimpleNamespace(launch=sampled)) == []  # drawn from the program's ids, not zeros


def test_index_tensors_with_a_sample_are_drawn_from_it():
    """A timing fills a large integer tensor with values like the program's (ValueSample): drawn from its sample,
    sorted if the program's were, rows without a repeated value if the program's had none (a scatter through a
    sort's indices then writes each element once); the same for the same seed; without a sample, zeros."""
    from advisor.measure.launch_run import make_tensors
    from ceilings.launch import Launch, TensorArg

    tensors = (TensorArg("ids", (50, 2), "int32", (2, 1), sample=ValueSample((7, 3, 250, 3), 3, 250)),
               TensorArg("offsets", (100,), "int64", (1,), sample=ValueSample((0, 40, 90), 0, 90, sorted=True)),
               TensorArg("keep", (64,), "bool", (1,), sample=ValueSample((1, 0), 0, 1, sorted=True)),
               TensorArg("order", (30, 40), "int64", (40, 1), sample=ValueSample((0, 39), 0, 39, distinct_rows=40)),
               TensorArg("picked", (30, 8), "int32", (8, 1), sample=ValueSample((2, 9), 2, 11, distinct_rows=8)),
               TensorArg.contiguous("other", (10,), "int32"))
    one = Launch("k.py", "k", (1,), tensors, (), (), Config({}, 4, 3))
    made, again = make_tensors(one, device="cpu"), make_tensors(one, device="cpu")
    ids = made["ids"].flatten().tolist()
    assert set(ids) <= {7, 3, 250} and len(set(ids)) == 3 and ids == again["ids"].flatten().tolist()
    offsets = made["offsets"].tolist()
    assert offsets == sorted(offsets) and set(offsets) == {0, 40, 90}
    keep = made["keep"].tolist()
    assert keep == sorted(keep) and set(keep) == {False, True}
    order = made["order"].tolist()
    assert all(sorted(row) == list(range(40)) for row in order) and order[0] != order[1]  # a permutation per row
    picked = made["picked"].tolist()
    assert all(len(set(row)) == 8 and set(row) <= set(range(2, 12)) for row in picked)
    assert made["other"].tolist() == [0] * 10
