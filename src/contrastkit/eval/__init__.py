"""Evaluation and analysis of frozen features: one call per checkpoint and dataset
(:func:`evaluate` with an :class:`EvalRequest` and a protocol, :func:`analyze`; the functions
under ``contrastkit eval`` and ``contrastkit analyze``), and the tensor-level pieces below them.

kNN (Wu et al. 2018, eq. 8; the protocols of DySTreSS, Manna et al. 2023, and SINCERE, Feeney &
Hughes 2023, App. M), retrieval recall (SCE, Denize et al. 2023, Table 19), paired bootstrap of
accuracy differences (Feeney & Hughes 2023, App. M), linear probes (Denize et al. 2023,
appendix D, Table 10), embedding metrics (Manna et al. 2023, eqs. 4, 16-18; Wang & Liu 2021;
Feeney & Hughes 2023, Table 1, Thm. 11) and figures
(:mod:`contrastkit.eval.plots`, imported on demand because it needs matplotlib).
"""

from contrastkit.eval.analyze import AnalyzeOptions, analyze
from contrastkit.eval.bootstrap import (
    bootstrap_accuracy,
    bootstrap_accuracy_difference,
    significance_verdict,
)
from contrastkit.eval.classifier import LinearProtocol, train_classifier
from contrastkit.eval.knn import knn_accuracy, topk_accuracy
from contrastkit.eval.linear import (
    SCE_D1,
    SCE_D2,
    classification_report,
    linear_probe,
    lowshot_linear,
    mean_per_class_accuracy,
    sample_per_class,
    stratified_holdout,
    train_linear_on_images,
)
from contrastkit.eval.metrics import (
    alignment,
    class_centroids,
    hardness_weights,
    interclass_uniformity,
    local_separation,
    local_separation_gap,
    mean_pairwise_similarity,
    sincere_kl_bound,
    target_noise_margin,
    tolerance,
    uniformity,
)
from contrastkit.eval.protocols import (
    FinetuneEval,
    KnnEval,
    LinearEval,
    LowshotEval,
    RetrievalEval,
    evaluate,
)
from contrastkit.eval.retrieval import retrieval_recall
from contrastkit.eval.setup import EvalRequest
from contrastkit.eval.video import SCE_D3
from contrastkit.knn import knn_predict, nearest_neighbors

__all__ = [
    "SCE_D1",
    "SCE_D2",
    "SCE_D3",
    "AnalyzeOptions",
    "EvalRequest",
    "FinetuneEval",
    "KnnEval",
    "LinearEval",
    "LinearProtocol",
    "LowshotEval",
    "RetrievalEval",
    "alignment",
    "analyze",
    "bootstrap_accuracy",
    "bootstrap_accuracy_difference",
    "class_centroids",
    "classification_report",
    "evaluate",
    "hardness_weights",
    "interclass_uniformity",
    "knn_accuracy",
    "knn_predict",
    "linear_probe",
    "local_separation",
    "local_separation_gap",
    "lowshot_linear",
    "mean_pairwise_similarity",
    "mean_per_class_accuracy",
    "nearest_neighbors",
    "retrieval_recall",
    "sample_per_class",
    "significance_verdict",
    "sincere_kl_bound",
    "stratified_holdout",
    "target_noise_margin",
    "tolerance",
    "topk_accuracy",
    "train_classifier",
    "train_linear_on_images",
    "uniformity",
]
