"""containerd, read from its shims' task state (no gRPC, no socket)."""
