"""``python -m contrastkit.cli``: the ``contrastkit`` command without its script."""

from contrastkit.cli.main import main

raise SystemExit(main())
