"""stemforge's library: plain Python, no Dagster imports.

Each module owns one concept of the benchmark pipeline (sources, crawl, dedup, latex,
shuffle, split, store, models, metrics, cogme, report). Dagster assets in ``assets/``
are thin wrappers around these functions.
"""

__version__ = "0.1.0"
