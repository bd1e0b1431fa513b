"""Pure functions over snapshots: formatting, trees, histories. No I/O."""
