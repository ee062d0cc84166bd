"""Compiling for the GPU from a process that runs Triton's CPU interpreter.

With TRITON_INTERPRET set, Triton's own library functions (tl.cdiv, ...) are interpreted objects that code
generation cannot use, so such a process compiles in a child without the interpreter. One child serves the
whole process, started at its first compile and fed one request per line: a child per compile paid the import
of torch and Triton (3-4 s on 2 busy cores) each time, more than most compiles take. The child applies the
parent's TRITON* variables as they are at each request (the compile cache follows TRITON_ADVISOR_HOME) and
reloads a kernel file whose text changed since it last loaded it. It exits when the parent closes its input
(on exit, or dying).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ceilings.errors import AdvisorError

_SERVER = r"""
import hashlib, json, os, sys, traceback
from dataclasses import asdict
from pathlib import Path
from ceilings.errors import AdvisorError
from ceilings.launch import Launch
from ceilings.compile import compile_launch

replies, sys.stdout = sys.stdout, sys.stderr  # whatever else prints goes to the log, not among the replies
loaded = {}  # kernel file -> hash of the text it was loaded with
for line in sys.stdin:
    request = json.loads(line)
    for key in [k for k in os.environ if k.startswith("TRITON") and k not in request["env"]]:
        del os.environ[key]
    os.environ.update(request["env"])
    try:
        launch = Launch.from_dict(request["launch"])
        path = Path(launch.source).resolve()
        text = hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else None
        if loaded.get(path, text) != text:  # the file changed: open it afresh, as a new child did
            for name, module in list(sys.modules.items()):
                if name.startswith("_advisor_kernel_") and getattr(module, "__file__", None) \
                        and Path(module.__file__).resolve() == path:
                    del sys.modules[name]
        loaded[path] = text
        reply = {"result": asdict(compile_launch(launch, request["arch"], request["use_cache"]))}
    except AdvisorError as exc:
        reply = {"error": str(exc)}
    except Exception:
        reply = {"crash": traceback.format_exc()[-3000:]}
    replies.write(json.dumps(reply) + "\n")
    replies.flush()
"""

_lock = threading.Lock()
_child: subprocess.Popen | None = None
_log: Path | None = None


def _start() -> subprocess.Popen:
    global _child, _log
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "TRITON_INTERPRET": "0",
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    fd, name = tempfile.mkstemp(prefix="advisor-compile-child-", suffix=".log")
    _log = Path(name)
    with os.fdopen(fd, "w") as log:
        _child = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=log, text=True, env=env)
    return _child


def stop(kill: bool = False) -> None:
    """Close the child's input (it exits when idle; `kill`: at once, a compile in hand abandoned) and forget it; the
    next compile starts one."""
    global _child
    child, _child = _child, None
    if child is not None:
        try:
            if kill:
                child.kill()
            child.stdin.close()
            child.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
    if _log is not None:
        _log.unlink(missing_ok=True)


atexit.register(stop)


def compile_in_child(launch, arch: int, use_cache: bool):
    """`ceilings.compile.compile_launch` run in the child; its AdvisorError raised here with the same message."""
    from ceilings.compile import CompiledKernel

    env = {k: v for k, v in os.environ.items() if k.startswith("TRITON") and k != "TRITON_INTERPRET"}
    request = json.dumps({"launch": launch.to_dict(), "arch": arch, "use_cache": use_cache, "env": env}) + "\n"
    with _lock:
        for _ in range(2):  # a child that died (killed, out of memory) is replaced once
            child = _child if _child is not None and _child.poll() is None else _start()
            try:
                child.stdin.write(request)
                child.stdin.flush()
                line = child.stdout.readline()
            except OSError:
                line = ""
            except BaseException:  # Ctrl-C while it compiles: its reply would answer the next request
                stop(kill=True)
                raise
            if line:
                break
            log = _log.read_text()[-2000:] if _log is not None and _log.exists() else ""
            stop()
        else:
            raise RuntimeError(f"compiling {launch.kernel} in a child process failed:\n{log}")
    reply = json.loads(line)
    if "error" in reply:
        raise AdvisorError(reply["error"])
    if "crash" in reply:
        raise RuntimeError(f"compiling {launch.kernel} in a child process failed:\n{reply['crash']}")
    return CompiledKernel(**reply["result"])
