"""What builds a deployment: the Lambda package and the IAM actions it needs."""
