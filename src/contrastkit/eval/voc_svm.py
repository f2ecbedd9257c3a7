"""One-vs-rest linear SVMs on frozen features, VOC2007 classification (many-shot and low-shot).

The protocol of SCE (Denize et al. 2023), Tables 9 and 10: Table 9 reports "the 11-point MAP
for VOC2007" of the linear protocol of Grill et al. (2020) / Ericsson et al. (2021); Table 10
follows Zheng et al. (2021b) and selects "16, 32, 64 or all images per class to train the
classifier". The SVM details are not in the papers; they follow the public benchmark code of
that lineage (PCL, ReSSL, FAIR's self-supervision benchmark):

* features L2-normalised, ``x / ||x||``;
* per class ``c`` one ``LinearSVC`` (squared hinge, L2 penalty, dual solver, class weight
  :attr:`SVMProtocol.positive_weight` = 2 for positives, 1 for negatives) trained on the
  ``trainval`` images labelled 1 or -1 for ``c``; difficult (0) images are left out of training
  and of the AP (:mod:`contrastkit.eval.average_precision`);
* low-shot: for each class ``c``, ``k`` positives and ``(C - 1) k`` negatives of ``c`` drawn at
  random (19 k for the 20 VOC classes); the SVM of class ``c`` sees exactly those images, the
  other training images are left out of it; repeated for several seeded draws (the public
  code: 5).

Our choice where the public code differs: the cost ``C`` of each class is chosen by stratified
k-fold cross-validation on the training images (mean held-out AP of the metric
:attr:`SVMProtocol.selection_metric`), never on ``test``. The public low-shot code trains
every cost and keeps the best on the test set, which favours its numbers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from contrastkit.data.sources.voc07 import ABSENT, DIFFICULT, PRESENT
from contrastkit.eval.average_precision import ap_all_point, ap_interpolated, ap_voc07

__all__ = ["VOC07_SVM", "SVMProtocol", "l2_normalize", "largest_low_shot", "sample_low_shot",
           "voc07_svm"]

AP_METRICS = {"ap_voc07": ap_voc07, "ap_all_point": ap_all_point,
              "ap_interpolated": ap_interpolated}


@dataclass(frozen=True)
class SVMProtocol:
    """Options of the one-vs-rest SVMs (defaults: the public lineage's solver settings; the
    cost grid and folds are our choice)."""

    costs: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
    folds: int = 3
    positive_weight: float = 2.0
    max_iter: int = 2000
    tol: float = 1e-4
    selection_metric: str = "ap_voc07"


VOC07_SVM = SVMProtocol()


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (float64); all-zero rows stay zero."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def sample_low_shot(targets: np.ndarray, shots: int, seed: int,
                    classes: list[str] | None = None) -> np.ndarray:
    """``(N, C)`` boolean mask of the images each class's SVM trains on: exactly ``shots``
    positives (label 1) and ``(C - 1) * shots`` negatives (label -1) of each class, drawn without
    replacement with ``numpy.random.default_rng(seed)``, class after class (positives, then
    negatives). Difficult images are never drawn.

    Raises:
        ValueError: naming a class with too few positives or negatives.
    """
    rng = np.random.default_rng(seed)
    num_classes = targets.shape[1]
    mask = np.zeros(targets.shape, dtype=bool)
    for c in range(num_classes):
        for flag, count, what in ((PRESENT, shots, "positive"),
                                  (ABSENT, (num_classes - 1) * shots, "negative")):
            pool = np.flatnonzero(targets[:, c] == flag)
            if pool.shape[0] < count:
                name = classes[c] if classes else str(c)
                raise ValueError(f"--shots {shots}: class {name} has {pool.shape[0]} {what} "
                                 f"training images, {count} are needed; pass --shots values "
                                 f"of at most {largest_low_shot(targets)}")
            mask[rng.choice(pool, size=count, replace=False), c] = True
    return mask


def largest_low_shot(targets: np.ndarray) -> int:
    """The largest ``shots`` :func:`sample_low_shot` can draw from ``targets`` (``(N, C)`` in
    {1, -1, 0}): every class needs ``shots`` positives and ``(C - 1) * shots`` negatives."""
    num_classes = targets.shape[1]
    positives = (targets == PRESENT).sum(axis=0)
    negatives = (targets == ABSENT).sum(axis=0) // max(num_classes - 1, 1)
    return int(min(positives.min(), negatives.min()))


def _svm(cost: float, protocol: SVMProtocol, seed: int) -> object:
    try:
        from sklearn.svm import LinearSVC
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the VOC07 SVMs need scikit-learn: pip install "
                          "'contrastkit[eval]'") from err
    return LinearSVC(C=cost, class_weight={1: protocol.positive_weight, -1: 1.0},
                     penalty="l2", loss="squared_hinge", dual=True, tol=protocol.tol,
                     max_iter=protocol.max_iter, random_state=seed)


def _fit(x: np.ndarray, y: np.ndarray, cost: float, protocol: SVMProtocol, seed: int) -> object:
    from sklearn.exceptions import ConvergenceWarning

    clf = _svm(cost, protocol, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x, y)  # type: ignore[attr-defined]
    return clf


def choose_cost(x: np.ndarray, y: np.ndarray, protocol: SVMProtocol,
                seed: int) -> tuple[float, list[float]]:
    """The cost of ``protocol.costs`` with the best mean held-out AP over stratified folds of
    ``(x, y)`` (``y`` in {1, -1}); ties go to the smaller cost. Returns it and the mean AP of
    every cost.

    Raises:
        ValueError: when a class has fewer images than two folds need.
    """
    from sklearn.model_selection import StratifiedKFold

    smallest = int(min((y == 1).sum(), (y == -1).sum()))
    folds = min(protocol.folds, smallest)
    if folds < 2:
        raise ValueError(f"cost selection needs at least 2 positive and 2 negative training "
                         f"images per class, got {smallest}")
    metric = AP_METRICS[protocol.selection_metric]
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    means = []
    for cost in protocol.costs:
        values = []
        for fit_idx, held_idx in splitter.split(x, y):
            clf = _fit(x[fit_idx], y[fit_idx], cost, protocol, seed)
            values.append(metric(clf.decision_function(x[held_idx]), y[held_idx]))  # type: ignore[attr-defined]
        means.append(float(np.mean(values)))
    return float(protocol.costs[int(np.argmax(means))]), means


def _one_class(x: np.ndarray, y: np.ndarray, test: np.ndarray, protocol: SVMProtocol,
               seed: int) -> tuple[np.ndarray, float, list[float]]:
    """Test scores, chosen cost and cross-validation APs of one class's SVM."""
    cost, cv = choose_cost(x, y, protocol, seed)
    return _fit(x, y, cost, protocol, seed).decision_function(test), cost, cv  # type: ignore[attr-defined]


