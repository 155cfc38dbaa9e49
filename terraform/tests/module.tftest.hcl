# terraform test: the module's logic against a mocked AWS provider (no endpoint).

mock_provider "aws" {
  mock_resource "aws_s3_bucket" {
    defaults = {
      arn = "arn:aws:s3:::unit-bucket"
      id  = "unit-bucket"
    }
  }
  mock_resource "aws_iam_policy" {
    defaults = {
      arn = "arn:aws:iam::123456789012:policy/langgraph-s3-agent"
    }
  }
  mock_resource "aws_iam_role" {
    defaults = {
      arn = "arn:aws:iam::123456789012:role/langgraph-s3-agent"
    }
  }
  mock_resource "aws_dynamodb_table" {
    defaults = {
      arn = "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table"
    }
  }
}

variables {
  bucket_name = "unit-bucket"
  table_name  = "unit-table"
  prefix      = "agents/prod"
}

run "defaults" {
  command = apply

  assert {
    condition     = output.checkpointer_conn_string == "s3://unit-bucket/agents/prod?table=unit-table"
    error_message = "the connection string must paste straight into from_conn_string"
  }
  assert {
    condition     = output.store_conn_string == "s3://unit-bucket/agents/prod"
    error_message = "store connection string"
  }
  assert {
    condition = alltrue([
      for r in aws_s3_bucket_lifecycle_configuration.this.rule :
      length(r.expiration) == 0 || (length(r.filter) == 1 && length(r.filter[0].tag) == 1)
    ])
    error_message = "only TTL-tagged objects may expire: checkpoint blobs must never expire by age"
  }
  assert {
    condition = toset([
      for r in aws_s3_bucket_lifecycle_configuration.this.rule : r.filter[0].tag[0].value
      if length(r.filter[0].tag) == 1
    ]) == toset([for d in [1, 2, 3, 7, 14, 30, 60, 90, 180, 365, 730, 1825, 3650] : "${d}d"])
    error_message = "one TTL rule per class the store tags"
  }
  assert {
    condition = alltrue([
      for r in aws_s3_bucket_lifecycle_configuration.this.rule :
      r.expiration[0].days == tonumber(trimsuffix(r.filter[0].tag[0].value, "d"))
      if length(r.expiration) == 1
    ])
    error_message = "a TTL class Nd expires after exactly N days"
  }
  assert {
    condition = one([
      for r in aws_s3_bucket_lifecycle_configuration.this.rule : [for t in r.transition : t.storage_class]
      if r.id == "langgraph-s3-archive-checkpoints"
    ]) == ["STANDARD_IA", "GLACIER_IR"]
    error_message = "checkpoint history transitions to Standard-IA, then Glacier Instant Retrieval"
  }
  assert {
    condition     = one([for r in aws_s3_bucket_lifecycle_configuration.this.rule : r.filter[0].prefix if r.id == "langgraph-s3-archive-checkpoints"]) == "agents/prod/threads/"
    error_message = "transitions apply to checkpoint history only"
  }
  assert {
    condition     = aws_dynamodb_table.manifest.hash_key == "pk" && aws_dynamodb_table.manifest.range_key == "sk"
    error_message = "the saver's key schema is pk/sk"
  }
  assert {
    condition     = aws_dynamodb_table.manifest.billing_mode == "PAY_PER_REQUEST" && aws_dynamodb_table.manifest.point_in_time_recovery[0].enabled
    error_message = "on-demand billing and point-in-time recovery"
  }
  assert {
    condition     = aws_dynamodb_table.manifest.ttl[0].attribute_name == "expires_at" && aws_dynamodb_table.manifest.server_side_encryption[0].enabled
    error_message = "TTL on the attribute the library writes, encryption on"
  }
  assert {
    condition     = one(aws_s3_bucket_server_side_encryption_configuration.this.rule).apply_server_side_encryption_by_default[0].sse_algorithm == "AES256"
    error_message = "SSE-S3 by default"
  }
  assert {
    condition     = aws_s3_bucket_public_access_block.this.block_public_acls && aws_s3_bucket_public_access_block.this.restrict_public_buckets
    error_message = "public access blocked"
  }
  assert {
    condition     = jsondecode(aws_s3_bucket_policy.tls_only.policy).Statement[0].Condition.Bool["aws:SecureTransport"] == "false"
    error_message = "non-TLS requests are denied"
  }
  assert {
    condition = alltrue(flatten([
      for s in jsondecode(output.policy_json).Statement : [for a in s.Action : !strcontains(a, "*")]
    ]))
    error_message = "no wildcard actions in the agent policy"
  }
  assert {
    condition     = jsondecode(output.policy_json).Statement[0].Condition.StringLike["s3:prefix"] == ["agents/prod/*"]
    error_message = "ListBucket only under the prefix"
  }
  assert {
    condition     = jsondecode(output.policy_json).Statement[1].Resource == ["arn:aws:s3:::unit-bucket/agents/prod/*"]
    error_message = "object actions only under the prefix"
  }
  assert {
    condition     = output.lambda_role_arn == null && length(aws_iam_role.lambda) == 0
    error_message = "no role unless asked"
  }
}

run "kms_versioning_and_role" {
  command = apply
  variables {
    kms_key_arn        = "arn:aws:kms:us-east-1:123456789012:key/abc"
    versioning         = true
    create_lambda_role = true
    prefix             = ""
  }
  assert {
    condition     = one(aws_s3_bucket_server_side_encryption_configuration.this.rule).apply_server_side_encryption_by_default[0].sse_algorithm == "aws:kms"
    error_message = "SSE-KMS with a key"
  }
  assert {
    condition     = aws_dynamodb_table.manifest.server_side_encryption[0].kms_key_arn == "arn:aws:kms:us-east-1:123456789012:key/abc"
    error_message = "the table uses the key too"
  }
  assert {
    condition     = contains(flatten([for s in jsondecode(output.policy_json).Statement : s.Action]), "kms:GenerateDataKey")
    error_message = "the agent may use the key"
  }
  assert {
    condition     = contains([for r in aws_s3_bucket_lifecycle_configuration.this.rule : r.id], "langgraph-s3-noncurrent-versions")
    error_message = "old versions are cleaned up when versioning is on"
  }
  assert {
    condition     = aws_s3_bucket_versioning.this.versioning_configuration[0].status == "Enabled"
    error_message = "versioning on"
  }
  assert {
    condition     = jsondecode(output.policy_json).Statement[0].Condition.StringLike["s3:prefix"] == ["*"]
    error_message = "an empty prefix means the whole bucket"
  }
  assert {
    condition     = output.checkpointer_conn_string == "s3://unit-bucket?table=unit-table"
    error_message = "no prefix in the connection string"
  }
  assert {
    condition     = length(aws_iam_role_policy_attachment.agent) == 1 && length(aws_iam_role_policy_attachment.logs) == 1
    error_message = "the role gets the agent policy and basic logging"
  }
}

run "transitions_must_be_ordered" {
  command = plan
  variables {
    transition_to_ia_days         = 60
    transition_to_glacier_ir_days = 45
  }
  expect_failures = [aws_s3_bucket_lifecycle_configuration.this]
}

run "standard_ia_needs_30_days" {
  command = plan
  variables {
    transition_to_ia_days = 10
  }
  expect_failures = [var.transition_to_ia_days]
}
