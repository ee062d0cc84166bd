"""The contents of a `--call`'s integer tensors, from one real run of the call on the GPU that times it.

A `--call` is captured without a GPU (`advisor.capture.call`): its tensors hold no data, except what `randint`
builds and what small launches run in the interpreter compute. Index tensors the host code derives from data
(a sort's indices, top-k routing ids from router logits, a permutation's inverse) therefore travel without
contents, and a timing filled them with zeros: every index 0, so a gather reads one row and a scatter or an
atomic add hits one address (RESULTS 55: a top-p mask's scatter through a sort's indices timed that way).

Before `suggest --measure` times such a launch, the call runs once for real on the GPU, as the user's program
would (random normal floats, the same seeded `randint`), under `advisor record`'s capture in a child process,
so the advisor's own process and its timings are not hooked. Each integer tensor the no-GPU launch has no
contents for takes what that run recorded for it: the contents of a small one (`TensorArg.values`) or a sample
of a large one (`TensorArg.sample`), from the run's launch of the same kernel, grid, config and tensor shapes.
The ceiling and the model keep the no-GPU launch: only the timings' inputs change.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

from ceilings.launch import Launch

_INTEGER = ("int8", "uint8", "int16", "int32", "int64", "bool")
RUN_LIMIT_S = 300  # the call's real run: longer than this, and the timings keep the no-GPU launch's inputs


def lacks_contents(launch: Launch) -> bool:
    """Whether an integer tensor of the launch has neither contents nor a sample (a timing would use zeros)."""
    return any(t.values is None and t.sample is None and t.dtype in _INTEGER and t.block_shape is None
               for t in launch.tensors)


def with_contents(launch: Launch, run: list[Launch]) -> Launch:
    """`launch` with the contents or samples that the real run's launch of the same kernel and tensors (the same
    grid and config first: an autotuned kernel ran the config its autotuner picked) recorded for its integer
    tensors that have neither; `launch` itself where the run made no such launch."""
    from advisor.capture.call import launch_form

    alike = [r for r in run if launch_form(r) == launch_form(launch)]
    same = next((r for r in alike if (r.grid, r.config) == (launch.grid, launch.config)), alike[0] if alike else None)
    if same is None:
        return launch
    found = {t.name: t for t in same.tensors}
    tensors = tuple(dataclasses.replace(t, values=found[t.name].values, sample=found[t.name].sample)
                    if t.values is None and t.sample is None and t.dtype in _INTEGER else t
                    for t in launch.tensors)
    return dataclasses.replace(launch, tensors=tensors)


def program_contents(path: str | Path, call: str, device: str = "cuda") -> list[Launch] | None:
    """The launches one real run of `call` on `device` makes, with the contents of their integer tensors; None
    where the run fails or outlasts RUN_LIMIT_S (the timings then keep zeros, and `suggest` says so)."""
    import os

    from advisor.capture.record import program_environment, record

    env = program_environment()  # the advisor importable in the child wherever it runs from
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="advisor-contents-") as folder:
        argv = [sys.executable, "-m", "advisor.capture.call_contents", str(Path(path).resolve()), call, device]
        try:
            result = record(argv, Path(folder) / "contents.json", env=env, timeout_s=RUN_LIMIT_S)
        except Exception:  # noqa: BLE001 - no contents is the answer to any failure of this extra run
            return None
    return list(result.trace.launches) if result.returncode == 0 else None


def real_helpers(device: str) -> dict:
    """The names a call may use (advisor.capture.call.helpers), making tensors with data on `device`: random
    normal (randn), uniform (rand) or zeros (zeros, empty) floats from a fixed seed, and randint's integers."""
    import torch

    from advisor.capture import call as calls

    names = calls.helpers()
    gen = torch.Generator(device=device).manual_seed(0)

    def factory(name):
        shaped = calls._factory(name)

        def make(*sizes, dtype=None, device_=None, requires_grad=False, **_):
            meta = shaped(*sizes, dtype=dtype)  # the same checks and messages as without a GPU
            if name in ("zeros", "empty"):
                return torch.zeros(meta.shape, dtype=meta.dtype, device=device)
            if name == "ones":
                return torch.ones(meta.shape, dtype=meta.dtype, device=device)
            draw = torch.randn if name == "randn" else torch.rand
            return draw(meta.shape, generator=gen, device=device).to(meta.dtype)
        make.__name__ = name
        return make

    for name in calls._FACTORIES:
        names[name] = factory(name)
    names["randint"] = lambda *args, **kw: calls._randint(*args, **kw).to(device)
    return names


def main(argv: list[str]) -> None:
    """The child: evaluate the call against the kernel file, imported as a program imports it, on real tensors.
    Silent: what the program prints, and why it failed, would land in the middle of `suggest`'s output; a failed
    run exits 3 and the timings keep their zeros, which `suggest` notes."""
    import os

    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    try:
        _run(*argv)
    except BaseException:  # noqa: BLE001 - any failure is "no contents"
        sys.exit(3)


def _run(path: str, call: str, device: str) -> None:
    import importlib.util

    folder = str(Path(path).parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from advisor.capture.call import _WHERE, parse_call

    namespace = {**vars(module), **real_helpers(device)}
    eval(compile(parse_call(call), _WHERE, "eval"), namespace)
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
