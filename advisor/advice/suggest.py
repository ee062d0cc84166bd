"""`advisor suggest`: for each launch of a target, the current config, the best found, and why.

Targets:
- the kernel file of a registered kernel family (kernels.family) with --shape values, read by the
  family; the fused-MoE kernel with --preset (and --tp, --tokens) instead: one layer per token count
  (advisor.advice.moe);
- a launch trace (`advisor record`) or launch JSON, or any kernel file with --trace/--launch: a launch
  of a family's kernel is that family's subject, any other launch a generic one;
- a serving-engine fused-MoE config file (E=..,N=..,device_name=...json): every M entry is checked
  against the best predicted for that M on the GPU the file names (the model preset is inferred from
  E and N, or given with --preset).

The GPU arrives resolved (`ceilings.hardware.GPU`); without one, the GPU a trace or an engine file
names is resolved here, else the H100.

Output formats: text (a rich table), json, github (workflow annotations at the config's line) and
sarif (SARIF 2.1.0). Exit codes: 0 when no launch gains more than --min-speedup, 1 when some do, 2 on a
user error. Nothing here imports textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from advisor.advice import moe
from advisor.advice.search import Advice, Subject, search
from advisor.advice.subjects import FamilySubject, LaunchSubject, declared_space, tuned_config
from ceilings.errors import AdvisorError
from ceilings.hardware import GPU, resolve_gpu
from kernels.family import family_of_file, family_of_launch

DEFAULT_TOKENS = (1, 16, 64, 256, 1024, 4096)
DEFAULT_GPU = "h100"


def default_gpu_name() -> str:
    """The GPU advice is for without --gpu: this machine's (torch's name for device 0) where torch sees one,
    else DEFAULT_GPU. The GPU a `--measure` or `calibrate --kernel` times on is this machine's, so advice for
    another would key its timings and rates to the wrong card (an H200 advised as an H100 before)."""
    try:
        import torch
    except ImportError:
        return DEFAULT_GPU
    if not torch.cuda.is_available():
        return DEFAULT_GPU
    name = torch.cuda.get_device_name()
    from ceilings.hardware import get_spec

    try:
        get_spec(name)
    except AdvisorError as exc:
        raise AdvisorError(f"this machine's GPU is {name!r}, which the advisor has no spec for: give --gpu for the "
                           f"GPU to advise for ({str(exc).split('; ', 1)[-1]})") from None
    return name


# ------------------------------------------------------------------------------------------ targets

def trace_subjects(path: str | Path, gpu: GPU | None = None, kernel_file: str | None = None,
                   kernel: str | None = None, calibrated: bool = True, trace=None,
                   relaunch=None, contents=None) -> list[Subject]:
    """One subject per distinct launch of a trace (or launch JSON, or the given `trace`): a launch of a
    registered family's kernel is that family's subject (exact demand, its whole space); any other launch
    takes the space its kernel's file declares (autotune list, CONFIG_SPACE) or the neighbours of the
    recorded config. An autotuned launch captured without a GPU (one entry per config) is one subject: its
    configs are the space, each with the launch it makes; what runs is the config the autotuner will pick
    by timing, so the search shows its predicted (or measured) pick as the current config
    (`advisor.advice.autotuner_pick.stand_for_autotuner`).
    `relaunch(i)`: for launch i, config -> the launch the program makes with that config (a call re-run).
    `contents()`: the launches of the call's real run on the GPU, for the contents of integer tensors timings need
    (advisor.capture.call_contents)."""
    from advisor.capture.trace import autotune_groups, read_trace, select_launches
    from ceilings.compile import load_kernel

    trace = trace if trace is not None else read_trace(path)
    gpu = gpu or resolve_gpu(trace.gpu or default_gpu_name(), calibrated)  # the trace names the GPU it ran on
    groups = {g[0]: g for g in autotune_groups(trace, str(path))}
    alternatives = {j for g in groups.values() for j in g[1:]}
    sourced = list(trace.launches)
    if kernel_file:
        # The file takes the launches of the kernels it defines (a trace recorded where the file lay elsewhere);
        # a launch of another file's kernel (a layer's align or quantiser) keeps its own source where that exists.
        from ceilings.compile import find_kernels, load_module

        defined = set(find_kernels(load_module(kernel_file)))
        resolved = str(Path(kernel_file).resolve())
        if not defined & {launch.kernel for launch in sourced}:
            defined = {launch.kernel for launch in sourced}  # none of them: the file stands in for all (it says why)
        sourced = [launch.with_source(resolved) if launch.kernel in defined or not Path(launch.source).exists()
                   else launch for launch in sourced]
    keep = set(select_launches(sourced, kernel, alternatives))
    out = []
    for i, launch in enumerate(sourced):
        if i not in keep:
            continue
        load_kernel(launch.source, launch.kernel)  # a missing, unreadable or broken kernel file, reported first
        known = family_subject(launch, gpu)
        if known is not None:
            out.append(known)
            continue
        declared = declared_space(launch.source, launch.kernel)
        space, loc = declared if declared else (None, None)
        count = trace.counts[i] if i < len(trace.counts) else 1
        variants = {sourced[j].config: sourced[j] for j in groups.get(i, ())}
        subject = LaunchSubject(launch, gpu, space=list(variants) if variants else space, location=loc,
                                variants=variants, relaunch=None if variants or relaunch is None else relaunch(i),
                                declared=space if variants else None)
        # captured without a GPU, an autotuned launch stands for the config the autotuner will pick, not its first
        subject.autotuner_picks = bool(variants) and trace.meta.get("autotune_chosen") is False
        subject.program_contents = contents
        if count > 1:
            subject.label += f" (x{count})"
        out.append(subject)
    if not out:
        if not kernel:
            raise AdvisorError(f"{path}: no launches in it")
        names = ", ".join(dict.fromkeys(launch.kernel for launch in sourced))
        raise AdvisorError(f"{path}: no launch of kernel {kernel!r}" + (f"; its kernels: {names}" if names else ""))
    return out


def family_subject(launch, gpu: GPU) -> Subject | None:
    """A traced launch of a registered family's kernel as that family's subject, when the family reads it."""
    family = family_of_launch(launch)
    if family is None or family.read_launch is None:
        return None
    found = family.read_launch(launch)
    if found is None:
        return None
    shape, config = found
    return FamilySubject(family, shape, gpu, config)


def subjects_for(target: str, *, preset: str | None = None, tp: int = 1, tokens: Sequence[int] | None = None,
                 shapes: Sequence[str] | None = None, trace: str | None = None, kernel: str | None = None,
                 gpu: GPU | None = None, config_dir: str | None = None, calibrated: bool = True,
                 call: str | None = None) -> list[Subject]:
    """The subjects of a target (see the module docstring); `calibrated` applies to a GPU resolved here.
    `call`: a call of the kernel file's host code whose launches are captured without a GPU."""
    path = Path(target)
    if not path.exists():
        raise AdvisorError(f"{target} does not exist; give a kernel file, a launch trace or an engine config file")
    if path.is_dir():
        raise AdvisorError(f"{target} is a folder; give a kernel file, a launch trace or an engine config file")
    engine_file = path.suffix == ".json" and moe.ENGINE_FILE.match(path.name) and not trace
    if tokens and (trace or call or (path.suffix == ".json" and not engine_file)):
        raise AdvisorError(f"--tokens selects token counts of the fused-MoE kernel or entries of an engine config "
                           f"file; {target} {'with --trace ' if trace else ''}has launches of fixed shapes: drop "
                           "--tokens (use --kernel to pick launches)")
    if call:
        from advisor.capture.call import capture_call_with_data

        if path.suffix != ".py" or trace:
            raise AdvisorError(f"--call goes with a kernel file, not {'--trace' if trace else target}")
        from advisor.capture.call import relauncher

        gpu_name = gpu.spec.name if gpu else default_gpu_name()  # the stand-in driver answers as this GPU
        from advisor.advice.stores import stored_outputs

        captured, integer_data = capture_call_with_data(path, call, gpu_name, written=stored_outputs)

        from advisor.advice.launch_edit import plan_launch_literals

        def relaunch(i: int):
            name = captured.launches[i].kernel
            occurrence = sum(1 for launch in captured.launches[:i] if launch.kernel == name)
            current = captured.launches[i].config

            def edited(config):  # the host code with the config written in, as `advisor apply` would write it
                if config == current:
                    raise AdvisorError("the captured config")
                return plan_launch_literals(path, name, current, config).after.decode()
            return relauncher(path, call, gpu_name, name, occurrence, stored_outputs, edited, integer_data)

        from advisor.capture.call_contents import program_contents

        ran: list = []

        def contents():  # one real run for all of the call's launches, when a timing first needs it
            if not ran:
                ran.append(program_contents(path, call))
            return ran[0]

        return trace_subjects(f"--call {call!r}", gpu, None, kernel, calibrated, trace=captured, relaunch=relaunch,
                              contents=contents)
    if trace:
        return trace_subjects(trace, gpu, str(path), kernel, calibrated)
    if path.suffix == ".json":
        if engine_file:
            return moe.engine_file_subjects(path, preset, gpu, calibrated, tokens)
        return trace_subjects(path, gpu, None, kernel, calibrated)
    if path.suffix != ".py":
        raise AdvisorError(f"{target}: expected a .py kernel file or a .json trace / engine config file")
    gpu = gpu or resolve_gpu(default_gpu_name(), calibrated)
    if moe.is_layer_kernel(path):
        if not preset:
            raise AdvisorError(f"{target}: give --preset (see `advisor presets`) and optionally --tp and --tokens")
        return [moe.layer(preset, m, tp, gpu, config_dir=config_dir) for m in (tokens or DEFAULT_TOKENS)]
    family = family_of_file(path)
    if family is not None and family.read_shape is not None:
        if tokens:
            raise AdvisorError(f"{target} takes --shape, not --tokens (see `advisor ceiling --help`)")
        if not shapes:
            raise AdvisorError(f"{target}: give one or more --shape values (see `advisor ceiling --help`)")
        return [FamilySubject(family, family.read_shape(s), gpu, label=f"{family.source.stem} {family.shape_form}={s}")
                for s in shapes]
    from ceilings.compile import load_kernel

    load_kernel(path, kernel)  # a clear error for a broken file or a missing kernel
    raise AdvisorError(f"{target}: the advisor needs the launches' shapes; give --call \"FUNCTION(ARGS)\" "
                       "(e.g. --call \"matmul(randn(4096, 4096, f16), randn(4096, 4096, f16))\"), --trace TRACE.json "
                       "(from `advisor record -- python prog.py`) or a launch JSON")


