"""Hand-written summaries of the reproduction study (the shape of ``runs/repro/summary.json``)
for the verdict and report tests: their expected verdicts follow from the rules in
:mod:`studies.repro.verdicts`."""

from __future__ import annotations

#: A clean commit that no round of the study names (the runs of a fake summary are not
#: counted in any round's measured cost unless a test says so).
CLEAN = {"commits": ["f" * 40], "dirty": False, "torch": "2.13.0+cpu", "lightning": "2.6.6",
         "numpy": "2.4.6", "cpu": "AMD EPYC", "omp_num_threads": "1", "gpu": None}


def run_entry(stem, seed, metrics, tag="cpu", finished=True, epochs=30, provenance=CLEAN):
    return {f"{tag}/{stem}/seed{seed}": {
        "part": tag.split("-e")[0], "tag": tag, "config": f"configs/repro/cpu/{stem}.yaml",
        "stem": stem, "seed": seed, "epochs": epochs, "pretrain_finished": finished,
        "evals_done": [], "status": "done", "metrics": metrics, "figures": {},
        "provenance": dict(provenance) if provenance else {}}}


def comparison_entry(a, b, protocol, seed, low, high, diff, tag="cpu"):
    return {f"{tag}/{a}__vs__{b}/{protocol}/seed{seed}": {
        "difference": diff, "ci_low": low, "ci_high": high, "confidence": 0.95,
        "verdict": "significant" if low > 0 or high < 0 else "not significant",
        "num_test": 2000, "accuracy_a": 0.8, "accuracy_b": 0.8 - diff, "n_resamples": 1000}}


#: Target-noise margins of SINCERE per seed (SupCon's are 0.10): paired gaps 0.20, 0.21, 0.22.
SINCERE_MARGINS = (0.30, 0.31, 0.32)
#: The grid cells the fake summaries' tunings chose: the run folders of the tuned runs (the
#: extension's cells, with App. J's warm-up); ReSSL's grid chose its config's own setting,
#: whose folder is the study's ``ressl``.
SINCERE_CELL, SUPCON_CELL = "sincere_t0.2_lr0.02_warmup", "supcon_t0.1_lr0.05_warmup"
RESSL_CELL = "ressl_t0.1_tm0.04"
#: SINCERE's label once chosen.
SINCERE_TUNED = "SINCERE (tuned: t=0.2, lr=0.02, warm-up=0.0125, warm-up start=0.001)"
SUPCON_TUNED = "SupCon (tuned: t=0.1, lr=0.05, warm-up=0.0125, warm-up start=0.001)"


def fake_choices():
    """``choices`` of a summary whose grids chose :data:`SINCERE_CELL`, :data:`SUPCON_CELL`
    and :data:`RESSL_CELL` (validation scores: the chosen cell 0.5, the others less)."""
    out = {}
    for loss, chosen in (("sincere", SINCERE_CELL), ("supcon", SUPCON_CELL)):
        cells = [f"{loss}_t{t}_lr{lr}_warmup" for t in ("0.1", "0.2") for lr in ("0.02", "0.05")]
        out[loss] = {"chosen": chosen,
                     "scores": {c: 0.5 if c == chosen else 0.4 for c in cells}}
    cells = [f"ressl_t{t}_tm{tm}" for t in ("0.1", "0.2") for tm in ("0.04", "0.07")]
    out["ressl"] = {"chosen": RESSL_CELL,
                    "scores": {c: 0.5 if c == RESSL_CELL else 0.4 for c in cells}}
    return out


def fake_sincere_summary(seeds=(0, 1, 2)):
    """Study ``sincere`` with its tuned runs in the chosen grid cells' folders: SINCERE's margin
    wider in every seed (reproduced), its loss falling by 1 against SupCon's 2 (reversed),
    1-NN within the equivalence margin, 5-NN far below it, and the random-init baseline."""
    runs, comps = {}, {}
    for seed in seeds:
        runs |= run_entry(SINCERE_CELL, seed, {
            "analyze_projector/target_noise_margin": SINCERE_MARGINS[seed],
            "pretrain/initial_loss": 6.0, "pretrain/final_loss": 5.0,
            "knn1_projector/top1": 0.80 + 0.001 * seed, "knn5_projector/top1": 0.70 + 0.01 * seed,
            "knn1/top1": 0.80 + 0.001 * seed})
        runs |= run_entry(SUPCON_CELL, seed, {
            "analyze_projector/target_noise_margin": 0.10, "pretrain/initial_loss": 6.0,
            "pretrain/final_loss": 4.0, "knn1_projector/top1": 0.79, "knn5_projector/top1": 0.78,
            "knn1/top1": 0.79})
        runs |= run_entry("random_init", seed, {"knn1_projector/top1": 0.30 + 0.01 * seed,
                                                "knn5_projector/top1": 0.31,
                                                "knn1/top1": 0.30 + 0.01 * seed})
        comps |= comparison_entry(SINCERE_CELL, SUPCON_CELL, "knn1_projector", seed, -0.01,
                                  0.03, 0.01 + 0.001 * seed)
        comps |= comparison_entry(SINCERE_CELL, SUPCON_CELL, "knn5_projector", seed, -0.12,
                                  -0.04, -0.08 + 0.01 * seed)
    return {"runs": runs, "comparisons": comps, "choices": fake_choices()}
