"""The real `advisor tui` program in a detached tmux session, driven by keys and read back as a person sees
the screen: the tmux tests of tests/test_tui.py and tests/test_tui_files.py share it.

Each session runs on its own socket (under the test's tmp_path), so a test never touches a developer's tmux;
the command is followed by `echo EXIT=$?` so a test can read how the program ended.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def advisor_tui(*args: str) -> list[str]:
    """`advisor tui ARGS` as the `advisor` script runs it (tui.entry), from this checkout."""
    return [sys.executable, "-m", "tui.entry", "tui", *args]


class TmuxSession:
    """One program in a detached tmux session of a given size; `close` ends the session's server."""

    def __init__(self, tmp_path: Path, name: str, command: list[str], size: tuple[int, int]):
        self.socket = str(tmp_path / "tmux.sock")
        self.name = f"{name}-{os.getpid()}"
        # The program under test runs without the test process's interpreter setting or tmux client, and
        # without COLUMNS/LINES (pytest-xdist's workers set 80x24, and Textual sizes its screen by them, not
        # by the pane: a 100x30 pane then shows an 80x24 app whose notifications fall outside it).
        self.env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TMUX", "COLUMNS", "LINES")}
        self.env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
        shell = " ".join(f"'{a}'" for a in command)
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]), "-c", str(ROOT),
                  f"{shell}; echo EXIT=$?; sleep 30")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, env=self.env,
                              check=True, timeout=30).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str, literal: bool = False) -> None:
        """Send tmux key names (Enter, Tab, q), or with `literal` the text as typed."""
        self.tmux("send-keys", "-t", self.name, *(["-l"] if literal else []), *keys)

    def wait_for(self, pattern: str, timeout: float = 120, poll: float = 0.3) -> str:
        """The screen once the regular expression `pattern` appears on it; fails the test after `timeout` s."""
        end = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < end:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(poll)
        pytest.fail(f"{pattern!r} did not appear; the screen:\n{screen}")

    def press_until(self, key: str, pattern: str, unheard: str, timeout: float = 120, every: float = 10) -> str:
        """Press `key`, then wait for `pattern`; while the screen still shows `unheard` (what it shows when the key
        was lost: pressed before the widget took focus, as on a loaded machine), press it again every `every` s."""
        end = time.monotonic() + timeout
        while True:
            self.keys(key)
            try:
                return self.wait_for(pattern, timeout=min(every, max(end - time.monotonic(), 0.1)))
            except pytest.fail.Exception:
                screen = self.screen()
                if time.monotonic() >= end or not re.search(unheard, screen):
                    return self.wait_for(pattern, timeout=max(end - time.monotonic(), 0.1))

    def wait_gone(self, pattern: str, timeout: float = 60, poll: float = 0.3) -> str:
        """The screen once `pattern` has left it (a closed dialog), so the next key reaches the screen below;
        a fixed sleep loses keys when the machine is loaded (parallel test workers)."""
        end = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < end:
            screen = self.screen()
            if not re.search(pattern, screen):
                return screen
            time.sleep(poll)
        pytest.fail(f"{pattern!r} stayed on the screen; the screen:\n{screen}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, env=self.env)

    def __enter__(self) -> TmuxSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
