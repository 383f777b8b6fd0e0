"""Cloud bursting: virtual nodes backed by container-instance pools (``node``), the provider that
runs their pods through a cloud adapter (``provider``, the virtual-kubelet role), the adapter
protocol and its HTTP implementation (``cloud``), and the
rebalancer that brings virtual pods back to real nodes (``rebalancer``)."""
