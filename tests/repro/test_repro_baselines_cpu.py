"""Study 6, the baselines of the papers' tables at CPU scale (issue 53): its definition, the
commands a dry run makes for it, its tables rendered from hand-written records (runs pending
and finished), its one-run verdict rules and its planned cost."""

from __future__ import annotations

import pytest
from repro_summaries import run_entry

from studies.repro import layout
from studies.repro.baselines_section import (
    EMBEDDING_DIMS,
    baselines_cpu_lines,
    cpu_result,
)
from studies.repro.cli import main
from studies.repro.collection import read_losses
from studies.repro.plan import (
    EVAL_SECONDS,
    REUSED_BY_BASELINES_ROUND,
    STEP_SECONDS,
    config_steps,
    planned_cost,
)
from studies.repro.report import cpu_study_order, render_report
from studies.repro.studies import (
    BASELINE_METHODS,
    BASELINES_CPU,
    RANDOM_INIT,
    SIMCLR_EVALS,
    STUDIES,
)
from studies.repro.trained import (
    collapsed_or_warned,
    learned_one_seed,
    random_init_spread,
)

STUDY = STUDIES[BASELINES_CPU]
STEMS = [stem for stem, _ in BASELINE_METHODS]
DYSTRESS_ARGS = ("--dystress", "0.07", "0.2")


def _row(lines, label):
    return next(line for line in lines if line.startswith(f"| {label} |"))


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


# --- the study ------------------------------------------------------------------------------
def test_the_study_is_one_seed_of_each_baseline_beside_the_shared_runs():
    assert (STUDY.part, STUDY.seeds, STUDY.claims, STUDY.number) == ("cpu", (0,), (), "6")
    assert [v.stem for v in STUDY.variants] == [*STEMS, "simclr_t0.2", "random_init"]
    assert STEMS == ["byol", "mocov3", "wmse", "swav", "dino", "nnclr", "barlow_twins",
                     "vicreg", "dclw"]
    for v in STUDY.variants[:9]:
        assert v.config == f"configs/repro/cpu/{v.stem}.yaml"
        assert (layout.REPO / v.config).is_file()
        # evaluated as the SimCLR rows: 200-NN, analyze on the backbone and on the projector,
        # with the DySTreSS run's arguments (inter-class uniformity beside DySTreSS's)
        assert v.evals == SIMCLR_EVALS == ("knn200", "analyze", "analyze_projector")
        assert v.analyze_args == DYSTRESS_ARGS and not v.overrides and v.tuning is None
    # the same runs as studies 2 and 4 (one folder, trained once) and every study's random init
    assert STUDY.variant("simclr_t0.2") == STUDIES["dystress"].variant("simclr_t0.2")
    assert STUDY.variant("random_init") is RANDOM_INIT
    assert set(EMBEDDING_DIMS) == {*STEMS, "simclr_t0.2"}
    # run after the other Part A studies (make repro-cpu's list: test_repro_report.py)
    assert cpu_study_order()[-1] == BASELINES_CPU


# --- the commands -----------------------------------------------------------------------------
def test_its_dry_run_trains_and_evaluates_each_run_of_seed_0_and_compares_nothing(
        monkeypatch, tmp_path, capsys):
    """``python -m studies.repro cpu --study baselines_cpu --dry-run`` in a checkout without
    records: every run of seed 0 pretrained and evaluated (in the real checkout the shared
    random init and SimCLR t = 0.2 are restored from their records instead)."""
    monkeypatch.setattr(layout, "REPO", tmp_path)
    (tmp_path / "configs" / "repro").mkdir(parents=True)
    assert main(["cpu", "--dry-run", "--study", BASELINES_CPU]) == 0
    lines = [line[2:].split() for line in capsys.readouterr().out.splitlines()
             if line.startswith("$ contrastkit")]
    pretrain = [c for c in lines if c[1] == "pretrain"]
    assert [(c[c.index("--config") + 1], c[c.index("--output") + 1],
             c[c.index("--seed_everything") + 1]) for c in pretrain] == [
        (v.config, f"runs/repro/cpu/{v.stem}/seed0/pretrain", "0") for v in STUDY.variants]
    for v in STUDY.variants[:10]:
        ckpt = f"runs/repro/cpu/{v.stem}/seed0/pretrain/checkpoints/last.ckpt"
        evals = [c for c in lines if ckpt in c]
        assert [" ".join(c[1:3]) for c in evals] == [
            "eval knn", "analyze --checkpoint", "analyze --space"]
        assert evals[0][evals[0].index("--k") + 1] == "200"
        for analyze in evals[1:]:
            assert analyze[-3:] == list(DYSTRESS_ARGS)
    init = "runs/repro/cpu/random_init/seed0/pretrain/checkpoints/last.ckpt"
    assert len([c for c in lines if init in c]) == len(RANDOM_INIT.evals)
    assert not [c for c in lines if c[1] == "compare"]
    assert not (tmp_path / "runs").exists()


