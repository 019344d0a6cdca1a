"""The Prometheus edge: the only package that talks to Prometheus."""
