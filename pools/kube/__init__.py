"""The Kubernetes edge: the only package that talks to the Kubernetes API."""
