"""Judging the diagnosis against measured fixes: the counterfactual suite's labels and score."""

from aiprof.evaluation.labels import LabelledWorkload, MeasuredFix, load_suite
from aiprof.evaluation.score import Claim, SuiteScore, WorkloadScore, score_suite, score_workload

__all__ = ["Claim", "LabelledWorkload", "MeasuredFix", "SuiteScore", "WorkloadScore",
           "load_suite", "score_suite", "score_workload"]