# --- the one-run verdicts -----------------------------------------------------------------------
def _init(seed, top1, finished=True):
    return run_entry("random_init", seed, {"knn200/top1": top1}, finished=finished)


def test_the_random_inits_spread_is_its_range_over_the_recorded_seeds():
    runs = {**_init(0, 0.3155), **_init(1, 0.3173), **_init(2, 0.2952), **_init(3, 0.9, False)}
    spread, seeds = random_init_spread({"runs": runs}, "cpu", "knn200")
    assert spread == pytest.approx(2.21) and seeds == 3  # the unfinished seed 3 left out
    assert random_init_spread({"runs": _init(0, 0.3155)}, "cpu", "knn200") is None
    assert random_init_spread({"runs": runs}, "cpu-e2", "knn200") is None  # another tag


def test_a_run_learned_when_its_gain_exceeds_the_spread():
    assert learned_one_seed(2.5, (2.21, 3)) is True
    assert learned_one_seed(2.21, (2.21, 3)) is False  # equal: not beyond the spread
    assert learned_one_seed(-4.0, (2.21, 3)) is False
    assert learned_one_seed(None, (2.21, 3)) is None
    assert learned_one_seed(5.0, None) is None


def test_collapsed_is_the_rule_or_the_engines_warning():
    fell = {"pretrain/final_positive_similarity": 0.98, "pretrain/initial_loss": 4.0,
            "pretrain/final_loss": 1.0, "knn200/top1": 0.45}
    assert not collapsed_or_warned(fell, 10.0)  # BYOL-like: a high cosine, far from chance
    assert collapsed_or_warned(fell | {"knn200/top1": 0.15}, 10.0)  # the rule: near chance
    assert collapsed_or_warned(fell | {"pretrain/collapse_step": 420.0}, 10.0)  # the engine
    assert not collapsed_or_warned({"knn200/top1": 0.12}, 10.0)  # no cosine, no warning


def test_the_collection_reads_the_last_epochs_spread_and_the_engines_warning(tmp_path):
    csv = tmp_path / "metrics.csv"
    csv.write_text("epoch,step,train/loss,train/positive_similarity,train/z_std,"
                   "train/collapse_step\n"
                   "0,9,8.0,0.10,0.080,\n0,19,7.0,0.20,0.070,\n"
                   "1,29,6.0,0.90,0.010,\n1,39,6.0,0.94,0.006,39\n")
    out = read_losses(csv)
    assert out["final_z_std"] == pytest.approx(0.008)
    assert out["final_positive_similarity"] == pytest.approx(0.92)
    assert out["collapse_step"] == 39.0 and out["initial_loss"] == pytest.approx(7.5)
    csv.write_text("epoch,step,train/loss\n0,9,8.0\n")  # a record from before z_std
    assert set(read_losses(csv)) == {"initial_loss", "final_loss", "logged_epochs"}


# --- the tables -------------------------------------------------------------------------------
def _analyze(prefix, base):
    return {f"{prefix}/uniformity": base - 3.0, f"{prefix}/tolerance": 0.25,
            f"{prefix}/positive_similarity_mean": 0.7,
            f"{prefix}/nearest_negative_similarity_mean": 0.6,
            f"{prefix}/interclass_uniformity": -0.4}


def _trained(stem, top1, **more):
    metrics = {"knn200/top1": top1, "knn200/top1_ci_low": top1 - 0.01,
               "knn200/top1_ci_high": top1 + 0.01, "pretrain/initial_loss": 4.0,
               "pretrain/final_loss": 2.0, "pretrain/final_positive_similarity": 0.5,
               "pretrain/final_z_std": 0.03, "pretrain/wall_minutes": 61.0,
               **_analyze("analyze", 0.5), **_analyze("analyze_projector", 0.0)}
    return run_entry(stem, 0, {**metrics, **more})


