"""Benchmark suite: the `store` engine against raw py-lmdb, persist-queue and litequeue.

Run from the repository root with ``python -m bench`` (see bench/README.md).
"""