def voc07_svm(train_features: np.ndarray, train_targets: np.ndarray,
              test_features: np.ndarray, test_targets: np.ndarray, *,
              protocol: SVMProtocol = VOC07_SVM, seed: int = 0,
              subset: np.ndarray | None = None, jobs: int = 1) -> dict:
    """Train the one-vs-rest SVMs on ``train`` and score ``test`` (module docstring).

    Args:
        train_features, test_features: ``(N, D)`` features (L2-normalised here).
        train_targets, test_targets: ``(N, C)`` in {1, -1, 0 difficult}.
        protocol: SVM options.
        seed: seed of the folds and of the solver.
        subset: optional ``(N_train, C)`` mask from :func:`sample_low_shot`: the images each
            class's SVM trains on (low-shot); ``None``: every non-difficult image.
        jobs: classes trained in parallel (joblib processes; the results do not depend on it).

    Returns:
        ``{"ap_voc07": [per class], "ap_all_point": [...], "ap_interpolated": [...],
        "map_voc07": float, "map_all_point": float, "map_interpolated": float,
        "costs": [chosen per class], "cv_ap": [[mean AP per cost] per class],
        "num_positives": [per class], "num_negatives": [per class],
        "scores": (N_test, C) array}``.
    """
    from joblib import Parallel, delayed

    xtr, xte = l2_normalize(train_features), l2_normalize(test_features)
    if xtr.shape[1] != xte.shape[1] or train_targets.shape[1] != test_targets.shape[1]:
        raise ValueError("train and test features or classes differ in size")
    tasks, counts, negatives = [], [], []
    for c in range(train_targets.shape[1]):
        label = train_targets[:, c]
        keep = label != DIFFICULT
        if subset is not None:
            keep &= subset[:, c]
        y = label[keep].astype(np.int64)
        tasks.append(delayed(_one_class)(xtr[keep], y, xte, protocol, seed))
        counts.append(int((y == PRESENT).sum()))
        negatives.append(int((y == ABSENT).sum()))
    # processes, whatever joblib's context says: liblinear draws from the C library's one
    # random state, so SVMs trained in threads of one process would change each other's draws
    runs = Parallel(n_jobs=jobs, backend="loky")(tasks)
    scores = np.stack([r[0] for r in runs], axis=1)
    out: dict = {name: [metric(scores[:, c], test_targets[:, c]) for c in range(len(runs))]
                 for name, metric in AP_METRICS.items()}
    for name in AP_METRICS:
        out["map" + name[2:]] = float(np.mean(out[name]))
    out.update(costs=[r[1] for r in runs], cv_ap=[r[2] for r in runs], num_positives=counts,
               num_negatives=negatives, scores=scores)
    return out
