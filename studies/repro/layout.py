"""Where the reproduction study reads and writes: the checkout, the data and the run folders.

Run layout, relative to the repository root :data:`REPO`:
``runs/repro/<part>[-e<epochs>]/<config stem>/seed<N>/{pretrain,eval/<protocol>,analyze}`` (two
studies that use the same config share its runs) and
``runs/repro/<part>[-e<epochs>]/compare/<A>__vs__<B>/<protocol>/seed<N>``; ``-e<epochs>`` tags
runs shortened with ``--epochs``. The summary of every run is ``runs/repro/summary.json``; the
report is ``docs/reproduction.md`` with its copy of the summary and its figures beside it.
Finished runs and comparisons are also recorded, small files only, under the same relative paths
in ``docs/reproduction/runs/<part>[-e<epochs>]/`` (committed; :mod:`studies.repro.records`).

Every other module reads :data:`REPO` as ``layout.REPO`` at call time, so one assignment (a
test's ``monkeypatch``) moves the whole study.
"""

from __future__ import annotations

from pathlib import Path

#: The source checkout this package lies in (``studies/repro/`` is two levels down):
#: the study's configs, runs and report live there, and its commands run from there.
REPO = Path(__file__).resolve().parents[2]
ARCHIVE = "../shared/data/cifar10-jpg.tar.gz"
ARRAY_CACHE = ".cache/cifar10-jpg"
FEATURE_CACHE = ".cache/repro/features"
CONFIGS = Path("configs/repro")
RUNS = Path("runs/repro")
SUMMARY = RUNS / "summary.json"
RECORDS = Path("docs/reproduction/runs")  # committed copies of finished runs (records.py)
DOC = Path("docs/reproduction.md")
DOC_SUMMARY = Path("docs/reproduction.json")  # committed copy of the summary the report shows
FIGURES = Path("docs/figures")


def read_config(config: str | Path) -> dict:
    """The parsed YAML of ``config`` (a path relative to :data:`REPO`; ``{}`` when empty)."""
    import yaml

    return yaml.safe_load((REPO / config).read_text()) or {}


def require_checkout() -> Path:
    """:data:`REPO`, after checking that it holds the study's configs.

    Raises:
        FileNotFoundError: when ``configs/repro`` is missing (an installed, not editable, copy
            of contrastkit has no checkout around it).
    """
    if not (REPO / CONFIGS).is_dir():
        raise FileNotFoundError(
            f"{REPO / CONFIGS} not found: python -m studies.repro runs from a source checkout of "
            "contrastkit (install it with `pip install -e .` from the repository)")
    return REPO


def run_tag(part: str, epochs: int | None = None) -> str:
    """``<part>[-e<epochs>]``: the folder under ``runs/repro`` of a part's runs."""
    return part if epochs is None else f"{part}-e{epochs}"


def run_dir(part: str, stem: str, seed: int, epochs: int | None = None) -> Path:
    """``runs/repro/<part>[-e<epochs>]/<stem>/seed<seed>``."""
    return RUNS / run_tag(part, epochs) / stem / f"seed{seed}"


def compare_dir(part: str, a: str, b: str, protocol: str, seed: int,
                epochs: int | None = None) -> Path:
    """``runs/repro/<part>[-e<epochs>]/compare/<a>__vs__<b>/<protocol>/seed<seed>``."""
    return RUNS / run_tag(part, epochs) / "compare" / f"{a}__vs__{b}" / protocol / f"seed{seed}"


def eval_dir(out: Path, protocol: str) -> Path:
    """Folder of one evaluation of the run in ``out``: ``analyze`` or ``eval/<protocol>``."""
    return out / "analyze" if protocol == "analyze" else out / "eval" / protocol
