"""Workloads of the counterfactual suite: each a step built from a set of knobs, so that every
fix a finding could propose is the same workload with one knob turned (see ``knobs.py``)."""
