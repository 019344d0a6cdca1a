"""Pool insights (pure): the four indicators of a pool (utilisation, queue time, failure
reasons, replacement difficulty), workload profiles, readiness checks and the advisor's
rules, over plain records pools.insights.gather reads. No Django, no clock: times arrive as epoch
seconds and the window as two of them."""
