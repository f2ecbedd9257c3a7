"""Evaluation and analysis of frozen features (tensor level).

kNN (Wu et al. 2018, eq. 8; the protocols of DySTreSS, Manna et al. 2023, and SINCERE, Feeney &
Hughes 2023, App. M), retrieval recall (SCE, Denize et al. 2023, Table 19), paired bootstrap of
accuracy differences (Feeney & Hughes 2023, App. M), linear probes (Denize et al. 2023,
appendix D, Table 10), embedding metrics (Manna et al. 2023, eqs. 4, 16-18; Wang & Liu 2021;
Feeney & Hughes 2023, Table 1, Thm. 11) and figures
(:mod:`contrastkit.eval.plots`, imported on demand because it needs matplotlib).
"""

from contrastkit.eval.bootstrap import (
    bootstrap_accuracy,
    bootstrap_accuracy_difference,
    significance_verdict,
)
from contrastkit.eval.knn import knn_accuracy, knn_predict, nearest_neighbors, topk_accuracy
from contrastkit.eval.linear import (
    SCE_D1,
    SCE_D2,
    LinearProtocol,
    classification_report,
    linear_probe,
    lowshot_linear,
    mean_per_class_accuracy,
    sample_per_class,
)
from contrastkit.eval.linear_images import train_linear_on_images
from contrastkit.eval.metrics import (
    alignment,
    class_centroids,
    hardness_weights,
    interclass_uniformity,
    local_separation,
    sincere_kl_bound,
    target_noise_margin,
    tolerance,
    uniformity,
)
from contrastkit.eval.retrieval import retrieval_recall
from contrastkit.eval.video import SCE_D3

__all__ = [
    "SCE_D1",
    "SCE_D2",
    "SCE_D3",
    "LinearProtocol",
    "alignment",
    "bootstrap_accuracy",
    "bootstrap_accuracy_difference",
    "class_centroids",
    "classification_report",
    "hardness_weights",
    "interclass_uniformity",
    "knn_accuracy",
    "knn_predict",
    "linear_probe",
    "local_separation",
    "lowshot_linear",
    "mean_per_class_accuracy",
    "nearest_neighbors",
    "retrieval_recall",
    "sample_per_class",
    "significance_verdict",
    "sincere_kl_bound",
    "target_noise_margin",
    "tolerance",
    "topk_accuracy",
    "train_linear_on_images",
    "uniformity",
]
