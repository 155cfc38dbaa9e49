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
  mock_resource "aws_sfn_state_machine" {
    defaults = {
      arn = "arn:aws:states:us-east-1:123456789012:stateMachine:unit-bucket-archiver"
    }
  }
  mock_resource "aws_sqs_queue" {
    defaults = {
      arn = "arn:aws:sqs:us-east-1:123456789012:unit-bucket-archiver-dlq"
      id  = "https://sqs.us-east-1.amazonaws.com/123456789012/unit-bucket-archiver-dlq"
      url = "https://sqs.us-east-1.amazonaws.com/123456789012/unit-bucket-archiver-dlq"
    }
  }
  mock_data "aws_caller_identity" {
    defaults = {
      account_id = "123456789012"
    }
  }
  mock_data "aws_region" {
    defaults = {
      name = "us-east-1"
    }
  }
  mock_data "aws_partition" {
    defaults = {
      partition = "aws"
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
    condition     = aws_dynamodb_table.manifest[0].hash_key == "pk" && aws_dynamodb_table.manifest[0].range_key == "sk"
    error_message = "the saver's key schema is pk/sk"
  }
  assert {
    condition     = aws_dynamodb_table.manifest[0].billing_mode == "PAY_PER_REQUEST" && aws_dynamodb_table.manifest[0].point_in_time_recovery[0].enabled
    error_message = "on-demand billing and point-in-time recovery"
  }
  assert {
    condition     = aws_dynamodb_table.manifest[0].ttl[0].attribute_name == "expires_at" && aws_dynamodb_table.manifest[0].server_side_encryption[0].enabled
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
    condition = jsondecode(output.policy_json).Statement[2].Condition == {
      "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["unit-bucket/agents~2fprod/*"] }
    }
    error_message = "the manifest's items only under the deployment's partition keys (langgraph_s3.ops.deploy.iam.leading_keys)"
  }
  assert {
    condition     = !contains(flatten([for s in jsondecode(output.policy_json).Statement : s.Action]), "dynamodb:Scan")
    error_message = "no Scan: it names no partition key, so LeadingKeys cannot limit it"
  }
  assert {
    condition     = output.lambda_role_arn == null && length(aws_iam_role.lambda) == 0
    error_message = "no role unless asked"
  }
  assert {
    condition = (
      length(aws_lambda_function.archiver) + length(aws_iam_role.archiver) + length(aws_iam_role.archiver_sfn)
      + length(aws_iam_role.archiver_events) + length(aws_sfn_state_machine.archiver) + length(aws_sqs_queue.archiver_dlq)
      + length(aws_cloudwatch_event_rule.archiver) + length(aws_cloudwatch_event_target.archiver)
      + length(aws_cloudwatch_metric_alarm.archiver_failed) + length(aws_cloudwatch_metric_alarm.archiver_dlq)
      + length(aws_cloudwatch_log_group.archiver) + length(data.aws_caller_identity.current)
    ) == 0
    error_message = "no archiver (nor its account lookup) unless asked for"
  }
  assert {
    condition     = output.archiver_state_machine_arn == null && output.archiver_dlq_url == null && output.archiver_function_name == null
    error_message = "the archiver's outputs are null when it is off"
  }
  assert {
    condition     = length(aws_dynamodb_table.manifest[0].global_secondary_index) == 0 && length(aws_dynamodb_table.manifest[0].attribute) == 2
    error_message = "no metadata index unless asked for"
  }
  assert {
    condition     = !contains([for s in jsondecode(output.policy_json).Statement : s.Sid], "ManifestIndexes")
    error_message = "no index grant without an index"
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
    condition     = aws_dynamodb_table.manifest[0].server_side_encryption[0].kms_key_arn == "arn:aws:kms:us-east-1:123456789012:key/abc"
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
    condition     = aws_dynamodb_table.manifest[0].stream_enabled == false
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
    condition     = aws_dynamodb_table.manifest[0].stream_enabled && aws_dynamodb_table.manifest[0].stream_view_type == "OLD_IMAGE"
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
    condition     = aws_lambda_event_source_mapping.sweeper[0].event_source_arn == aws_dynamodb_table.manifest[0].stream_arn
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
      "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem",
      "s3:ListBucket", "s3:DeleteObject", "s3:GetObject", "logs:CreateLogStream", "logs:PutLogEvents",
    ])
    error_message = "the sweeper's role may read the stream, tombstone the thread, end a late pass, list and delete its objects, read pack indexes: nothing else"
  }
  assert {
    condition = one([
      for st in jsondecode(output.sweeper_policy_json).Statement : st.Condition if st.Sid == "TombstoneTheThread"
    ]) == { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["unit-bucket/agents~2fprod/*"] } }
    error_message = "the sweeper changes only its own deployment's items (a shared table's others are out of reach)"
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

# ---------------------------------------------- the manifest in the bucket
run "manifest_in_the_bucket" {
  command = apply
  variables {
    manifest   = "s3"
    table_name = null
  }

  assert {
    condition     = output.checkpointer_conn_string == "s3://unit-bucket/agents/prod?manifest=s3"
    error_message = "the connection string keeps the manifest in the bucket"
  }
  assert {
    condition     = length(aws_dynamodb_table.manifest) == 0 && output.table_name == null
    error_message = "no table is made with manifest = \"s3\""
  }
  assert {
    condition     = !strcontains(output.policy_json, "dynamodb:")
    error_message = "the agent needs no DynamoDB permission with the manifest in the bucket"
  }
  assert {
    condition = alltrue([
      for st in jsondecode(output.policy_json).Statement :
      st.Resource == ["arn:aws:s3:::unit-bucket/agents/prod/manifest/*"] if st.Sid == "EraseManifestVersions"
    ]) && strcontains(output.policy_json, "s3:DeleteObjectVersion")
    error_message = "forgetting deletes a key record's noncurrent versions, under manifest/ only"
  }
}

run "manifest_in_the_bucket_has_no_stream_to_sweep_from" {
  command = plan
  variables {
    manifest           = "s3"
    table_name         = null
    enable_ttl_sweeper = true
    sweeper_package    = "tests/fixtures/sweeper.zip"
  }
  expect_failures = [aws_lambda_function.sweeper]
}

run "a_table_manifest_needs_its_name" {
  command = plan
  variables {
    table_name = null
  }
  expect_failures = [var.table_name]
}

# ------------------------------------------------------------- the archiver
run "archiver_needs_a_package" {
  command = plan
  variables {
    enable_archiver = true
  }
  expect_failures = [aws_lambda_function.archiver]
}

run "archiver_inputs_are_checked" {
  command = plan
  variables {
    archiver_segments     = 1001
    archiver_schedule     = "daily"
    archiver_store_prefix = ""
    index_metadata        = ["user.id"]
  }
  expect_failures = [var.archiver_segments, var.archiver_schedule, var.archiver_store_prefix, var.index_metadata]
}

run "archiver_wiring" {
  command = plan
  # plan mode: these mocked values stand for the computed ones the definition and
  # the policies are built from (the mock provider leaves them unknown in a plan)
  override_resource {
    target          = aws_s3_bucket.this
    override_during = plan
    values          = { id = "unit-bucket", arn = "arn:aws:s3:::unit-bucket" }
  }
  override_resource {
    target          = aws_dynamodb_table.manifest
    override_during = plan
    values          = { arn = "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table" }
  }
  override_resource {
    target          = aws_lambda_function.archiver
    override_during = plan
    values          = { arn = "arn:aws:lambda:us-east-1:123456789012:function:unit-bucket-archiver" }
  }
  override_resource {
    target          = aws_sqs_queue.archiver_dlq
    override_during = plan
    values = {
      arn = "arn:aws:sqs:us-east-1:123456789012:unit-bucket-archiver-dlq"
      url = "https://sqs.us-east-1.amazonaws.com/123456789012/unit-bucket-archiver-dlq"
    }
  }
  override_resource {
    target          = aws_sfn_state_machine.archiver
    override_during = plan
    values          = { arn = "arn:aws:states:us-east-1:123456789012:stateMachine:unit-bucket-archiver" }
  }
  override_resource {
    target          = aws_iam_role.archiver_events
    override_during = plan
    values          = { arn = "arn:aws:iam::123456789012:role/unit-bucket-archiver-evt" }
  }
  variables {
    enable_archiver          = true
    archiver_package         = "tests/fixtures/sweeper.zip"
    archiver_segments        = 24
    archiver_max_concurrency = 6
    archiver_retry_attempts  = 4
    archiver_schedule        = "cron(0 3 * * ? *)"
    archiver_store_prefix    = "memories"
    archiver_alarm_actions   = ["arn:aws:sns:us-east-1:123456789012:ops"]
    index_metadata           = ["user_id", "org_team"]
    kms_key_arn              = "arn:aws:kms:us-east-1:123456789012:key/abc"
  }
  # the manifest's metadata indexes
  assert {
    condition = one([
      for g in aws_dynamodb_table.manifest[0].global_secondary_index : [g.hash_key, g.range_key, g.projection_type]
      if g.name == "meta_user_id"
    ]) == ["ix_user_id", "pk", "KEYS_ONLY"]
    error_message = "index_metadata = [\"user_id\"]: index meta_user_id on ix_user_id, then pk, keys only"
  }
  assert {
    condition = (
      toset([for g in aws_dynamodb_table.manifest[0].global_secondary_index : g.name]) == toset(["meta_user_id", "meta_org_team"])
      && toset([for a in aws_dynamodb_table.manifest[0].attribute : "${a.name}:${a.type}"]) == toset(["pk:S", "sk:S", "ix_user_id:S", "ix_org_team:S"])
    )
    error_message = "one string attribute ix_K and one index meta_K per key"
  }
  assert {
    condition = one([
      for s in jsondecode(output.policy_json).Statement : [s.Action, s.Resource] if s.Sid == "ManifestIndexes"
    ]) == [["dynamodb:Query"], ["arn:aws:dynamodb:us-east-1:123456789012:table/unit-table/index/*"]]
    error_message = "the agent may Query the table's indexes, nothing more"
  }
  assert {
    condition = one([
      for s in jsondecode(output.policy_json).Statement : s.Condition if s.Sid == "ManifestIndexes"
    ]) == { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["unit-bucket/agents~2fprod/*"] } }
    error_message = "an index's hash key starts with the deployment key: the same patterns limit its Query"
  }
  # the Lambda
  assert {
    condition     = aws_lambda_function.archiver[0].handler == "langgraph_s3.archiver.handler" && output.archiver_function_name == "unit-bucket-archiver"
    error_message = "the handler the library ships, named after the deployment"
  }
  assert {
    condition = aws_lambda_function.archiver[0].environment[0].variables == tomap({
      LANGGRAPH_S3_BUCKET          = "unit-bucket"
      LANGGRAPH_S3_PREFIX          = "agents/prod"
      LANGGRAPH_S3_TABLE           = "unit-table"
      LANGGRAPH_S3_PACK_AFTER_DAYS = "30"
      LANGGRAPH_S3_STORE_PREFIX    = "memories"
      LANGGRAPH_S3_INDEX_METADATA  = "user_id,org_team"
    })
    error_message = "the archiver serves this deployment (and its store and indexes)"
  }
  assert {
    condition     = aws_lambda_function.archiver[0].memory_size == 1024 && aws_lambda_function.archiver[0].timeout == 900
    error_message = "the archiver's defaults"
  }
  assert {
    condition = toset(flatten([for st in jsondecode(output.archiver_policy_json).Statement : st.Action])) == toset([
      "dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:UpdateItem",
      "s3:ListBucket", "s3:DeleteObject", "s3:GetObject", "s3:PutObject",
      "logs:CreateLogStream", "logs:PutLogEvents", "kms:Decrypt", "kms:GenerateDataKey",
    ])
    error_message = "the archiver's role: the manifest, its own objects, its logs, the key; nothing else"
  }
  assert {
    condition = one([
      for st in jsondecode(output.archiver_policy_json).Statement : st.Condition.StringLike["s3:prefix"] if st.Sid == "ListOwnData"
      ]) == ["agents/prod/threads/*", "agents/prod/packs/*", "memories/store/*"] && one([
      for st in jsondecode(output.archiver_policy_json).Statement : st.Resource if st.Sid == "PackAndSweepOwnData"
    ]) == ["arn:aws:s3:::unit-bucket/agents/prod/threads/*", "arn:aws:s3:::unit-bucket/agents/prod/packs/*", "arn:aws:s3:::unit-bucket/memories/store/*"]
    error_message = "the archiver lists and writes threads, packs and the store's items only"
  }
  assert {
    condition = one([
      for st in jsondecode(output.archiver_policy_json).Statement : st.Resource if st.Sid == "Manifest"
    ]) == ["arn:aws:dynamodb:us-east-1:123456789012:table/unit-table", "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table/index/*"]
    error_message = "the archiver reads the table and its indexes"
  }
  assert {
    condition = (
      one([for st in jsondecode(output.archiver_policy_json).Statement : st.Condition if st.Sid == "Manifest"])
      == { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["unit-bucket/agents~2fprod/*"] } }
      && one([for st in jsondecode(output.archiver_policy_json).Statement : [st.Action, st.Resource] if st.Sid == "ScanTheManifest"])
      == [["dynamodb:Scan"], ["arn:aws:dynamodb:us-east-1:123456789012:table/unit-table"]]
    )
    error_message = "the archiver Scans the table (every deployment's items), but changes only its own deployment's"
  }
  # the state machine
  assert {
    condition     = aws_sfn_state_machine.archiver[0].type == "STANDARD" && aws_sfn_state_machine.archiver[0].name == "unit-bucket-archiver"
    error_message = "a standard state machine named after the deployment"
  }
  assert {
    condition     = jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Shards.Parameters["segments.$"] == "States.ArrayRange(0, 23, 1)"
    error_message = "24 shards: 0 to 23"
  }
  assert {
    condition = (
      jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.ProcessorConfig == { Mode = "DISTRIBUTED", ExecutionType = "STANDARD" }
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.MaxConcurrency == 6
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ToleratedFailurePercentage == 0
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemsPath == "$.segments"
    )
    error_message = "a Distributed Map over the shards, 6 at a time, failing on any failed shard"
  }
  assert {
    condition     = jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemSelector == { "segment.$" = "$$.Map.Item.Value", total_segments = 24 }
    error_message = "each shard's event is {segment: I, total_segments: N}"
  }
  assert {
    condition = (
      jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.Resource == "arn:aws:states:::lambda:invoke"
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.Parameters == { FunctionName = aws_lambda_function.archiver[0].arn, "Payload.$" = "$" }
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.OutputPath == "$.Payload"
    )
    error_message = "a shard invokes the archiver with its event and returns its report"
  }
  assert {
    condition = (
      one(jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.Retry).MaxAttempts == 4
      && one(jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.Retry).BackoffRate == 2
      && toset(one(jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.Retry).ErrorEquals) == toset([
        "Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException", "Lambda.TooManyRequestsException", "States.TaskFailed",
      ])
    )
    error_message = "a failed shard is retried archiver_retry_attempts times, with backoff"
  }
  assert {
    condition = (
      one(jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.Catch).Next == "DeadLetter"
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.DeadLetter.Resource == "arn:aws:states:::sqs:sendMessage"
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.DeadLetter.Parameters.QueueUrl == aws_sqs_queue.archiver_dlq[0].url
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.DeadLetter.Next == "ShardFailed"
      && jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ShardFailed.Type == "Fail"
    )
    error_message = "then it goes to the dead-letter queue, and fails"
  }
  assert {
    condition = toset(keys(jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.DeadLetter.Parameters.MessageBody)) == toset([
      "segment.$", "total_segments.$", "error.$", "execution.$",
    ])
    error_message = "the dead letter names the shard and carries the error and its cause"
  }
  assert {
    condition = toset(flatten([for st in jsondecode(aws_iam_role_policy.archiver_sfn[0].policy).Statement : [for a in st.Action : "${a} ${join(",", st.Resource)}"]])) == toset([
      "lambda:InvokeFunction ${aws_lambda_function.archiver[0].arn},${aws_lambda_function.archiver[0].arn}:*",
      "sqs:SendMessage arn:aws:sqs:us-east-1:123456789012:unit-bucket-archiver-dlq",
      "states:StartExecution arn:aws:states:us-east-1:123456789012:stateMachine:unit-bucket-archiver",
      "states:DescribeExecution arn:aws:states:us-east-1:123456789012:execution:unit-bucket-archiver/*",
      "states:StopExecution arn:aws:states:us-east-1:123456789012:execution:unit-bucket-archiver/*",
    ])
    error_message = "the state machine's role: invoke the archiver, dead-letter, run its own child executions; nothing else"
  }
  # the queue, the schedule, the alarms
  assert {
    condition     = aws_sqs_queue.archiver_dlq[0].sqs_managed_sse_enabled && aws_sqs_queue.archiver_dlq[0].message_retention_seconds == 1209600
    error_message = "an encrypted dead-letter queue keeping messages 14 days"
  }
  assert {
    condition = (
      aws_cloudwatch_event_rule.archiver[0].schedule_expression == "cron(0 3 * * ? *)"
      && aws_cloudwatch_event_target.archiver[0].arn == aws_sfn_state_machine.archiver[0].arn
      && aws_cloudwatch_event_target.archiver[0].role_arn == aws_iam_role.archiver_events[0].arn
    )
    error_message = "the schedule starts the state machine"
  }
  assert {
    condition = jsondecode(aws_iam_role_policy.archiver_events[0].policy).Statement == [{
      Sid = "StartTheArchiver", Effect = "Allow", Action = ["states:StartExecution"], Resource = [aws_sfn_state_machine.archiver[0].arn]
    }]
    error_message = "the schedule's role may start this state machine only"
  }
  assert {
    condition = (
      aws_cloudwatch_metric_alarm.archiver_failed[0].namespace == "AWS/States"
      && aws_cloudwatch_metric_alarm.archiver_failed[0].metric_name == "ExecutionsFailed"
      && aws_cloudwatch_metric_alarm.archiver_failed[0].dimensions == tomap({ StateMachineArn = aws_sfn_state_machine.archiver[0].arn })
      && aws_cloudwatch_metric_alarm.archiver_dlq[0].namespace == "AWS/SQS"
      && aws_cloudwatch_metric_alarm.archiver_dlq[0].metric_name == "ApproximateNumberOfMessagesVisible"
      && aws_cloudwatch_metric_alarm.archiver_dlq[0].dimensions == tomap({ QueueName = "unit-bucket-archiver-dlq" })
    )
    error_message = "one alarm on failed runs, one on the dead-letter queue"
  }
  assert {
    condition = alltrue([
      for a in [aws_cloudwatch_metric_alarm.archiver_failed[0], aws_cloudwatch_metric_alarm.archiver_dlq[0]] :
      a.threshold == 1 && a.comparison_operator == "GreaterThanOrEqualToThreshold" && a.treat_missing_data == "notBreaching"
      && a.alarm_actions == toset(["arn:aws:sns:us-east-1:123456789012:ops"])
    ])
    error_message = "both alarms fire at the first failure, notify archiver_alarm_actions, and stay quiet without data"
  }
  assert {
    condition = (
      output.archiver_state_machine_arn == aws_sfn_state_machine.archiver[0].arn
      && output.archiver_dlq_url == "https://sqs.us-east-1.amazonaws.com/123456789012/unit-bucket-archiver-dlq"
    )
    error_message = "the outputs"
  }
}

# one shard, and the defaults: no store sweep, no index, no key
run "archiver_with_one_shard" {
  command = plan
  # plan mode: these mocked values stand for the computed ones the definition and
  # the policies are built from (the mock provider leaves them unknown in a plan)
  override_resource {
    target          = aws_s3_bucket.this
    override_during = plan
    values          = { id = "unit-bucket", arn = "arn:aws:s3:::unit-bucket" }
  }
  override_resource {
    target          = aws_dynamodb_table.manifest
    override_during = plan
    values          = { arn = "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table" }
  }
  override_resource {
    target          = aws_lambda_function.archiver
    override_during = plan
    values          = { arn = "arn:aws:lambda:us-east-1:123456789012:function:unit-bucket-archiver" }
  }
  override_resource {
    target          = aws_sqs_queue.archiver_dlq
    override_during = plan
    values = {
      arn = "arn:aws:sqs:us-east-1:123456789012:unit-bucket-archiver-dlq"
      url = "https://sqs.us-east-1.amazonaws.com/123456789012/unit-bucket-archiver-dlq"
    }
  }
  override_resource {
    target          = aws_sfn_state_machine.archiver
    override_during = plan
    values          = { arn = "arn:aws:states:us-east-1:123456789012:stateMachine:unit-bucket-archiver" }
  }
  override_resource {
    target          = aws_iam_role.archiver_events
    override_during = plan
    values          = { arn = "arn:aws:iam::123456789012:role/unit-bucket-archiver-evt" }
  }
  variables {
    enable_archiver   = true
    archiver_package  = "tests/fixtures/sweeper.zip"
    archiver_segments = 1
    name              = "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd"
  }
  assert {
    condition     = jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Shards.Parameters["segments.$"] == "States.Array(0)"
    error_message = "one shard: the list [0] (no range to build)"
  }
  assert {
    condition     = jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemSelector.total_segments == 1
    error_message = "the one shard is the whole table"
  }
  assert {
    condition     = one(jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.ItemProcessor.States.ArchiveShard.Retry).MaxAttempts == 3
    error_message = "three retries by default"
  }
  assert {
    condition     = jsondecode(aws_sfn_state_machine.archiver[0].definition).States.Archive.MaxConcurrency == 8 && aws_cloudwatch_event_rule.archiver[0].schedule_expression == "rate(1 day)"
    error_message = "daily, 8 shards at a time, by default"
  }
  assert {
    condition = aws_lambda_function.archiver[0].environment[0].variables == tomap({
      LANGGRAPH_S3_BUCKET          = "unit-bucket"
      LANGGRAPH_S3_PREFIX          = "agents/prod"
      LANGGRAPH_S3_TABLE           = "unit-table"
      LANGGRAPH_S3_PACK_AFTER_DAYS = "30"
    })
    error_message = "no store prefix, no index keys unless given"
  }
  assert {
    condition = one([
      for st in jsondecode(output.archiver_policy_json).Statement : st.Condition.StringLike["s3:prefix"] if st.Sid == "ListOwnData"
    ]) == ["agents/prod/threads/*", "agents/prod/packs/*"]
    error_message = "without a store prefix the archiver never touches the store"
  }
  assert {
    condition     = !contains([for st in jsondecode(output.archiver_policy_json).Statement : st.Sid], "EncryptionKey")
    error_message = "no key, no key grant"
  }
  assert {
    condition = alltrue([for n in [
      aws_lambda_function.archiver[0].function_name, aws_iam_role.archiver[0].name, aws_iam_role.archiver_sfn[0].name,
      aws_iam_role.archiver_events[0].name, aws_cloudwatch_event_rule.archiver[0].name,
    ] : length(n) <= 64]) && length(aws_sqs_queue.archiver_dlq[0].name) <= 80
    error_message = "the longest name still fits every limit (functions, roles, rules: 64; queues: 80)"
  }
}

# ----------------------------------------------------------- a shared table
# A second deployment on the first's table (another prefix; the mocked bucket's name is
# the same): it creates none, and its agent may touch only its own partition keys there.
run "shared_table" {
  command = apply
  override_data {
    target = data.aws_dynamodb_table.shared
    values = {
      arn                    = "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table"
      hash_key               = "pk"
      range_key              = "sk"
      ttl                    = [{ attribute_name = "expires_at", enabled = true }]
      global_secondary_index = [{ name = "meta_user_id" }, { name = "meta_org_team" }]
      stream_enabled         = true
      stream_view_type       = "OLD_IMAGE"
      stream_arn             = "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table/stream/2026-12-01T00:00:00.000"
    }
  }
  variables {
    prefix             = "agents/dev"
    create_table       = false
    index_metadata     = ["user_id"]
    enable_ttl_sweeper = true
    sweeper_package    = "tests/fixtures/sweeper.zip"
  }
  assert {
    condition     = length(aws_dynamodb_table.manifest) == 0
    error_message = "a shared table is not created again"
  }
  assert {
    condition = (
      output.table_name == "unit-table"
      && output.table_arn == "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table"
      && output.checkpointer_conn_string == "s3://unit-bucket/agents/dev?table=unit-table"
      && output.environment.LANGGRAPH_S3_CHECKPOINTER == "s3://unit-bucket/agents/dev?table=unit-table"
    )
    error_message = "the outputs and the connection strings name the shared table"
  }
  assert {
    condition = [
      for s in jsondecode(output.policy_json).Statement : [s.Resource, s.Condition]
      if startswith(s.Sid, "Manifest")
      ] == [
      [["arn:aws:dynamodb:us-east-1:123456789012:table/unit-table"], { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["unit-bucket/agents~2fdev/*"] } }],
      [["arn:aws:dynamodb:us-east-1:123456789012:table/unit-table/index/*"], { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = ["unit-bucket/agents~2fdev/*"] } }],
    ]
    error_message = "the agent reaches the shared table and its indexes only under its own deployment's keys"
  }
  assert {
    condition = (
      aws_lambda_event_source_mapping.sweeper[0].event_source_arn == "arn:aws:dynamodb:us-east-1:123456789012:table/unit-table/stream/2026-12-01T00:00:00.000"
      && aws_lambda_function.sweeper[0].environment[0].variables["LANGGRAPH_S3_TABLE"] == "unit-table"
      && aws_lambda_function.sweeper[0].environment[0].variables["LANGGRAPH_S3_PREFIX"] == "agents/dev"
    )
    error_message = "the sweeper reads the shared table's stream, for its own deployment's threads"
  }
}

run "shared_table_must_be_a_manifest" {
  command = plan
  override_data {
    target = data.aws_dynamodb_table.shared
    values = { hash_key = "id", range_key = "sk", ttl = [{ attribute_name = "expires_at", enabled = true }] }
  }
  variables {
    create_table = false
  }
  expect_failures = [data.aws_dynamodb_table.shared]
}

run "shared_table_needs_ttl" {
  command = plan
  override_data {
    target = data.aws_dynamodb_table.shared
    values = { hash_key = "pk", range_key = "sk", ttl = [{ attribute_name = "", enabled = false }] }
  }
  variables {
    create_table = false
  }
  expect_failures = [data.aws_dynamodb_table.shared]
}

run "shared_table_needs_the_declared_indexes" {
  command = plan
  override_data {
    target = data.aws_dynamodb_table.shared
    values = {
      hash_key               = "pk"
      range_key              = "sk"
      ttl                    = [{ attribute_name = "expires_at", enabled = true }]
      global_secondary_index = [{ name = "meta_user_id" }]
    }
  }
  variables {
    create_table   = false
    index_metadata = ["user_id", "org_team"]
  }
  expect_failures = [data.aws_dynamodb_table.shared]
}

run "shared_table_needs_a_stream_for_the_sweeper" {
  command = plan
  override_data {
    target = data.aws_dynamodb_table.shared
    values = {
      hash_key       = "pk"
      range_key      = "sk"
      ttl            = [{ attribute_name = "expires_at", enabled = true }]
      stream_enabled = false
    }
  }
  variables {
    create_table       = false
    enable_ttl_sweeper = true
    sweeper_package    = "tests/fixtures/sweeper.zip"
  }
  expect_failures = [data.aws_dynamodb_table.shared]
}

run "secrets_and_extra_statements" {
  command = apply

  variables {
    create_lambda_role = true
    secret_arns = [
      "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-Ab12Cd",
      "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys#ANTHROPIC_API_KEY",
      "arn:aws:ssm:us-east-1:123456789012:parameter/agents/tavily",
    ]
    extra_policy_statements = [{
      Action   = ["bedrock:InvokeModel"]
      Resource = ["arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"]
    }]
  }

  assert {
    condition = jsondecode(output.extra_policy_json).Statement == [
      {
        Sid    = "ReadSecrets"
        Effect = "Allow"
        Action = ["secretsmanager:GetSecretValue"]
        Resource = [
          "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-Ab12Cd",
          "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-Ab12Cd-??????",
          "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys",
          "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys-??????",
        ]
      },
      {
        Sid      = "ReadParameters"
        Effect   = "Allow"
        Action   = ["ssm:GetParameter"]
        Resource = ["arn:aws:ssm:us-east-1:123456789012:parameter/agents/tavily"]
      },
      {
        Effect   = "Allow"
        Action   = ["bedrock:InvokeModel"]
        Resource = ["arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"]
      },
    ]
    error_message = "the secrets (the #FIELD cut off, the random suffix matched), the parameter and the statement, in one policy"
  }
  assert {
    condition     = length(aws_iam_role_policy_attachment.extra) == 1
    error_message = "the extra policy is attached to the Lambda role"
  }
  assert {
    condition     = !strcontains(aws_iam_policy.agent.policy, "secretsmanager") && !strcontains(aws_iam_policy.agent.policy, "bedrock")
    error_message = "the agent policy stays the library's own"
  }
}

run "no_extra_policy_by_default" {
  command = apply

  assert {
    condition     = output.extra_policy_arn == null && length(aws_iam_policy.extra) == 0
    error_message = "nothing extra unless asked for"
  }
}

run "secret_arns_must_be_secrets_or_parameters" {
  command = plan

  variables {
    secret_arns = ["arn:aws:s3:::my-bucket/key"]
  }

  expect_failures = [var.secret_arns]
}

run "secret_arns_take_no_wildcard" {
  command = plan

  variables {
    secret_arns = ["arn:aws:secretsmanager:us-east-1:123456789012:secret:*"]
  }

  expect_failures = [var.secret_arns]
}

run "a_statements_condition_is_kept" {
  command = apply

  variables {
    create_lambda_role = true
    extra_policy_statements = [{
      Action    = ["s3:GetObject"]
      Resource  = ["arn:aws:s3:::reports/*"]
      Condition = { StringEquals = { "aws:ResourceAccount" = "123456789012" } }
    }]
  }

  assert {
    condition = jsondecode(output.extra_policy_json).Statement == [{
      Effect    = "Allow"
      Action    = ["s3:GetObject"]
      Resource  = ["arn:aws:s3:::reports/*"]
      Condition = { StringEquals = { "aws:ResourceAccount" = "123456789012" } }
    }]
    error_message = "a Condition given is a Condition granted: never dropped to an unconditional grant"
  }
}

run "a_statement_needs_its_action_and_resource" {
  command = plan

  variables {
    extra_policy_statements = [{ Resource = ["*"] }]
  }

  expect_failures = [var.extra_policy_statements]
}
