"""Part B's results table from fake records (studies.repro.partb), and a block's records in
transit (studies.repro.block_records): packed within the device tool's limits, recorded here
only when the block finished, unpacked only as plain files inside the run folder."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from repro_summaries import run_entry

from studies.repro import layout
from studies.repro.block_records import (
    BLOCK_SUMMARY,
    MAX_FILES,
    RECORDS_ARCHIVE,
    ingest,
    pack,
)
from studies.repro.blocks import ORDER
from studies.repro.device_block import headline
from studies.repro.partb import ROWS, result_row, results_lines, verdict
from studies.repro.studies import STUDIES

STEMS = {v.stem for s in STUDIES.values() if s.part == "gpu" for v in s.variants}
SCE_ROW, SIMCLR_ROW = ROWS[0], ROWS[1]


def _gpu_run(stem, metrics, monitor=(), block=None):
    entry = run_entry(stem, 0, metrics, tag="gpu", epochs=200)
    key = f"gpu/{stem}/seed0"
    entry[key]["monitor"] = [list(point) for point in monitor]
    entry[key]["provenance"] = {"commits": ["0123456789abcdef"], "dirty": False,
                                "gpu": "NVIDIA H100 80GB HBM3"}
    entry[key]["block"] = block or {"gpu": "NVIDIA H100 80GB HBM3", "gpu_minutes": 11.84,
                                    "commit": "0123456789abcdef", "pretrain_args": []}
    return entry


def _table(summary):
    lines = results_lines(summary)
    return {line.split(" | ")[0].lstrip("| "): line.split(" | ")
            for line in lines if line.startswith("| ") and "---" not in line}


def test_rows_not_yet_run_name_their_block():
    rows = _table({"runs": {}})
    number = {s.run: i for i, s in enumerate(ORDER, start=1)}
    for row in ROWS:
        assert rows[row.method][2].startswith("not yet run"), row.method
        assert f"block {number[row.run]} of the order" in rows[row.method][2]
    assert "waits for Part A's best fixed t" in rows["SimCLR, Part A's best fixed t"][2]


def test_a_recorded_linear_probe_row():
    summary = {"runs": _gpu_run("table6_sce", {"linear_d1/top1": 0.8952})}
    cells = _table(summary)["SCE"]
    assert cells[1] == "90.30 (SCE Table 6; linear probe, D.1)"
    assert cells[2] == "89.52 (last epoch)"
    assert cells[3] == "-0.78" and cells[4] == "reproduced"  # within 1 point
    assert cells[5] == "table6_sce.yaml" and cells[6] == "0123456789"
    assert cells[7] == "NVIDIA H100 80GB HBM3" and cells[8].rstrip(" |") == "11.8"
    far = {"runs": _gpu_run("table6_sce", {"linear_d1/top1": 0.881})}
    assert _table(far)["SCE"][4] == "not reproduced (2.20 points below the paper)"


def test_the_best_epoch_beside_the_last_where_the_papers_code_keeps_it():
    monitor = [(10, 0.60), (190, 0.8290), (200, 0.8250)]
    summary = {"runs": _gpu_run("table3_simclr", {"knn200/top1": 0.8252,
                                                  "analyze/uniformity": -2.5},
                                monitor)}
    cells = _table(summary)["SimCLR, t = 0.2"]
    assert cells[2] == "82.52 (last epoch); 82.90 (best, epoch 190)"
    assert cells[3] == "-1.13; -0.75"
    assert cells[4] == ("reproduced at the best monitored epoch only (the paper's code's "
                        "pick), 1.13 points below at the last")
    unif = _table(summary)["SimCLR, t = 0.2: uniformity"]
    assert unif[1].startswith("-2.2135") and unif[2] == "-2.5000 (last epoch)"
    assert unif[4].startswith("–")  # a direction, judged by the claims
    assert verdict(SIMCLR_ROW, 83.0, None) == "reproduced"
    assert verdict(SCE_ROW, 80.0, None).startswith("not reproduced")


def test_the_best_fixed_t_row_shows_its_temperature_or_the_run_that_serves():
    block = {"gpu": "NVIDIA H100", "gpu_minutes": 12.0, "commit": "fedcba9876543210",
             "pretrain_args": ["--model.method.init_args.temperature", "0.1"]}
    summary = {"runs": _gpu_run("simclr_best_t", {"knn200/top1": 0.84}, [(200, 0.84)], block)}
    cells = _table(summary)["SimCLR, Part A's best fixed t"]
    assert "`--model.method.init_args.temperature` `0.1`" in cells[5]
    part_a = {}
    for t, acc in (("0.1", 0.5), ("0.2", 0.6), ("0.5", 0.4)):
        for seed in (0, 1, 2):
            part_a |= run_entry(f"simclr_t{t}", seed, {"knn200/top1": acc})
    served = _table({"runs": part_a})["SimCLR, Part A's best fixed t"][2]
    assert served == "Part A's best fixed t is 0.2: the row SimCLR, t = 0.2"
    for seed in (0, 1, 2):  # t = 0.1 best: block 6 trains it, and the row says which t
        part_a |= run_entry("simclr_t0.1", seed, {"knn200/top1": 0.7})
    waiting = _table({"runs": part_a})["SimCLR, Part A's best fixed t"][2]
    assert waiting == "not yet run (block 6 of the order; t = 0.1, Part A's best fixed t)"


def test_an_unfinished_run_is_not_shown():
    summary = {"runs": _gpu_run("table6_sce", {"linear_d1/top1": 0.90})}
    summary["runs"]["gpu/table6_sce/seed0"]["pretrain_finished"] = False
    assert result_row(SCE_ROW, summary).split(" | ")[2].startswith("not yet run")


# --- records in transit ---------------------------------------------------------------------
def _run_folder(root):
    folder = root / "runs/repro/gpu/table6_sce/seed0"
    (folder / "pretrain" / "checkpoints").mkdir(parents=True)
    (folder / "pretrain" / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    (folder / "pretrain" / "finished.json").write_text('{"epochs": 200}\n')
    (folder / "pretrain" / "metrics.csv").write_text(
        "epoch,step,train/loss,val/knn_top1\n0,9,6.0,\n9,99,,0.41\n19,199,,0.47\n29,299,,0.45\n")
    (folder / "eval" / "linear_d1").mkdir(parents=True)
    (folder / "eval" / "linear_d1" / "results.json").write_text(
        json.dumps({"metrics": {"top1": 0.9}}))
    (folder / ".lock").write_text("")
    return folder


def _summary(status="done", **changes):
    return {"run": "sce", "tag": "gpu", "stem": "table6_sce", "seed": 0, "status": status,
            **changes}


def test_pack_then_ingest_records_the_run_without_checkpoints(monkeypatch, tmp_path):
    device, session = tmp_path / "device", tmp_path / "session"
    folder = _run_folder(device)
    out = tmp_path / "out"
    pack(folder, out, _summary())
    assert sorted(p.name for p in out.iterdir()) == [BLOCK_SUMMARY, RECORDS_ARCHIVE]
    with tarfile.open(out / RECORDS_ARCHIVE) as tar:
        names = set(tar.getnames())
    assert names == {"block.json", "pretrain/finished.json", "pretrain/metrics.csv",
                     "eval/linear_d1/results.json"}
    monkeypatch.setattr(layout, "REPO", session)
    folder_rel = ingest(out, STEMS)
    assert str(folder_rel) == "runs/repro/gpu/table6_sce/seed0"
    recorded = session / "docs/reproduction/runs/gpu/table6_sce/seed0"
    assert (recorded / "pretrain" / "metrics.csv").read_text() == (
        folder / "pretrain" / "metrics.csv").read_text()
    assert json.loads((recorded / "block.json").read_text())["status"] == "done"
    assert not list(recorded.rglob("*.ckpt"))
    ingest(out, STEMS)  # again: the unpacked copy is replaced, the record kept
    assert (recorded / "eval" / "linear_d1" / "results.json").is_file()


def test_headline_numbers_and_the_best_monitored_epoch(tmp_path):
    folder = _run_folder(tmp_path)
    variant = STUDIES["gpu_table6"].variant("sce")
    assert headline(folder, variant) == {"linear_d1/top1": 0.9, "best_epoch": 20,
                                         "best_top1": 0.47, "last_monitored_top1": 0.45}


def test_pack_refuses_more_files_than_come_back(tmp_path):
    folder = _run_folder(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for i in range(MAX_FILES - 1):
        (out / f"extra{i}.txt").write_text("x")
    with pytest.raises(ValueError, match=f"at most {MAX_FILES} come back"):
        pack(folder, out, _summary())


@pytest.mark.parametrize("summary, message", [
    (_summary("continue"), "status 'continue', not 'done'"),
    (_summary(tag="cpu"), "not a Part B run tag"),
    (_summary(stem="../../etc"), "not a Part B run"),
    (_summary(seed="0/x"), "not a non-negative integer"),
])
def test_ingest_refuses_what_is_not_a_finished_part_b_block(summary, message, monkeypatch,
                                                            tmp_path):
    out = tmp_path / "out"
    pack(_run_folder(tmp_path / "device"), out, summary)
    monkeypatch.setattr(layout, "REPO", tmp_path / "session")
    with pytest.raises(ValueError, match=message):
        ingest(out, STEMS)
    assert not (tmp_path / "session" / "docs").exists()


@pytest.mark.parametrize("name, kind", [("../escape.txt", tarfile.REGTYPE),
                                        ("/abs.txt", tarfile.REGTYPE),
                                        ("link", tarfile.SYMTYPE),
                                        ("pretrain/checkpoints/last.ckpt", tarfile.REGTYPE)])
def test_ingest_unpacks_plain_files_inside_the_run_folder_only(name, kind, monkeypatch,
                                                               tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / BLOCK_SUMMARY).write_text(json.dumps(_summary()))
    with tarfile.open(out / RECORDS_ARCHIVE, "w:gz") as tar:
        member = tarfile.TarInfo(name)
        member.type = kind
        member.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
        member.size = 0 if kind == tarfile.SYMTYPE else 1
        tar.addfile(member, io.BytesIO(b"x") if kind == tarfile.REGTYPE else None)
    monkeypatch.setattr(layout, "REPO", tmp_path / "session")
    with pytest.raises(ValueError, match="member"):
        ingest(out, STEMS)
    assert not (tmp_path / "session" / "runs" / "repro" / "gpu" / "table6_sce").exists()
    assert not (tmp_path / "escape.txt").exists()


def test_ingest_keeps_a_run_trained_here(monkeypatch, tmp_path):
    out = tmp_path / "out"
    pack(_run_folder(tmp_path / "device"), out, _summary())
    _run_folder(tmp_path / "session")  # this checkout trained the run itself
    monkeypatch.setattr(layout, "REPO", tmp_path / "session")
    with pytest.raises(ValueError, match="trained on this machine"):
        ingest(out, STEMS)
