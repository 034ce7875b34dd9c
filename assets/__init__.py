"""Thin Dagster assets, one module per group; the work is done by ``pipelines``."""
