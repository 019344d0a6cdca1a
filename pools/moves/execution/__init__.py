"""Applying approved moves to the nodes: run (claim, apply, record), drain, outcome, writes."""
