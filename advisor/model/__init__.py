"""The latency model: feature rows from a ceiling (`features`), training and prediction (`predict`),
and the numpy export of the trees that predicts without XGBoost (`trees`). The trained files live
in `models/`.

Imports only `ceilings`, `kernels` and `advisor.capture`; never measurement or advice, so a machine
without a GPU can predict.
"""
