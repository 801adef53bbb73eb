"""Docker sandboxes: the typed wrapper, the warm pool and the reaper."""
