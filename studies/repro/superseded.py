"""What the revised page replaces: the labels of the page at :data:`PREVIOUS_COMMIT` and the runs
it read where issue 54's round trains them again.

Issue 54 revised the verdict rules (:mod:`studies.repro.rules`) after a review of the page at
commit 0f3dae1 (``git show 0f3dae1:docs/reproduction.md``), and retrains the runs of studies 1,
1b and 5 (:data:`studies.repro.plan.ROUND_THREE`). Three things are kept here:

* :data:`PREVIOUS`: every Part A claim's label and role on that page, shown beside each label
  the revised rules change;
* the runs that page read for the claims the round retrains (``docs/reproduction/superseded.json``,
  an extract of ``git show 0f3dae1:docs/reproduction.json``; their records are replaced by the
  retrained ones): until a claim's rerun has finished, the verdicts judge these runs by the
  revised rules and show the result beside *pending* (:func:`superseded_runs`,
  :func:`previous_study`);
* the first round's DySTreSS and SimCLR t = 0.2 runs (commit :data:`FIRST_ROUND_COMMIT`, the same
  file), whose uniformity went the paper's way where the second round's, on identical configs,
  did not: the headline pools the two rounds' seeds.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

from studies.repro import layout
from studies.repro.schema import Study
from studies.repro.studies import STUDIES
from studies.repro.tuning import resolve

#: The page whose labels the revised rules replace (issue 54's review read it).
PREVIOUS_COMMIT = "0f3dae1"
#: The first round's page (issue 25), whose DySTreSS runs the second round trained again.
FIRST_ROUND_COMMIT = "b27d5e1"
#: The extract of those pages' summaries kept in git (see the module docstring).
SUPERSEDED_RUNS = "docs/reproduction/superseded.json"

#: The verdict of a claim of issue 54's round while its runs are not all trained.
PENDING = "pending rerun (issue 54)"

#: Each Part A claim's label on the page at 0f3dae1 (its results table) and its role there.
PREVIOUS: dict[str, tuple[str, str]] = {
    "sincere-margin": ("reproduced", "primary"),
    "sincere-loss": ("reproduced", "primary"),
    "sincere-knn1": ("not reproduced", "primary"),
    "sincere-knn5": ("not reproduced", "primary"),
    "cifar2-margin": ("not reproduced", "primary"),
    "cifar2-loss": ("not reproduced", "primary"),
    "cifar2-knn1": ("not reproduced", "primary"),
    "cifar2-knn5": ("not reproduced", "primary"),
    "t-uniformity": ("reproduced", "primary"),
    "t-tolerance": ("reproduced", "primary"),
    "t-local-separation": ("reproduced", "primary"),
    "t-uniformity-backbone": ("reversed at this scale", "beside"),
    "t-tolerance-backbone": ("reversed at this scale", "beside"),
    "t-local-separation-backbone": ("reproduced", "beside"),
    "sce-l0": ("not testable at this scale", "primary"),
    "sce-l1": ("not testable at this scale", "primary"),
    "sce-ceil": ("not testable at this scale", "primary"),
    "sce-taum": ("not testable at this scale", "primary"),
    "dys-knn": ("not testable at this scale", "primary"),
    "dys-knn-best": ("reversed at this scale", "beside"),
    "dys-unif": ("not reproduced", "primary"),
    "dys-interclass": ("not testable at this scale", "primary"),
    "dys-align": ("not comparable", "not_comparable"),
    "b-moco": ("not testable at this scale", "primary"),
    "b-ressl-moco": ("reversed at this scale", "primary"),
    "b-ressl": ("reproduced", "primary"),
}

#: Why issue 54's round trains each of its claim studies again.
RERUN_WHY: dict[str, str] = {
    "sincere": "each loss's grid chose its corner (t 0.1, lr 0.05: the highest temperature and "
               "lowest learning rate tried) without SINCERE App. J's warm-up; the grid is "
               "extended around it with the warm-up (study 1a)",
    "cifar2": "its runs take the CIFAR-10 grid's choice, which the extended grid makes again "
              "(study 1a)",
    "baselines": "its SCE, MoCo v2, ReSSL and random-init records name no commit (first "
                 "round), and ReSSL ran at its authors' 200-epoch temperatures while SCE and "
                 "MoCo v2 ran at SCE's CIFAR-10 settings; retrained at one recorded commit, "
                 "ReSSL at the setting its grid chooses (study 5a)",
}

#: The cell of each tuning grid that the runs at 0f3dae1 had: the first grid's choice for
#: SINCERE and SupCon (a CIFAR-2 run, trained on its own config, then had its config's folder);
#: ReSSL untuned, at its config's own setting, the grid's cell ``ressl``.
PREVIOUS_CHOICES = {"sincere": "sincere_t0.1_lr0.05", "supcon": "supcon_t0.1_lr0.05",
                    "ressl": "ressl_t0.1_tm0.04"}


def superseded_runs(commit: str) -> dict:
    """The summary extract of the page at ``commit`` (:data:`PREVIOUS_COMMIT` or
    :data:`FIRST_ROUND_COMMIT`): ``runs`` and ``comparisons`` as that summary held them.

    Raises:
        FileNotFoundError: when the checkout lacks :data:`SUPERSEDED_RUNS`.
        KeyError: for a commit the file does not hold.
    """
    path = layout.REPO / SUPERSEDED_RUNS
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the runs the revised page replaces are read "
                                "from it (a checkout of the repository has it)")
    return _read(path)[commit]


@cache
def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def previous_study(study: Study) -> Study:
    """``study`` as defined (:data:`studies.repro.studies.STUDIES`, whatever its tuned runs
    were resolved to) with each tuned run resolved as the runs at :data:`PREVIOUS_COMMIT` were
    (:data:`PREVIOUS_CHOICES`), so that its claims read the superseded runs."""
    study = replace(STUDIES.get(study.name, study), seeds=study.seeds)
    variants = []
    for v in study.variants:
        if v.tuning is None:
            variants.append(v)
            continue
        cells = (*v.tuning.grid, *v.tuning.bounds)
        cell = next(c for c in cells if c.name == PREVIOUS_CHOICES[v.tuning.name])
        resolved = resolve(v, cell)
        resolved = replace(resolved, label=resolved.label.replace("(tuned: ",
                                                                  f"({PREVIOUS_COMMIT}: "))
        variants.append(resolved if v.tuning.reuse else replace(resolved, folder=None))
    return replace(study, variants=tuple(variants))
