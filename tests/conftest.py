"""Test-suite root: its folder is on sys.path, so helpers such as ``gloo_harness`` import."""
