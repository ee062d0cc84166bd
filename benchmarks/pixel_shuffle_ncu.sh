#!/usr/bin/env bash
# benchmarks/pixel_shuffle_sectors.py timed, then once more under Nsight Compute (one launch per config), the
# counters of each launch printed as a table. Usage on the device: bash benchmarks/pixel_shuffle_ncu.sh $OUT
set -euo pipefail
out=$1
python3 benchmarks/pixel_shuffle_sectors.py --out "$out" | tail -9
metrics=gpu__time_duration.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts.sum.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
/usr/local/cuda/bin/ncu --clock-control none -k regex:pixel_shuffle --metrics "$metrics" --csv \
    python3 benchmarks/pixel_shuffle_sectors.py --out "$out/ncu_run" --ncu > "$out/ncu.csv" 2> "$out/ncu.err" || true
python3 benchmarks/ncu_table.py "$out/ncu.csv"
