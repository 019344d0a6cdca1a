"""Maintenance: what a pool can spare for a drain now (its headroom)."""
