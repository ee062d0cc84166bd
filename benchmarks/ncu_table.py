"""Nsight Compute's `--csv --metrics ...` output (mixed with the program's own lines) as a markdown table, one row per
profiled launch: `python3 benchmarks/ncu_table.py ncu.csv` (used by pixel_shuffle_ncu.sh and l1_wavefront_ncu.sh)."""

import csv
import sys


def main(path: str) -> None:
    with open(path) as f:
        rows = [r for r in csv.reader(f) if r and (r[0] == "ID" or r[0].isdigit())]
    head, body = rows[0], rows[1:]
    i_id, i_name, i_val = head.index("ID"), head.index("Metric Name"), head.index("Metric Value")
    by: dict[str, dict[str, str]] = {}
    for r in body:
        by.setdefault(r[i_id], {})[r[i_name]] = r[i_val]
    names = list(next(iter(by.values())))
    short = {n: n.replace("l1tex__", "").replace("_pipe_lsu_mem_global_op", "").replace(".sum", "") for n in names}
    print("| launch | " + " | ".join(short[n] for n in names) + " |")
    for k, v in by.items():
        print(f"| {k} | " + " | ".join(v.get(n, "") for n in names) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
