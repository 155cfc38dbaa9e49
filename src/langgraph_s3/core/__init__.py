"""Pure logic, no AWS: keys, the value types and ports, codecs, retries, tasks."""
