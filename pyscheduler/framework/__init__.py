"""The pure scheduling core: no I/O, no Kubernetes client."""
