"""The latency model: features, the shape split, training, the shipped model and its predictions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from advisor.model.dataset import rows_to_dataset, shape_folds
from advisor.model.features import DEFAULT_FEATURES, FEATURES, feature_row, tile_sizes
from advisor.model.predict import MODEL_DIR, LatencyModel, predict_ceilings, train
from ceilings.hardware import get_spec, rates_for
from ceilings.launch import Config
from ceilings.roofline import roofline
from kernels.moe_bench import MoEGemmSpec
from kernels.moe_demand import moe_gemm_demand

ROOT = Path(__file__).resolve().parents[1]


def cfg(bm, bn, bk, g=1, w=4, s=3):
    return Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g}, w, s)


def test_feature_row_of_a_known_launch():
    spec = MoEGemmSpec(8, 2, 4096, 14336, 1024)
    config = cfg(128, 256, 64, 16, 8, 3)
    demand = moe_gemm_demand(spec, config, counts=[256] * 8)
    c = roofline(demand, rates_for("h100", use_calibration=False), config.to_dict())
    row = feature_row(c, demand, config, get_spec("h100"))
    assert list(row) == list(FEATURES)
    assert row["tile_m"] == 128 and row["tile_n"] == 256 and row["tile_k"] == 64 and row["group_m"] == 16
    assert row["num_warps"] == 8 and row["wgmma"] == 1.0 and row["sms"] == 132
    assert row["log_ceiling_us"] == pytest.approx(np.log(c.ceiling_us))
    assert row["active_fraction"] == pytest.approx(c.active_ctas / c.ctas)
    assert sum(row[f"share_{p}"] == 1.0 for p in ("tensor", "dram")) == 0  # shares of ceiling, with the launch
    assert tile_sizes(Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 8}))["tile_n"] == 32


def test_transfer_features_describe_the_work_and_the_generic_paths_caveats():
    import dataclasses

    spec = MoEGemmSpec(8, 2, 4096, 14336, 1024)
    config = cfg(128, 256, 64, 16, 8, 3)
    demand = moe_gemm_demand(spec, config, counts=[256] * 8)
    rates = rates_for("h100", use_calibration=False)
    c = roofline(demand, rates, config.to_dict())
    exact = feature_row(c, demand, config, get_spec("h100"))
    assert exact["generic_path"] == 0.0 and exact["log_expected_over_floor"] == 0.0
    assert not any(exact[f] for f in ("note_counted_once", "note_data_dependent", "note_uneven_ctas"))
    resident = min(c.ctas_per_sm, -(-c.active_ctas // 132))
    assert exact["occupancy_warps"] == pytest.approx(resident * 8 / 64)
    assert 0.0 <= exact["share_second"] <= 1.0 <= exact["share_sum"]
    # The same work as the generic path would report it: a floor under an expected demand twice as large,
    # a loop bound read from memory and a spin-wait loop counted once.
    expected = dataclasses.replace(demand, dram_bytes=2 * demand.dram_bytes,
                                   instructions_per_cta={k: 2 * v for k, v in demand.instructions_per_cta.items()})
    generic = dataclasses.replace(
        demand, source="generic (SASS x evaluated control flow)", expected=expected,
        notes=["loop at line 12: bound depends on memory or loop-carried values: the floor counts it 0 times, "
               "the expected work once", "1 spin-wait loop(s) counted once per entry"])
    g = feature_row(roofline(generic, rates, config.to_dict()), generic, config, get_spec("h100"))
    assert g["generic_path"] == 1.0 and g["note_counted_once"] == 1.0 and g["note_data_dependent"] == 1.0
    assert g["note_uneven_ctas"] == 0.0
    assert g["log_expected_over_floor"] == pytest.approx(np.log(2.0), rel=1e-3)
    # Nothing of the kernel's name: a renamed kernel has the same row.
    renamed = dataclasses.replace(generic, kernel="softmax_kernel")
    assert feature_row(roofline(renamed, rates, config.to_dict()), renamed, config, get_spec("h100")) == g


def _rows(shape, ms, gpu="NVIDIA H100 80GB HBM3"):
    e, top, k, n = shape
    rows = []
    for m in ms:
        for config, scale in ((cfg(16, 64, 128), 1.3), (cfg(64, 128, 64, w=4, s=4), 1.1), (cfg(32, 64, 128), 1.5)):
            spec = MoEGemmSpec(e, top, k, n, m)
            counts = [m * top // e] * e
            demand = moe_gemm_demand(spec, config, counts=counts)
            c = roofline(demand, rates_for(gpu), config.to_dict())
            rows.append({"status": "ok", "gpu": gpu, "kernel": "fused_moe_kernel", "gemm": "1", "M": str(m),
                         "shape": f"E{e}_top{top}_K{k}_N{n}", "us": str(c.ceiling_us * scale), "shared": "",
                         "n_regs": "", "case_info": json.dumps({"expert_counts": counts}), **{
                             k_: str(v) for k_, v in config.to_dict().items()}})
    return rows


def test_dataset_split_and_training_on_a_small_synthetic_set(tmp_path):
    rows = []
    for shape in ((8, 2, 512, 1024), (16, 2, 512, 512), (8, 1, 256, 1024), (4, 2, 1024, 256)):
        rows += _rows(shape, (16, 64, 256))
    data = rows_to_dataset(rows)
    assert data.x.shape == (len(rows), len(FEATURES))
    # measured = ceiling x a factor set per config: the target is exactly that factor's log
    assert np.allclose(np.exp(data.y), [float(r["us"]) for r in rows] / data.ceiling_us)
    folds = shape_folds(data, 3)
    assert np.sum(folds, axis=0).tolist() == [1] * len(data)  # every row in exactly one test fold
    for fold in folds:
        train_groups = {g for g, f in zip(data.group, fold, strict=True) if not f}
        test_groups = {g for g, f in zip(data.group, fold, strict=True) if f}
        assert not train_groups & test_groups  # no shape on both sides
    model = train(data.subset(~folds[0]), rounds=30)
    model.save(tmp_path)
    loaded = LatencyModel.load(tmp_path)
    test = data.subset(folds[0])
    mid, lo, hi = loaded.predict_us(test.ceiling_us, test.x)
    assert np.all(lo <= mid) and np.all(mid <= hi) and np.all(mid >= test.ceiling_us)
    assert loaded.meta["rows"] == len(data.subset(~folds[0])) and loaded.meta["features"] == list(DEFAULT_FEATURES)


def test_a_model_on_some_features_reads_full_rows_and_weights_balance_origins():
    from advisor.model.dataset import balanced_weights, origin
    from advisor.model.features import TRANSFER_FEATURES

    rows = []
    for shape in ((8, 2, 512, 1024), (16, 2, 512, 512), (8, 1, 256, 1024)):
        rows += _rows(shape, (16, 64, 256))
    data = rows_to_dataset(rows)
    # Two origins of unequal size: the shipped family's rows and a "corpus library" of a third of them.
    third = len(data) // 3
    data.group = [f"corpus/lib/{g}" if i < third else g for i, g in enumerate(data.group)]
    assert origin(data.group[0]) == "corpus/lib" and origin(data.group[-1]) == "fused_moe_kernel"
    w = balanced_weights(data, power=1.0)
    assert w.mean() == pytest.approx(1.0)
    assert w[:third].sum() == pytest.approx(w[third:].sum())  # each origin alike
    assert np.allclose(balanced_weights(data, power=0.0), 1.0)
    base = [f for f in FEATURES if f not in TRANSFER_FEATURES]
    model = train(data, rounds=20, features=base, weights=w)
    assert model.features == base and model.meta["weighted"]
    mid, lo, hi = model.predict_log_ratio(data.x)  # rows of all FEATURES; the model takes its own columns
    assert mid.shape == (len(data),) and np.all(lo <= mid) and np.all(mid <= hi)
    assert np.abs(mid - data.y).mean() < 0.2


def test_shipped_model_predicts_within_its_interval_and_above_the_ceiling():
    from advisor.advice.moe import gemm_ceiling
    from ceilings.hardware import resolve_gpu

    model = LatencyModel.load(MODEL_DIR)
    assert model.meta["rows"] >= 1000 and "NVIDIA H100 80GB HBM3" in model.meta["gpus"]
    assert sum(f.stat().st_size for f in MODEL_DIR.iterdir()) < 8 << 20  # ships inside the package
    gpu = resolve_gpu("h100")
    c = gemm_ceiling("mixtral-8x7b", 1024, tp=2, gpu=gpu, config=cfg(128, 256, 64, 32, 8, 3))
    (p,) = predict_ceilings([c], model, gpu=gpu)
    lo, hi = p["predicted_interval_us"]
    assert c.ceiling_us <= lo <= p["predicted_us"] <= hi
    assert not p["notes"]


def test_model_from_other_features_is_refused(tmp_path):
    meta = json.loads((MODEL_DIR / "latency_meta.json").read_text())
    meta["features"] = meta["features"] + ["a_feature_this_code_does_not_compute"]
    (tmp_path / "latency_meta.json").write_text(json.dumps(meta))
    from ceilings.errors import AdvisorError

    with pytest.raises(AdvisorError, match="other features"):
        LatencyModel.load(tmp_path)
    with pytest.raises(AdvisorError, match="advisor train"):
        LatencyModel.load(tmp_path / "empty")


def test_predict_cli_json_adds_the_prediction():
    r = subprocess.run([sys.executable, "-m", "advisor.cli", "predict", "kernels/fused_moe.py", "--preset",
                        "qwen3-30b-a3b", "--tp", "4", "--tokens", "256", "--format", "json"], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["predicted_us"] >= doc["ceiling_us"] and len(doc["predicted_interval_us"]) == 2
    assert {"pipelines", "binding", "ctas"} <= set(doc)


def test_rows_of_every_shipped_family_become_feature_rows():
    from advisor.model.dataset import row_demand

    softmax_row = {"kernel": "softmax_kernel", "shape": "COLS2048", "M": "4096", "gemm": "1", "num_warps": "8",
                   "num_stages": "1", "params": json.dumps({"BLOCK_N": 2048, "ROWS_PER_PROGRAM": 2})}
    demand, config = row_demand(softmax_row, 90)
    assert demand.kernel == "softmax_kernel" and demand.ctas == 2048 and config["ROWS_PER_PROGRAM"] == 2
    gemm_row = {"kernel": "gemm_kernel", "shape": "N4096_K1024", "M": "256", "gemm": "1", "num_warps": "4",
                "num_stages": "3", "config": "M64 N128 K64 G8 w4 s3"}
    demand, config = row_demand(gemm_row, 90)
    assert demand.kernel == "gemm_kernel" and config["BLOCK_N"] == 128 and demand.ctas == 4 * 32


def test_attention_rows_become_demands():
    from advisor.model.dataset import row_demand

    row = {"kernel": "attention_kernel", "shape": "SEQ2048_D128", "M": "16", "gemm": "1", "num_warps": "8",
           "num_stages": "2", "params": json.dumps({"BLOCK_M": 128, "BLOCK_N": 64})}
    demand, config = row_demand(row, 90)
    assert demand.kernel == "attention_kernel" and demand.ctas == 16 * 16 and config["BLOCK_N"] == 64


def test_numpy_trees_equal_xgboost_and_need_no_xgboost(tmp_path):
    """The shipped numpy export predicts what the boosters predict, including missing values, and loading
    the model for prediction does not import XGBoost (GPU machines and CI jobs may lack it)."""
    model_np = LatencyModel.load(MODEL_DIR, boosters=False)
    model_xgb = LatencyModel.load(MODEL_DIR, boosters=True)
    rng = np.random.default_rng(0)
    data = rows_to_dataset(_rows((8, 2, 512, 1024), (16, 64, 256)))
    x = np.repeat(data.x, 4, axis=0) * rng.uniform(0.7, 1.3, (4 * len(data), len(FEATURES))).astype(np.float32)
    x[::5, 7] = np.nan
    for got, want in zip(model_np.predict_log_ratio(x), model_xgb.predict_log_ratio(x), strict=True):
        assert np.allclose(got, want, atol=1e-5, rtol=0)
    code = ("import sys; sys.modules['xgboost'] = None; from advisor.model.predict import LatencyModel; "
            "m = LatencyModel.load(); "
            "import numpy as np; from advisor.model.features import FEATURES; "
            "m.predict_log_ratio(np.zeros((3, len(FEATURES)), np.float32)); "
            "print(type(m.median).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "TreeEnsemble"  # XGBoost could not be imported, and the model still predicted


def test_calibrate_tune_from_a_sweep_is_used_for_that_gpu(tmp_path, monkeypatch):
    """`advisor calibrate --tune --sweep CSV` fine-tunes the shipped boosters on one GPU's points and stores the
    model beside the calibration; predictions for that GPU then use it, other GPUs keep the shipped model."""
    import advisor.model.predict as pred
    from advisor.cli import main
    from advisor.model.dataset import load_sweeps

    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    monkeypatch.setattr(pred, "_LOADED", {})
    sweep = ROOT / "benchmarks/data/h200_attention_collect2.csv.gz"
    assert main(["calibrate", "--tune", "--sweep", str(sweep)]) == 0
    folder = tmp_path / "calibration" / "NVIDIA_H200.model"
    meta = json.loads((folder / "latency_meta.json").read_text())
    assert meta["tuned"]["gpus"] == ["NVIDIA H200"] and meta["tuned"]["rows"] > 20
    from ceilings.hardware import resolve_gpu

    tuned, shipped = pred.model_for(resolve_gpu("h200")), pred.model_for(resolve_gpu("h100"))
    assert tuned is not shipped and tuned.meta.get("tuned") and not shipped.meta.get("tuned")
    data = load_sweeps([sweep])
    before = LatencyModel.load(MODEL_DIR).predict_log_ratio(data.x)[0]
    after = tuned.predict_log_ratio(data.x)[0]
    # fitted to these points, the tuned model is nearer to them than the shipped one
    assert np.mean(np.abs(after - data.y)) < np.mean(np.abs(before - data.y))
    assert main(["calibrate", "--sweep", str(sweep)]) == 2  # --sweep without --tune is refused


def test_feature_rows_are_written_as_the_model_sees_them(tmp_path):
    import csv
    import gzip

    data = rows_to_dataset(_rows((8, 2, 512, 1024), (16, 256)))
    path = data.write_features(tmp_path / "features.csv.gz")
    with gzip.open(path, "rt") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(data) and list(rows[0])[:6] == ["gpu", "shape", "case", "config", "ceiling_us",
                                                             "measured_us"]
    for i, r in enumerate(rows):
        assert r["config"] == data.config[i] and float(r["measured_us"]) == pytest.approx(data.measured_us[i])
        assert np.allclose([float(r[f]) for f in FEATURES], data.x[i], rtol=1e-5, atol=1e-6)
