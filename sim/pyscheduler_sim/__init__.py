"""The embedded cluster: a loopback Kubernetes API server, simulated kubelets and controllers."""
