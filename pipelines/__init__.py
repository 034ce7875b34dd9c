"""stemforge's library: plain Python; Dagster stays in ``pipelines/orchestration/`` and ``assets/``.

The folders read as the flow, and each imports only from the folders before it::

    store <- shared <- ingest <- clean <- dataset <- evaluation <- profiles <- orchestration

``store/`` (data home, lake, images, records, warehouse, memo) is the bottom layer; the shared
infrastructure, ``pipelines/{settings,parallel,checks,http,plugins,compiled,tex_math,progress}.py``, may use ``store/`` and each
other and is used by every flow folder. Only ``orchestration/`` (definitions, sensors, run, cli)
imports ``dagster`` or ``assets``; the Dagster assets in ``assets/`` are thin wrappers around
each folder's ``stage.py``. Top-level imports have no cycles. ``tests/test_architecture.py``
checks these rules by reading every import statement (those inside functions too; for cycles,
the top-level ones). One lookup goes upward by name, not by import: the check registry
(``checks.CHECK_MODULES``) loads the checks that ``clean/`` and ``dataset/`` register.
"""

__version__ = "0.1.0"
