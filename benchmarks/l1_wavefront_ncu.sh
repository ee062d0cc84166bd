#!/usr/bin/env bash
# benchmarks/l1_wavefront_probe.py timed, then once more under Nsight Compute (one launch per pattern): requests,
# sectors and L1 data-pipe wavefronts of each pattern. Usage on the device: bash benchmarks/l1_wavefront_ncu.sh $OUT
set -euo pipefail
out=$1
mkdir -p "$out"
python3 benchmarks/l1_wavefront_probe.py --out "$out" > "$out/timed.log" 2>&1 || true
tail -24 "$out/timed.log"
metrics=gpu__time_duration.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_sector_hit_rate.pct
extra=l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld.sum,l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_st.sum,l1tex__data_bank_reads.sum,l1tex__data_bank_writes.sum
for set in metrics extra; do
  /usr/local/cuda/bin/ncu --clock-control none -k regex:probe_kernel --metrics "${!set}" --csv \
      python3 benchmarks/l1_wavefront_probe.py --out "$out/ncu_$set" --ncu > "$out/ncu_$set.csv" 2> "$out/ncu_$set.err" || true
  python3 benchmarks/ncu_table.py "$out/ncu_$set.csv" || true
done
