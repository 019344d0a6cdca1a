"""kubesim: a Kubernetes-API-compatible cluster simulator with a simulated dcgm-exporter.

Used by the tests, the demo and the benchmarks. It shares no code with the portal (in either
direction), so that a wrong idea of Kubernetes cannot hide in both at once.
"""
