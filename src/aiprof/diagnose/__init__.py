"""Diagnosis: one rule per cause turns analysis passes into ranked findings with a gain."""

from aiprof.diagnose.context import DiagnoseOptions
from aiprof.diagnose.engine import diagnose
from aiprof.diagnose.finding import Diagnosis, Finding

__all__ = ["DiagnoseOptions", "Diagnosis", "Finding", "diagnose"]
