"""Errors of a predictions import, shared by the file formats (``predictions_import``) and the
harness outputs (``harness_import``)."""

from __future__ import annotations


class PredictionsImportError(ValueError):
    """A predictions file that cannot be imported; the message names the line."""


class LineError(Exception):
    """What is wrong with one line or row; the reader adds the file name and line number."""
