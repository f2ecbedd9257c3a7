"""``python -m studies.repro``: the study's command line (:mod:`studies.repro.cli`)."""

from studies.repro.cli import main

raise SystemExit(main())
