"""Composition: which sources a run reads (real, scenario or demo) and the collector over them."""
