"""Runtime-health checks over the model and the sources' readings; never imports the UI."""
