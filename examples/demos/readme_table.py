"""The README's results table is what ``make demo`` printed: this copies a run's ``demo.json``
to ``docs/demo.json`` and writes its table into ``README.md`` between the two markers
(``tests/demos/test_demo.py`` checks that the README's table is the committed ``demo.json``'s).

``python -m examples.demos.readme_table runs/demo-digits-<time>/demo.json`` after ``make demo``
(from the checkout's root); ``--check`` only says whether the README agrees with
``docs/demo.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from contrastkit.eval.report import write_text
from examples.demos.protocol import results_table

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COMMITTED = ROOT / "docs" / "demo.json"
BEGIN = "<!-- demo table: docs/demo.json, written by python -m examples.demos.readme_table -->"
END = "<!-- end of the demo table -->"


def table_of(demo_json: Path) -> str:
    """The Markdown table ``make demo`` printed for the run whose ``demo.json`` this is."""
    return results_table(json.loads(demo_json.read_text())["results"]).strip("\n")


def readme_table(readme: str) -> str:
    """The table between the README's markers."""
    if BEGIN not in readme or END not in readme:
        raise ValueError(f"{README} has no demo table markers ({BEGIN!r} ... {END!r})")
    return readme.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def with_table(readme: str, table: str) -> str:
    """``readme`` with ``table`` between its markers."""
    head, rest = readme.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demos.readme_table",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("demo_json", nargs="?", help="a run's demo.json (omit with --check)")
    parser.add_argument("--check", action="store_true",
                        help="compare the README's table with docs/demo.json; write nothing")
    args = parser.parse_args(argv)
    readme = README.read_text()
    if args.check:
        same = readme_table(readme) == table_of(COMMITTED)
        print("the README's demo table is docs/demo.json's" if same else
              "the README's demo table differs from docs/demo.json's", file=sys.stderr)
        return 0 if same else 1
    if args.demo_json is None:
        parser.error("give a run's demo.json, or --check")
    source = Path(args.demo_json)
    if not source.is_file():
        parser.error(f"{source}: no such file")
    table = table_of(source)
    write_text(COMMITTED, source.read_text())
    write_text(README, with_table(readme, table))
    print(f"wrote {COMMITTED} and the table of {README}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
