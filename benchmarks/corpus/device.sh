#!/bin/bash
# The corpus steps on the GPU machine, from the repository root:
#   bash benchmarks/corpus/device.sh STEP...
# STEP: check | record:LIB[,LIB]:SECONDS | warm:LIB:CASES | compile:LIB[,LIB]:SECONDS[:PER_KERNEL[:LIMIT]]
#       | time:LIB[,LIB]:SECONDS[:PER_KERNEL[:LIMIT]] | ncuplan:LIB[,LIB]:N | ncu:SECONDS[:CHUNK] | pack
# Installs the pinned wheels from .whl (carried with the call) into /tmp/site first (once per machine);
# `pack` writes benchmarks/corpus/data into $OUT/results.tar.gz and prints the counts. Run it as its own
# command after the others (`timeout -s INT T bash device.sh ...; bash device.sh pack`), so that it runs
# whatever the others did.
cd "$(dirname "$0")/../.."
if [ "$*" != pack ] && [ ! -f /tmp/site/.corpus-installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl && touch /tmp/site/.corpus-installed || { echo "wheel install failed"; exit 1; }
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 FLA_CACHE_RESULTS=0 TOKENIZERS_PARALLELISM=false
C=benchmarks/corpus
mkdir -p $C/data/logs
# Each step has its own deadline; this bounds it again, a minute later, so that `pack` always runs in time.
bounded() { local secs=$1; shift; timeout -s INT -k 15 $((secs + 30)) "$@"; }
for step in "$@"; do
  IFS=: read -r what libs secs extra limit <<< "$step"
  libs=${libs//,/ }
  echo "=== $step ($(date -u +%H:%M:%S))"
  case $what in
    check)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
      python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
      for m in liger_kernel.ops.cross_entropy flag_gems fla.ops gemlite torchao; do
        python3 -c "import $m, importlib.metadata as md; print('import ok', '$m')" 2>&1 | tail -1
      done
      python3 - <<'PY' > $C/data/logs/env.json
import datetime, json, subprocess, importlib.metadata as md, torch, triton
def _version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
names = ("liger-kernel", "flag-gems", "fla-core", "gemlite", "torchao", "sqlalchemy", "numpy", "transformers", "einops")
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
ncu = subprocess.run(["ncu", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
print(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "gpu": torch.cuda.get_device_name(), "nvidia_smi": smi, "torch": torch.__version__,
                  "triton": triton.__version__, "python": __import__("sys").version.split()[0],
                  "ncu": ncu[0] if ncu else None, "packages": {n: _version(n) for n in names}}, indent=1))
PY
      cat $C/data/logs/env.json
      ncu --version | tail -1
      ncu --query-metrics 2>/dev/null | awk 'NR>1{print $1}' > $C/data/logs/ncu_metrics_known.txt
      echo "ncu knows $(wc -l < $C/data/logs/ncu_metrics_known.txt) base metrics"
      python3 - <<'PY'
import sys; sys.path.insert(0, "benchmarks/corpus")
from ncu import METRICS
known = set(open("benchmarks/corpus/data/logs/ncu_metrics_known.txt").read().split())
print("ncu metrics missing:", [m for m in METRICS if m.rsplit(".", 1)[0] not in known])
PY
      ;;
    record) bounded ${secs:-240} python3 $C/measure.py record $libs --timeout ${secs:-240} ;;
    warm) bounded 0 env CORPUS_EXTRAS= python3 $C/drive_$libs.py --only ${secs//+/,} ;;  # e.g. FlagGems' generated kernel files
    compile) bounded ${secs:-240} python3 $C/measure.py compile $libs --timeout ${secs:-240} --per-kernel ${extra:-4} \
               --limit ${limit:-40} ;;
    time) bounded ${secs:-240} python3 $C/measure.py time $libs --deadline ${secs:-240} --per-kernel ${extra:-4} \
            --limit ${limit:-40} ;;
    ncuplan) python3 $C/ncu.py plan $libs --per-library ${secs:-50} ;;
    ncu) bounded ${libs:-240} python3 $C/ncu.py run --deadline ${libs:-240} --chunk ${secs:-25} ;;
    pack) tar czf "$OUT/results.tar.gz" -C $C data && python3 $C/summary.py ;;
  esac
done
