"""The transfer model for generic-path launches (advisor.model.transfer) and the routing that serves it
beside the shipped model (advisor.model.routing)."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from advisor.model.features import FEATURES
from advisor.model.predict import MODEL_DIR, LatencyModel
from advisor.model.routing import RoutedModel, generic_rows
from advisor.model.transfer import (
    CANDIDATES,
    TRANSFER_DIR,
    TransferModel,
    conformal_band,
    fit_transfer,
    mape_level,
)
from ceilings.errors import AdvisorError
from ceilings.hardware import resolve_gpu

ROOT = Path(__file__).resolve().parents[1]
GENERIC = FEATURES.index("generic_path")


def test_the_prior_is_the_constant_of_least_percentage_error():
    rng = np.random.default_rng(0)
    y = rng.lognormal(0.5, 0.8, 301)  # log ratios, a long right tail as the corpus has
    level = mape_level(y)
    grid = np.linspace(y.min(), y.max(), 4001)
    mape = [np.abs(np.exp(g - y) - 1).mean() for g in grid]
    assert np.abs(np.exp(level - y) - 1).mean() <= min(mape) + 1e-3
    assert level < np.median(y)  # the percentage error punishes over-prediction more: below the median


def test_the_conformal_band_holds_the_share_it_claims():
    rng = np.random.default_rng(1)
    residuals = rng.standard_t(3, 2000) * 0.3 + 0.2
    lo, hi = conformal_band(residuals[:1000])
    held = residuals[1000:]
    assert lo < 0.2 < hi
    assert 0.75 <= np.mean((held >= lo) & (held <= hi)) <= 0.85


def _synthetic(rows_per_library: int = 120, seed: int = 0):
    """Rows of three libraries whose efficiency depends on occupancy the same way in each, at a level of
    their own."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3 * rows_per_library, len(FEATURES))).astype(np.float32)
    x[:, GENERIC] = 1.0
    library = np.repeat(np.array(["a", "b", "c"]), rows_per_library)
    offset = {"a": 0.5, "b": 0.7, "c": 0.6}
    y = np.array([offset[lib] for lib in library]) + 0.4 * np.abs(x[:, FEATURES.index("occupancy_warps")])
    return x, y + rng.normal(0, 0.05, len(y)), library


