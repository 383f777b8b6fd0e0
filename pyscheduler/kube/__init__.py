"""The only package that talks to a Kubernetes API server."""
