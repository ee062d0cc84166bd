"""The latency model: feature rows from a ceiling (`features`), training and prediction (`predict`),
and the numpy export of the trees that predicts without XGBoost (`trees`). Launches whose work comes
from the generic path are predicted by the transfer model (`transfer`, fitted on other libraries'
kernels), the rest by the shipped model; `routing` serves both as one. The trained files live in
`models/` (the transfer model's in `models/transfer/`).

Imports only `ceilings`, `kernels` and `advisor.capture`; never measurement or advice, so a machine
without a GPU can predict.
"""
