"""The fit check: will a workload land on the cluster, and if not, why? (pure)

`check` is the entry (its docstring shows the whole interface); `workloads` reads manifests,
`quantities` and `resources` read what pods request, `scheduling` and `filters` are the
scheduler's filters with its messages, `packing` counts how many pods fit, `cluster` holds
the nodes and pools as plain data (`api_objects` builds them from API objects), `advice` and
`fix` say what a platform engineer would say and change.
"""
