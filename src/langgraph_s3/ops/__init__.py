"""The operator's tools: the CLI, doctor, the viewer, the demo, the Agent Server entry
points, the IAM actions and the TTL stream handler."""
