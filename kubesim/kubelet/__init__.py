"""kubesim as the kubelets and device plugins of its scenario's nodes, against any API
server (`python -m kubesim kubelet`): it registers the nodes, renews their Leases, runs the
pods the scheduler binds to them, ends graceful deletions, and serves the DCGM exporter for
them. The control plane (scheduler, controllers, admission) is the real one."""