def _finished_summary():
    """Random init of seeds 0-2 (200-NN 31, 32, 30: spread 2.00 points); BYOL learned (+14),
    SwAV gained less than the spread and the engine warned, MoCo v3 collapsed by the rule
    (cosine 0.99, 200-NN 15%), DINO has no projector diagnostics, VICReg still training."""
    runs = {**_init(0, 0.31), **_init(1, 0.32), **_init(2, 0.30)}
    for stem in STEMS:
        runs |= _trained(stem, 0.40)
    runs |= _trained("byol", 0.45, **{"pretrain/final_positive_similarity": 0.93})
    runs |= _trained("swav", 0.325, **{"pretrain/collapse_step": 400.0})
    runs |= _trained("mocov3", 0.15, **{"pretrain/final_positive_similarity": 0.99,
                                        "pretrain/initial_loss": 4.4,
                                        "pretrain/final_loss": 3.0})
    runs |= _trained("simclr_t0.2", 0.51)
    runs["cpu/dino/seed0"]["metrics"] = {k: v for k, v in runs["cpu/dino/seed0"]["metrics"].items()
                                         if not k.startswith("analyze_projector/")}
    runs["cpu/vicreg/seed0"].update(pretrain_finished=False, status="running")
    return {"runs": runs, "comparisons": {}}


def test_pending_runs_say_not_yet_run_in_every_cell():
    lines = baselines_cpu_lines(STUDY, {"runs": {}, "comparisons": {}})
    for label in [label for _, label in BASELINE_METHODS] + ["SimCLR t=0.2"]:
        rows = [line for line in lines if line.startswith(f"| {label} |")]
        assert len(rows) == 2  # the verdicts and the diagnostics
        assert all(set(_cells(r)[1:]) == {"not yet run"} for r in rows), label
    assert "(not measured yet: it needs two seeds)" in "\n".join(lines)


def test_finished_runs_fill_the_tables_with_their_verdicts():
    lines = baselines_cpu_lines(STUDY, _finished_summary())
    text = "\n".join(lines)
    byol = _cells(_row(lines, "BYOL"))
    assert byol == ["BYOL", "45.00 [44.00, 46.00]", "+14.00", "yes (+14.00 > 2.00)",
                    "4.00 -> 2.00", "0.930", "0.0300 (0.48)", "no", "61.0"]  # 0.03 x sqrt(256)
    swav = _cells(_row(lines, "SwAV"))
    assert swav[2:4] == ["+1.50", "no (+1.50 <= 2.00)"]
    assert swav[7] == "yes: the engine warned at step 400"
    mocov3 = _cells(_row(lines, "MoCo v3"))
    assert mocov3[2:4] == ["-16.00", "no (-16.00 <= 2.00)"]
    assert mocov3[7] == ("yes: last-epoch positive cosine 0.990, loss 4.40 -> 3.00, knn200 "
                         "15.0% (chance 10%)")
    assert _cells(_row(lines, "VICReg"))[1:] == ["not yet run"] * 8
    simclr = _cells(_row(lines, "SimCLR t=0.2"))
    assert simclr[2:4] == ["+20.00", "yes (+20.00 > 2.00)"]
    assert simclr[6] == f"0.0300 ({0.03 * 128 ** 0.5:.2f})"
    init = _cells(_row(lines, "random init (not trained)"))
    assert init[1] == "31.00" and init[2:8] == ["– (not trained)"] * 6  # no bootstrap given
    # the diagnostics: projector first, then the backbone; a finished run lacking one: "–"
    diagnostics = [line for line in lines if line.startswith("| BYOL |")][1]
    assert _cells(diagnostics)[1:] == ["-3.000", "0.250", "0.700 / 0.600", "-0.400",
                                       "-2.500", "0.250", "0.700 / 0.600", "-0.400"]
    dino = [line for line in lines if line.startswith("| DINO |")][1]
    assert _cells(dino)[1:5] == ["–"] * 4 and _cells(dino)[5] == "-2.500"
    # the rules, with the spread they used, and what one seed cannot show
    assert "(2.00 points over its 3 recorded seeds)" in text
    assert "One seed at this budget ranks nothing" in text
    assert "No peer publishes these diagnostics across methods" in text


