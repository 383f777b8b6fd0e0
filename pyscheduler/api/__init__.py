"""Kubernetes API semantics shared by the scheduler and the embedded cluster.

Pure functions and values, no I/O: resource quantities, label selectors, and the validation rules
(names, label keys and values) with kube-apiserver's error messages.
"""
