"""Load engine fused-MoE config files with vLLM's own loader (run by tests/test_engine_files.py in a subprocess,
so vLLM's imports and logging stay out of the test process).

    python tests/engine_loader.py REQUEST.json   ->  prints one JSON object on stdout

REQUEST: {"groups": [{"folder": a folder named configs holding the files, "device": the torch device name the
files are named for, "files": [{"E": experts, "N": intermediate per rank, "ms": [token counts to look up]}]}]}.
Prints {"vllm": version, "groups": [[{"name": vLLM's file name, "configs": {key: entry} or null, "error": text
or null, "lookups": {M: entry}} per file] per group]}. Exit 3 when vLLM cannot be imported (the test skips).

Only the device-name lookup is replaced (this machine has no GPU, and the files are named for one); the
loader's folder is pointed at REQUEST's folder by setting the module's `__file__`, because vLLM 0.9.2 has no
setting for it (it reads `<its own folder>/configs/<name>`).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def main(request_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    try:
        import importlib

        import vllm

        loader = importlib.import_module("vllm.model_executor.layers.fused_moe.fused_moe")
    except Exception as exc:  # any import failure means "vLLM is not usable here"
        print(f"vLLM is not importable: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return 3
    groups = []
    for group in request["groups"]:
        if os.path.basename(group["folder"]) != "configs":
            print("each folder must be named configs (vLLM reads <module folder>/configs)", file=sys.stderr)
            return 2
        loader.current_platform.get_device_name = lambda *args, device=group["device"], **kwargs: device
        loader.__file__ = os.path.join(os.path.dirname(group["folder"]), "fused_moe.py")
        groups.append([_load(loader, file["E"], file["N"], file["ms"]) for file in group["files"]])
    print(json.dumps({"vllm": vllm.__version__, "groups": groups}))
    return 0


def _load(loader, e: int, n: int, ms: list[int]) -> dict:
    loader.get_moe_configs.cache_clear()
    result = {"name": loader.get_config_file_name(e, n, None), "configs": None, "error": None, "lookups": {}}
    try:
        configs = loader.get_moe_configs(e, n, None)
        result["configs"] = None if configs is None else {str(k): v for k, v in configs.items()}
        for m in ms:
            # w1: (E, 2N, hidden), w2: (E, hidden, N); only w2's E and N choose the file.
            result["lookups"][str(m)] = loader.try_get_optimal_moe_config((e, 2 * n, 4096), (e, 4096, n), 2, None, m)
    except Exception:
        result["error"] = traceback.format_exc(limit=1).strip().splitlines()[-1]
    return result


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