def test_a_failed_run_says_so_with_its_step_and_error_not_not_yet_run():
    """A diverged run is a result: its cells say *failed*, its *learned* cell the step, exit
    status and the error's first clause; a failure logged by a runner that kept no error line
    says so; methods.md's quote likewise."""
    summary = _finished_summary()
    summary["runs"]["cpu/vicreg/seed0"].update(status="failed", failure={
        "step": "pretrain", "exit_status": 2,
        "error": "contrastkit pretrain: error: the training loss became NaN or infinite at "
                 "step 9 (epoch 1, batch 9); the run stops here and no checkpoint was kept"})
    summary["runs"]["cpu/dclw/seed0"].update(pretrain_finished=False, status="failed",
                                              failure={"step": "pretrain", "exit_status": 1,
                                                       "error": None})
    lines = baselines_cpu_lines(STUDY, summary)
    vicreg = _cells(_row(lines, "VICReg"))
    reason = ("pretrain failed with exit status 2 (the training loss became NaN or "
              "infinite at step 9 (epoch 1, batch 9))")
    assert vicreg[1:] == ["failed", "failed", reason] + ["failed"] * 5
    diagnostics = [line for line in lines if line.startswith("| VICReg |")][1]
    assert set(_cells(diagnostics)[1:]) == {"failed"}
    assert _cells(_row(lines, "DCLW"))[3] == ("pretrain failed with exit status 1 "
                                              "(its error line was not recorded)")
    assert cpu_result(STUDY, summary, "vicreg") == reason


def test_the_page_holds_the_section_and_its_rerun_line():
    text = render_report(_finished_summary())
    section = text[text.index(f"### {STUDY.title}"):text.index("## Part B")]
    assert section.count("| BYOL |") == 2 and "| run | 200-NN top-1 %" in section
    assert "Runs under `runs/repro/cpu/` (mean ± sample std" not in section  # no run table
    rerun = text[text.index("## How to rerun"):]
    assert f"python -m studies.repro cpu --study {BASELINES_CPU}" in rerun


# --- the plan -------------------------------------------------------------------------------
def test_its_plan_counts_the_nine_runs_and_reuses_seed_0_of_the_shared_ones():
    (cost,) = planned_cost([STUDY], reused=REUSED_BY_BASELINES_ROUND)
    assert REUSED_BY_BASELINES_ROUND == {"random_init", "simclr_t0.2"}
    assert cost.runs == 9
    assert all(config_steps(f"configs/repro/cpu/{stem}.yaml") == 30 * 39 for stem in STEMS)
    assert cost.train_seconds == pytest.approx(30 * 39 * sum(STEP_SECONDS[s] for s in STEMS))
    f, k, a = (EVAL_SECONDS[n] for n in ("features", "knn", "analyze"))
    assert cost.eval_seconds == pytest.approx(9 * ((f + k + a) + (f + a)))


def test_its_measured_cost_counts_its_runs_whatever_checkout_trained_them():
    """Issue 53's study 6 is no round of one fixed checkout: its runs are those of its stems."""
    summary = _finished_summary()
    run = summary["runs"]["cpu/byol/seed0"]
    run["metrics"] |= {"cost/cpu_seconds": 4000.0, "cost/pretrain_cpu_seconds": 3600.0,
                       "cost/wall_seconds": 3700.0}
    run["provenance"] = {**run["provenance"], "commits": ["0123456" + "a" * 33]}
    text = render_report(summary)
    measured = text[text.index("**Measured (issue 53's study 6)**"):]
    # eight of the nine finished (VICReg is training), random init and SimCLR not counted
    assert "8 runs finished and evaluated (the plan: 9); 1.11 CPU-hours so far" in measured
    assert "| `byol` | 1 | 60.0 |" in measured and "`random_init`" not in measured


def test_each_planned_run_fits_the_issues_budget_of_about_a_cpu_hour():
    """Issue 53: about 1 CPU-hour per run; the pilots plan 0.6 to 1.0 (MoCo v3 and BYOL, with
    their EMA branch on both views, the dearest)."""
    (cost,) = planned_cost([STUDY], reused=REUSED_BY_BASELINES_ROUND)
    per_run = {stem: (30 * 39 * STEP_SECONDS[stem] + cost.eval_seconds / 9) / 3600
               for stem in STEMS}
    assert max(per_run, key=per_run.get) == "mocov3"
    assert all(0.5 < hours < 1.1 for hours in per_run.values()), per_run
