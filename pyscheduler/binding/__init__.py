"""The binding cycle's built-in plugins: the ones that write to the API server (PreBind, Bind)
and the per-pod fragment's stages after Reserve. The pure plugins (filters, scores,
preemption's choice of victims) are in :mod:`pyscheduler.plugins`."""
