"""Built-in scheduling plugins, one module each, vectorized over the node table."""
