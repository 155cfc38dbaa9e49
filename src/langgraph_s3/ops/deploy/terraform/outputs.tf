output "checkpointer_conn_string" {
  description = "Paste into AsyncS3Saver.from_conn_string / S3Saver.from_conn_string."
  value       = "${local.store_url}?${local.manifest_query}"
}

output "store_conn_string" {
  description = "Paste into AsyncS3Store.from_conn_string / S3Store.from_conn_string."
  value       = local.store_url
}

output "environment" {
  description = "The two environment variables the Lambda example reads."
  value = {
    LANGGRAPH_S3_CHECKPOINTER = "${local.store_url}?${local.manifest_query}"
    LANGGRAPH_S3_STORE        = local.store_url
  }
}

output "bucket_name" {
  value = aws_s3_bucket.this.id
}

output "bucket_arn" {
  value = aws_s3_bucket.this.arn
}

output "table_name" {
  description = "The manifest table, made here or shared (create_table = false): another deployment's table_name; null with manifest = \"s3\"."
  value       = local.table_name
}

output "table_arn" {
  value = local.table_arn
}

output "name" {
  description = "The name prefix in effect (var.name, or the one derived from bucket_name); use it for your own resources too."
  value       = local.name
}

output "policy_name" {
  value = aws_iam_policy.agent.name
}

output "policy_arn" {
  description = "Least-privilege policy for the agent; attach it to your own role."
  value       = aws_iam_policy.agent.arn
}

output "policy_json" {
  description = "The agent policy document."
  value       = jsonencode(local.agent_policy)
}

output "lambda_role_arn" {
  description = "The Lambda execution role (when create_lambda_role)."
  value       = var.create_lambda_role ? aws_iam_role.lambda[0].arn : null
}

output "lambda_role_name" {
  description = "The Lambda execution role's name (when create_lambda_role)."
  value       = var.create_lambda_role ? aws_iam_role.lambda[0].name : null
}

output "sweeper_function_name" {
  description = "The thread TTL sweeper Lambda (when enable_ttl_sweeper)."
  value       = var.enable_ttl_sweeper ? aws_lambda_function.sweeper[0].function_name : null
}

output "sweeper_policy_json" {
  description = "The sweeper role's policy document (when enable_ttl_sweeper)."
  value       = var.enable_ttl_sweeper ? jsonencode(local.sweeper_policy) : null
}

output "stream_arn" {
  description = "The manifest table's stream (when enable_ttl_sweeper)."
  value       = var.enable_ttl_sweeper ? local.stream_arn : null
}

output "archiver_state_machine_arn" {
  description = "The archiver's state machine (when enable_archiver): start it by hand with aws stepfunctions start-execution."
  value       = var.enable_archiver ? aws_sfn_state_machine.archiver[0].arn : null
}

output "archiver_dlq_url" {
  description = "The dead-letter queue of failed archiver shards (when enable_archiver)."
  value       = var.enable_archiver ? aws_sqs_queue.archiver_dlq[0].url : null
}

output "archiver_function_name" {
  description = "The archiver Lambda (when enable_archiver)."
  value       = var.enable_archiver ? aws_lambda_function.archiver[0].function_name : null
}

output "archiver_policy_json" {
  description = "The archiver Lambda role's policy document (when enable_archiver)."
  value       = var.enable_archiver ? jsonencode(local.archiver_policy) : null
}

output "extra_policy_arn" {
  description = "The policy of secret_arns and extra_policy_statements (null when both are empty): attached to the Lambda role, or to a role of yours."
  value       = length(aws_iam_policy.extra) > 0 ? aws_iam_policy.extra[0].arn : null
}

output "extra_policy_json" {
  description = "That policy's document (null when both are empty)."
  value       = length(aws_iam_policy.extra) > 0 ? aws_iam_policy.extra[0].policy : null
}
