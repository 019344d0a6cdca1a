"""The pure core: what decides, over plain data, with no Django, HTTP, database or clock.

Desired state and drift (`desired`), what Kubernetes accepts as a name (`names`), raw API
objects turned into inventory figures (`snapshot`), the checks a move must pass (`checks`),
what a pool definition must satisfy (`pool_definition`), pool and node figures (`figures`),
SVG charts (`charts`), the scheduling block for a pool (`snippets`), hiding secrets in
messages (`redact`), and the fit check (`fit/`: will a workload land, and if not, why).
Settings arrive as parameters; tests/test_architecture.py fails if anything here imports
Django, the Kubernetes client, requests or Celery, directly or through another module.
"""
