"""What runs inside a Lambda: the TTL stream handler, the archiver's worker, your graph
as a handler and its extension, the Agent Server entry points."""
