"""contrastkit.train.summary_figure: the run's summary figure says how often its kNN monitor
scored (a repro run's figure said "after each epoch" beside points every 5 epochs)."""

from __future__ import annotations

from contrastkit.figures import figure_caption
from contrastkit.train.summary_figure import plot_run_summary


def _metrics(path, knn_epochs):
    rows = ["epoch,step,train/loss,val/knn_top1"]
    for epoch in range(10):
        rows.append(f"{epoch},{epoch * 10},{7 - 0.1 * epoch},")
        if epoch in knn_epochs:
            rows.append(f"{epoch},{epoch * 10 + 9},,{0.3 + 0.01 * epoch}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_the_caption_says_how_often_the_knn_monitor_scored(tmp_path):
    every5 = plot_run_summary(_metrics(tmp_path / "a.csv", (4, 9)), tmp_path / "a.png", 200, 10)
    assert "kNN: top-1 on the held-out split, scored after every 5 epochs" in figure_caption(
        every5)
    each = plot_run_summary(_metrics(tmp_path / "b.csv", range(10)), tmp_path / "b.png", 200, 10)
    assert "scored after each epoch" in figure_caption(each)
