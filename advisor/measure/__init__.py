"""GPU measurement: checked CUDA-graph timing (`timing`), parallel resumable sweeps (`sweep`), the
dataset plans of `advisor collect`, rate calibration (`calibrate`), `advisor tune` of the shipped
fused-MoE kernel, and timing of any traced launch (`launch_run`).

May import `advisor.model` (calibrate --tune fine-tunes it) and `advisor.capture`; never `advisor.advice`.
"""
