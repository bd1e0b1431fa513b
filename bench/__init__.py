"""gputui benchmarks: figures only, never pass/fail (see bench/README.md)."""
