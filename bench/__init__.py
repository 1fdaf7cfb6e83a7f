"""duetime benchmarks: see bench/README.md."""
