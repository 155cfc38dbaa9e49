"""The manifest: which checkpoints exist, per deployment, thread and namespace."""
