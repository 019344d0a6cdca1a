"""The insights: workload profiles, pool indicators, readiness and the advisor (gather), and
the advisor's dismissals (advice)."""
