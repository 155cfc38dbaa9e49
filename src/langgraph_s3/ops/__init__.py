"""What runs beside the library, by where it runs:

* :mod:`.handlers`: inside a Lambda (the TTL stream handler, the archiver's worker,
  your graph as a handler and its extension, the Agent Server entry points);
* :mod:`.tools`: what an operator runs (the CLI, doctor, the viewer, the demo);
* :mod:`.deploy`: what builds a deployment (the Lambda package, the IAM actions).

Beside them, the pure presentation both kinds share (:mod:`.conversation`,
:mod:`.views`, :mod:`.graph_spec`), and the earlier import paths
(``langgraph_s3.ops.lambda_app`` and the others), each the moved module itself."""