def test_each_gpu_gets_the_band_of_its_own_residuals_and_an_unknown_gpu_the_pooled_one(tmp_path):
    x, y, library = _synthetic(rows_per_library=240)
    key = [FEATURES.index(f) for f in ("sms", "clock_ghz", "dram_tbs")]
    gpu = np.where(np.arange(len(y)) % 2 == 0, "h100", "h200")
    x[:, key] = np.where((gpu == "h100")[:, None], [132, 1.98, 3.35], [132, 1.98, 4.8])
    y = y + np.random.default_rng(3).normal(0, 1, len(y)) * np.where(gpu == "h100", 0.02, 0.4)
    candidates = {k: v for k, v in CANDIDATES.items() if v is None or v == ("transfer", 2, 50)}
    model = TransferModel.load(fit_transfer(x, y, library, launch=[str(i // 6) for i in range(len(y))],
                                            candidates=candidates, row_gpus=gpu).save(tmp_path))
    lo, hi = model.bands(x)
    h100, h200 = gpu == "h100", gpu == "h200"
    assert np.all(hi[h200] - lo[h200] > 2 * (hi[h100] - lo[h100]))  # the noisy GPU's band, not a shared one
    assert hi[h100][0] - lo[h100][0] < model.band[1] - model.band[0] < hi[h200][0] - lo[h200][0]
    other = x[:3].copy()
    other[:, key] = [108, 1.41, 2.04]  # an A100: no band of its own
    np.testing.assert_allclose(np.stack(model.bands(other)), np.array([[model.band[0]] * 3, [model.band[1]] * 3]))


def test_fitted_saved_and_loaded_it_predicts_the_same_without_xgboost(tmp_path):
    x, y, library = _synthetic()
    candidates = {k: v for k, v in CANDIDATES.items() if v is None or v[1:] == (2, 50)}
    model = fit_transfer(x, y, library, ["NVIDIA H100 80GB HBM3"], [f"l{i // 6}" for i in range(len(y))],
                         candidates=candidates)
    assert model.meta["candidate"] != "level only"  # the trees learn what all three libraries share
    assert model.band[0] < 0 < model.band[1] and model.meta["ranking_sd"] > 0
    mid, lo, hi = model.predict_log_ratio(x)
    loaded = TransferModel.load(model.save(tmp_path))
    assert not hasattr(loaded.median, "save_raw")  # the numpy export, no XGBoost needed
    lmid, llo, lhi = loaded.predict_log_ratio(x)
    np.testing.assert_allclose(lmid, mid, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lhi - lmid, hi - mid, atol=1e-6)
    assert (lmid >= 0).all() and (llo <= lmid).all() and (lhi >= lmid).all()
    assert loaded.distance(x[:5]).max() <= loaded.support.threshold  # its own rows are inside its data
    with pytest.raises(AdvisorError, match="2 or more"):
        fit_transfer(x[library == "a"], y[library == "a"], library[library == "a"])
    with pytest.raises(AdvisorError, match="no transfer model"):
        TransferModel.load(tmp_path / "none")


@pytest.fixture(scope="module")
def gemm_row():
    from advisor.advice.ceiling import family_ceiling
    from advisor.model.features import feature_row
    from ceilings.launch import Config

    gpu = resolve_gpu("h100")
    c = family_ceiling("kernels/gemm.py", "4096,4096,4096", gpu)
    row = feature_row(c, c.demand, Config.from_dict(c.config), gpu.spec)
    return c.ceiling_us, np.array([[row[f] for f in FEATURES]], dtype=np.float32)


def test_generic_rows_go_to_the_transfer_model_and_exact_rows_to_the_shipped_one(gemm_row):
    ceiling_us, exact = gemm_row
    generic = exact.copy()
    generic[0, GENERIC] = 1.0
    shipped = LatencyModel.load(MODEL_DIR, boosters=False)
    transfer = TransferModel(0.3, None, (-0.2, 0.9), {"features": [], "ranking_sd": 0.25})
    routed = RoutedModel(shipped, transfer)
    both = np.concatenate([exact, generic, exact])
    assert generic_rows(both).tolist() == [False, True, False]
    mid, lo, hi = routed.predict_us(np.full(3, ceiling_us), both)
    smid, slo, shi = shipped.predict_us(np.array([ceiling_us]), exact)
    assert mid[0] == mid[2] == pytest.approx(smid[0]) and (lo[0], hi[0]) == pytest.approx((slo[0], shi[0]), rel=1e-5)
    assert mid[1] == pytest.approx(ceiling_us * math.exp(0.3))
    assert (lo[1], hi[1]) == pytest.approx((ceiling_us * math.exp(0.1), ceiling_us * math.exp(1.2)))
    assert routed.meta["intervals"]["ranking_sd_generic"] == 0.25
    assert routed.meta["intervals"]["ranking_sd"] == shipped.meta["intervals"]["ranking_sd"]
    # Without support the transfer model calls nothing outside; the shipped rows keep their own notes.
    notes = routed.outside_notes(both)
    assert notes[1] == [] and notes[0] == notes[2] == shipped.outside_notes(exact)[0]


def test_the_product_routes_with_the_shipped_transfer_model(gemm_row, monkeypatch, tmp_path):
    import advisor.model.predict as pred

    monkeypatch.setattr(pred, "_LOADED", {})
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))  # no tuned model of the user's
    model = pred.model_for(resolve_gpu("h100"))
    assert isinstance(model, RoutedModel)
    assert model.transfer.meta["candidate"] in CANDIDATES and model.transfer.meta["libraries"]
    ceiling_us, exact = gemm_row
    # The shipped families keep the shipped model's prediction (no in-family change).
    np.testing.assert_allclose(model.predict_us(np.array([ceiling_us]), exact),
                               LatencyModel.load(MODEL_DIR).predict_us(np.array([ceiling_us]), exact), rtol=1e-5)
    assert (TRANSFER_DIR / "transfer_meta.json").exists()


def test_a_transfer_model_given_by_its_folder_replaces_the_shipped_one(gemm_row, monkeypatch, tmp_path):
    """TRITON_ADVISOR_TRANSFER_MODEL names a folder check_transfer.py wrote (e.g. one fitted without a
    library, for the held-out advice check): generic-path launches are predicted by it and its spread sets
    the close-call margin; the shipped families' launches keep the shipped model."""
    import advisor.model.predict as pred

    monkeypatch.setattr(pred, "_LOADED", {})
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path / "home"))
    held = TransferModel(0.7, None, (-0.1, 0.4), {"features": [], "ranking_sd": 0.123}).save(tmp_path / "held")
    ceiling_us, exact = gemm_row
    generic = exact.copy()
    generic[0, GENERIC] = 1.0
    shipped = pred.model_for(resolve_gpu("h100"))
    monkeypatch.setenv(pred.TRANSFER_MODEL_ENV, str(held))
    given = pred.model_for(resolve_gpu("h100"))
    assert given is not shipped and given.transfer.level == 0.7
    assert given.meta["intervals"]["ranking_sd_generic"] == 0.123
    assert given.predict_us(np.array([ceiling_us]), generic)[0][0] == pytest.approx(ceiling_us * math.exp(0.7))
    np.testing.assert_allclose(given.predict_us(np.array([ceiling_us]), exact),
                               shipped.predict_us(np.array([ceiling_us]), exact))
    monkeypatch.delenv(pred.TRANSFER_MODEL_ENV)
    assert pred.model_for(resolve_gpu("h100")) is shipped


