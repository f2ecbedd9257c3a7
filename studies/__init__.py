"""Studies run with contrastkit from a source checkout, beside the library (not installed with
it): ``studies.repro``, the reproduction study of ``docs/reproduction.md``."""
