"""Linux side: /proc processes, cgroup membership (PID to container) and cgroup usage."""
