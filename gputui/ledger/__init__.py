"""The GPU-time, energy and cost ledger: what each container, user and GPU used, kept on disk.

``quantities`` turns two consecutive snapshots into per-subject increments (pure), ``store``
keeps them in one SQLite file per host (tiers, gaps, one writer), ``writer`` feeds the store
from a collect loop, ``report`` sums and formats a window. docs/ledger.md says what each
quantity means and which are estimates.
"""