def advise(subjects: Sequence[Subject], top_k: int = 5, confirm: bool = True, measure: int = 0,
           progress=None) -> list[Advice]:
    """Search each subject; a config measured fastest on the GPU stays unless the prediction beats it beyond
    the model's error (advisor.advice.measured). `progress(done, total, what)`: told of the compiles."""
    from advisor.advice.measured import weigh

    return [weigh(search(s, top_k, confirm, measure=measure, progress=progress)) for s in subjects]


# ------------------------------------------------------------------------------------------ apply

def plan_apply(advices: Sequence[Advice], config_dir: str | Path | None = None, min_speedup: float = 1.0,
               force_gpu: bool = False, by_hand: list | None = None, close_calls: bool = True) -> list:
    """The edits that write each advice's best config where the launch reads it (advisor.advice.apply.Edit list):
    fused-MoE launches into their engine config file (the file they were read from, else a new file in
    `config_dir`, by default the project's kernels/configs; advisor.advice.moe); autotuned kernels into their
    @triton.autotune list. Only advices that gain more than `min_speedup` are written. Advice for one GPU
    goes into an engine file named for another only with `force_gpu`. A kernel launched with its config written
    at the call gets those literals replaced (advisor.advice.launch_edit), or a refusal naming the line; without
    `close_calls`, not for a predicted gain within the model's error (`search.close_call`) that was not measured.

    An autotune list built by code is not rewritten: the configs it lacks become `HandEdit`s
    (advisor.advice.autotune_hand) appended to `by_hand`; without that list, the first is an AdvisorError."""
    from advisor.advice import apply
    from advisor.advice.autotune_hand import plan_by_hand, require_by_hand
    from advisor.capture.autotune_space import built_autotune_space

    engine = moe.engine_entries(advices, config_dir, min_speedup)
    autotune: dict[tuple[Path, str], list] = {}
    built: dict[tuple[Path, str], list] = {}
    launched = []  # configs written at the launch call: its literal keywords (advisor.advice.launch_edit)
    for a in advices:
        s, loc = a.subject, a.subject.location
        if moe.gemm_parts(s) or not a.gains(min_speedup):
            continue
        if loc and loc.what == "autotune configs":
            autotune.setdefault((Path(loc.path), s.kernel), []).append(tuned_config(s, a.best.config))
        elif loc and loc.what.startswith("autotune configs built by code"):
            built.setdefault((Path(loc.path), s.kernel), []).append(tuned_config(s, a.best.config))
        elif loc and loc.what == "kernel":
            from advisor.advice.launch_edit import plan_launch_literals
            from advisor.advice.search import close_call

            # A launch's own config changes what runs, where an autotune list only gains a candidate the
            # autotuner times: a predicted gain within the model's error is not written unmeasured.
            if not close_calls and not a.measured and close_call(a):
                raise AdvisorError(f"{s.label}: {a.best.config.label()} is predicted {a.speedup:.2f}x faster, within "
                                   "the model's error, and would replace the launch's own config; measure it first "
                                   "(--verify or --measure on a GPU), nothing written")
            launched.append(plan_launch_literals(loc.path, s.kernel, a.current.config, a.best.config))
        else:
            where = f"{loc.path}:{loc.line}" if loc else s.label
            raise AdvisorError(f"{s.label}: its config is chosen by code ({where}), not read from a config file or an "
                               "autotune list; change it there by hand")
    hand = []
    for (path, kernel), configs in built.items():
        space = built_autotune_space(path, kernel)
        if space is None:
            raise AdvisorError(f"{path}: the autotune configs of {kernel} could not be evaluated again; add "
                               f"{', '.join(c.label() for c in configs)} to them by hand")
        edit = plan_by_hand(path, kernel, configs, space.configs, space.line, space.what)
        if edit is not None:
            hand.append(edit)
    if by_hand is None:
        require_by_hand(hand)
    else:
        by_hand.extend(hand)
    edits = moe.engine_edits(engine, force_gpu)
    edits += [apply.plan_autotune(path, kernel, list(dict.fromkeys(configs)), mode="add")
              for (path, kernel), configs in autotune.items()]
    paths = [e.path for e in launched]
    if len(set(paths)) < len(paths):  # two launches' edits of one file would overwrite each other
        raise AdvisorError(f"{paths[0]}: more than one launch's config would change in this file; apply them one "
                           "at a time (--kernel)")
    return edits + launched


def check_fit(advices: Sequence[Advice]) -> None:
    """Refuse configs that cannot run on the target GPU (the subject's analytic precheck)."""
    from ceilings.validate import config_problem

    for a in advices:
        why = config_problem(a.best.config, a.subject.spec, a.subject.precheck)
        if why:
            raise AdvisorError(f"{a.subject.label}: {a.best.config.label()} does not fit {a.subject.spec.name}: {why}")
