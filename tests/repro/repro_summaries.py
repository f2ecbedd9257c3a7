"""Hand-written summaries of the reproduction study (the shape of ``runs/repro/summary.json``)
for the verdict and report tests: their expected verdicts follow from the rules in
:mod:`studies.repro.verdicts`."""

from __future__ import annotations


def run_entry(stem, seed, metrics, tag="cpu", finished=True, epochs=30):
    return {f"{tag}/{stem}/seed{seed}": {
        "part": tag.split("-e")[0], "tag": tag, "config": f"configs/repro/cpu/{stem}.yaml",
        "stem": stem, "seed": seed, "epochs": epochs, "pretrain_finished": finished,
        "evals_done": [], "status": "done", "metrics": metrics, "figures": {}}}


def comparison_entry(a, b, protocol, seed, low, high, diff, tag="cpu"):
    return {f"{tag}/{a}__vs__{b}/{protocol}/seed{seed}": {
        "difference": diff, "ci_low": low, "ci_high": high, "confidence": 0.95,
        "verdict": "significant" if low > 0 or high < 0 else "not significant",
        "num_test": 2000, "accuracy_a": 0.8, "accuracy_b": 0.8 - diff, "n_resamples": 1000}}


#: Target-noise margins of SINCERE per seed (SupCon's are 0.10): paired gaps 0.20, 0.21, 0.22.
SINCERE_MARGINS = (0.30, 0.31, 0.32)
#: The grid cells the fake summaries' tunings chose: the run folders of the tuned runs.
SINCERE_CELL, SUPCON_CELL = "sincere_t0.1_lr0.2", "supcon_t0.05_lr0.05"


def fake_choices():
    """``choices`` of a summary whose grids chose :data:`SINCERE_CELL` and
    :data:`SUPCON_CELL` (validation scores: the chosen cell 0.5, the others less)."""
    out = {}
    for loss, chosen in (("sincere", SINCERE_CELL), ("supcon", SUPCON_CELL)):
        cells = [f"{loss}_t{t}_lr{lr}" for t in ("0.05", "0.1") for lr in ("0.05", "0.2")]
        out[loss] = {"chosen": chosen,
                     "scores": {c: 0.5 if c == chosen else 0.4 for c in cells}}
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
            "knn1/top1": 0.80 + 0.001 * seed})  # the backbone's: the gain over random init
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
    return {"generated": "2026-01-01T00:00:00+00:00", "runs": runs, "comparisons": comps,
            "choices": fake_choices()}
