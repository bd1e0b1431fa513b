"""The kubelet's node-local APIs gputui reads (its pod-resources socket)."""