def test_a_transfer_model_folder_without_a_model_is_a_one_line_user_error(capsys, monkeypatch, tmp_path):
    import advisor.model.predict as pred
    from advisor.cli import main

    monkeypatch.setattr(pred, "_LOADED", {})
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    monkeypatch.setenv(pred.TRANSFER_MODEL_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(AdvisorError, match="TRITON_ADVISOR_TRANSFER_MODEL=.*nowhere.*transfer_meta.json missing"):
        pred.model_for(resolve_gpu("h100"))
    fixtures = ROOT / "tests" / "fixtures"
    assert main(["predict", str(fixtures / "matmul_kernel.py"), "--launch", str(fixtures / "matmul_launch.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "TRITON_ADVISOR_TRANSFER_MODEL" in err and "\n" not in err and "Traceback" not in err


def test_a_generic_corpus_launch_is_predicted_within_its_band():
    """The H100 corpus points (generic-path features rebuilt from their ceilings' records): the shipped
    transfer model's band holds most measured times. They are its training rows, so this guards the shipped
    file; held-out figures are in benchmarks/RESULTS.md section 18."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "corpus"))
    check_model = pytest.importorskip("check_model")
    rows = check_model.corpus_rows()
    if not rows:
        pytest.skip("no corpus ceilings here")
    x = check_model.matrix(rows)
    ceiling = np.array([r["ceiling_us"] for r in rows])
    measured = np.array([r["measured_us"] for r in rows])
    model = TransferModel.load()
    mid, lo, hi = model.predict_us(ceiling, x)
    inside = (lo <= measured) & (measured <= hi)
    assert 0.7 <= inside.mean() <= 0.95
    assert np.mean(np.abs(mid / measured - 1)) < np.mean(np.abs(ceiling / measured - 1))
    # one launch's own config, by the product's route
    routed = RoutedModel(LatencyModel.load(MODEL_DIR, boosters=False), model)
    i = next(i for i, r in enumerate(rows) if r["recorded"] and inside[i])
    one = routed.predict_us(ceiling[i:i + 1], x[i:i + 1])
    assert one[1][0] <= measured[i] <= one[2][0] and one[0][0] == pytest.approx(mid[i])


def test_a_close_call_on_a_generic_launch_uses_the_transfer_models_spread():
    from types import SimpleNamespace

    from test_confidence import _gemm_advice

    from advisor.advice.search import close_call

    advice = _gemm_advice(1.25)
    model = SimpleNamespace(meta={"intervals": {"ranking_sd": 0.1, "ranking_sd_outside": 0.3,
                                                "ranking_sd_generic": 0.25}})
    assert close_call(advice, model) == []  # exact demand: the in-family spread, 1.25x is a claim
    advice.current.ceiling = dataclasses.replace(advice.current.ceiling,
                                                 demand_source="generic (SASS x evaluated control flow)")
    assert close_call(advice, model)  # generic: margin exp(0.8416 sqrt(2) 0.25) = 1.35x
    assert close_call(_gemm_advice(1.5), model) == []


def test_advisor_predict_on_a_kernel_of_no_shipped_family_uses_the_transfer_model(capsys, monkeypatch, tmp_path):
    """`advisor predict` on a kernel file and launch (the generic path): the 80% band is the transfer model's
    band about its median (the shipped model's quantile band has another shape)."""
    import json

    import advisor.model.predict as pred
    from advisor.cli import main

    monkeypatch.setattr(pred, "_LOADED", {})
    monkeypatch.setenv("TRITON_ADVISOR_HOME", str(tmp_path))
    fixtures = ROOT / "tests" / "fixtures"
    assert main(["predict", str(fixtures / "matmul_kernel.py"), "--launch", str(fixtures / "matmul_launch.json"),
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["demand_source"].startswith("generic")
    model = TransferModel.load()
    h100_row = np.zeros((1, len(FEATURES)), np.float32)
    h100_row[0, [FEATURES.index(f) for f in ("sms", "clock_ghz", "dram_tbs")]] = (132, 1.98, 3.35)
    band = [float(b[0]) for b in model.bands(h100_row)]
    mid, (lo, hi) = doc["predicted_us"], doc["predicted_interval_us"]
    assert doc["ceiling_us"] <= mid <= doc["ceiling_us"] * math.exp(2.0)
    assert hi / mid == pytest.approx(math.exp(band[1]), rel=1e-3)
    assert lo == pytest.approx(max(mid * math.exp(band[0]), doc["ceiling_us"]), rel=1e-3)
