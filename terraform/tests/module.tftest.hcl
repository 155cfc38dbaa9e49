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
      arn        = "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table"
      stream_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table/stream/2026-12-01T00:00:00.000"
    }
  }
  mock_resource "aws_lambda_function" {
    defaults = {
      arn = "arn:aws:lambda:us-east-1:123456789012:function:unit-bucket-sweeper"
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
      if r.id == "langgraph-s3-archive-packs"
    ]) == ["STANDARD_IA", "GLACIER_IR"]
    error_message = "archive packs transition to Standard-IA, then Glacier Instant Retrieval"
  }
  assert {
    condition     = one([for r in aws_s3_bucket_lifecycle_configuration.this.rule : r.filter[0].and[0].prefix if r.id == "langgraph-s3-archive-packs"]) == "agents/prod/packs/"
    error_message = "transitions apply to packs only: the small objects under threads/ would be billed as 128 KB each"
  }
  assert {
    condition     = one([for r in aws_s3_bucket_lifecycle_configuration.this.rule : r.filter[0].and[0].object_size_greater_than if r.id == "langgraph-s3-archive-packs"]) == 131072
    error_message = "a pack under 128 KB stays in Standard (the colder classes bill it as 128 KB)"
  }
  assert {
    condition = alltrue([
      for r in aws_s3_bucket_lifecycle_configuration.this.rule :
      length(r.transition) == 0 || r.id == "langgraph-s3-archive-packs"
    ])
    error_message = "no other rule moves objects: small ones must stay in Standard"
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
    condition     = length(aws_s3_bucket_policy.tls_only) == 1
    error_message = "the TLS-only bucket policy is there by default"
  }
  assert {
    condition = one([
      for s in jsondecode(aws_s3_bucket_policy.tls_only[0].policy).Statement : s
      if s.Effect == "Deny" && s.Action == "s3:*" && s.Condition.Bool["aws:SecureTransport"] == "false"
    ]) != null
    error_message = "non-TLS requests are denied"
  }
  assert {
    condition     = output.name == "unit-bucket" && aws_iam_policy.agent.name == "unit-bucket-agent"
    error_message = "with no name, the prefix is the (globally unique) bucket name"
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
    name               = "team-a_prod"
  }
  assert {
    condition     = aws_iam_role.lambda[0].name == "team-a_prod-lambda" && aws_iam_policy.agent.name == "team-a_prod-agent"
    error_message = "the role and the policy names carry the name prefix"
  }
  assert {
    condition     = output.lambda_role_name == "team-a_prod-lambda" && output.policy_name == "team-a_prod-agent" && output.name == "team-a_prod"
    error_message = "the outputs report the names in effect"
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

# ------------------------------------------------------------------ names
# IAM names are account-wide: two deployments in one account must not collide.

run "second_deployment_gets_its_own_names" {
  command = plan
  variables {
    create_lambda_role = true
    name               = "team-b-prod"
  }
  assert {
    condition     = aws_iam_role.lambda[0].name == "team-b-prod-lambda" && aws_iam_policy.agent.name == "team-b-prod-agent"
    error_message = "the role and the policy names carry the name prefix"
  }
  assert {
    condition = (
      output.lambda_role_name != run.kms_versioning_and_role.lambda_role_name
      && output.policy_name != run.kms_versioning_and_role.policy_name
    )
    error_message = "two names give two different roles and policies"
  }
}

run "default_name_follows_the_bucket" {
  command = plan
  variables {
    bucket_name        = "other-bucket"
    create_lambda_role = true
  }
  assert {
    condition     = aws_iam_role.lambda[0].name == "other-bucket-lambda" && aws_iam_policy.agent.name == "other-bucket-agent"
    error_message = "with no name, the names derive from the bucket"
  }
  assert {
    condition     = output.policy_name != run.defaults.policy_name
    error_message = "two deployments on two buckets, no name given: two different policies"
  }
}

# A bucket name may have dots and 63 characters; the derived prefix may have
# neither, and must stay distinct: truncated, plus a hash of the whole name.
run "default_name_of_a_dotted_bucket" {
  command = plan
  variables {
    bucket_name        = "other.bucket"
    create_lambda_role = true
  }
  assert {
    condition     = can(regex("^other-bucket-[0-9a-f]{8}$", output.name))
    error_message = "dots become hyphens, and a hash keeps it distinct"
  }
  assert {
    condition     = output.policy_name != run.default_name_follows_the_bucket.policy_name && output.lambda_role_name != run.default_name_follows_the_bucket.lambda_role_name
    error_message = "other.bucket and other-bucket must not share names"
  }
}

run "default_name_of_a_long_bucket" {
  command = plan
  variables {
    bucket_name        = "acme-langgraph-agents-state-eu-west-1-production-0123456789-aaa"
    create_lambda_role = true
  }
  assert {
    condition     = can(regex("^acme-langgraph-agents-state-eu-west-1-p-[0-9a-f]{8}$", output.name))
    error_message = "a long bucket name is truncated, with a hash"
  }
  assert {
    condition     = length(output.name) == 48 && length(aws_iam_role.lambda[0].name) <= 64
    error_message = "IAM role names have at most 64 characters"
  }
}

run "default_name_of_another_long_bucket" {
  command = plan
  variables {
    bucket_name        = "acme-langgraph-agents-state-eu-west-1-production-0123456789-bbb"
    create_lambda_role = true
  }
  assert {
    condition     = output.lambda_role_name != run.default_name_of_a_long_bucket.lambda_role_name && output.policy_name != run.default_name_of_a_long_bucket.policy_name
    error_message = "buckets differing after the truncation point still get different names"
  }
  assert {
    condition     = can(regex("^[A-Za-z0-9]([A-Za-z0-9_-]{0,46}[A-Za-z0-9])?$", output.name))
    error_message = "a derived name passes the validation an explicit one must pass"
  }
}

run "name_of_48_characters_is_accepted" {
  command = plan
  variables {
    name = "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd"
  }
  assert {
    condition     = aws_iam_policy.agent.name == "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd-agent"
    error_message = "the longest name allowed"
  }
}

run "name_rejects_49_characters" {
  command = plan
  variables {
    name = "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcde"
  }
  expect_failures = [var.name]
}

run "name_rejects_other_characters" {
  command = plan
  variables {
    name = "my agents/prod"
  }
  expect_failures = [var.name]
}

# ------------------------------------------------------------------- TLS
run "tls_policy_can_be_dropped_for_emulators" {
  command = plan
  variables {
    enforce_tls = false
  }
  assert {
    condition     = length(aws_s3_bucket_policy.tls_only) == 0
    error_message = "enforce_tls = false: no TLS-only bucket policy"
  }
  assert {
    condition     = aws_s3_bucket_public_access_block.this.block_public_policy
    error_message = "only the TLS statement goes; public access stays blocked"
  }
}

# ------------------------------------------------------ thread TTL sweeper
run "sweeper_is_off_by_default" {
  command = plan
  assert {
    condition     = length(aws_lambda_function.sweeper) == 0 && length(aws_lambda_event_source_mapping.sweeper) == 0 && length(aws_iam_role.sweeper) == 0
    error_message = "no sweeper unless asked for"
  }
  assert {
    condition     = aws_dynamodb_table.manifest.stream_enabled == false
    error_message = "no stream unless the sweeper needs it"
  }
}

run "sweeper_wiring" {
  command = apply
  variables {
    enable_ttl_sweeper = true
    sweeper_package    = "tests/fixtures/sweeper.zip"
  }
  assert {
    condition     = aws_dynamodb_table.manifest.stream_enabled && aws_dynamodb_table.manifest.stream_view_type == "OLD_IMAGE"
    error_message = "the sweeper reads removed items' old images from the table's stream"
  }
  assert {
    condition     = aws_lambda_function.sweeper[0].handler == "langgraph_s3.sweeper.handler"
    error_message = "the handler the library ships"
  }
  assert {
    condition = aws_lambda_function.sweeper[0].environment[0].variables == tomap({
      LANGGRAPH_S3_BUCKET = "unit-bucket"
      LANGGRAPH_S3_PREFIX = "agents/prod"
      LANGGRAPH_S3_TABLE  = "unit-table"
    })
    error_message = "the sweeper serves this deployment only (a table may be shared)"
  }
  assert {
    condition     = aws_lambda_event_source_mapping.sweeper[0].event_source_arn == aws_dynamodb_table.manifest.stream_arn
    error_message = "the mapping reads the manifest's stream"
  }
  assert {
    condition     = aws_lambda_event_source_mapping.sweeper[0].function_response_types == toset(["ReportBatchItemFailures"])
    error_message = "a failed record is retried, not the whole batch"
  }
  assert {
    condition = jsondecode(one(one(aws_lambda_event_source_mapping.sweeper[0].filter_criteria).filter).pattern) == {
      eventName    = ["REMOVE"]
      userIdentity = { type = ["Service"], principalId = ["dynamodb.amazonaws.com"] }
    }
    error_message = "only DynamoDB's TTL deletions invoke the sweeper"
  }
  assert {
    condition = toset(flatten([for st in jsondecode(output.sweeper_policy_json).Statement : st.Action])) == toset([
      "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
      "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem",
      "s3:ListBucket", "s3:DeleteObject", "s3:GetObject", "logs:CreateLogStream", "logs:PutLogEvents",
    ])
    error_message = "the sweeper's role may read the stream, tombstone the thread, list and delete its objects, read pack indexes: nothing else"
  }
  assert {
    condition = one([
      for st in jsondecode(output.sweeper_policy_json).Statement : st.Resource if st.Sid == "DeleteThreadObjects"
    ]) == ["arn:aws:s3:::unit-bucket/agents/prod/threads/*", "arn:aws:s3:::unit-bucket/agents/prod/packs/*"]
    error_message = "the sweeper deletes thread objects and packs of its own prefix only (never the store's)"
  }
  assert {
    condition     = output.sweeper_function_name == "unit-bucket-sweeper"
    error_message = "the sweeper is named after the deployment"
  }
}

run "sweeper_needs_a_package" {
  command = plan
  variables {
    enable_ttl_sweeper = true
  }
  expect_failures = [aws_lambda_function.sweeper]
}
