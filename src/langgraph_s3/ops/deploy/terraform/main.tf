# langgraph-s3: the bucket, lifecycle rules, manifest table and least-privilege
# policy that the library expects. Key layout and names mirror the library:
#   {prefix}/threads/...   checkpoints, writes, blobs (AsyncS3Saver / S3Saver)
#   {prefix}/packs/...     archive packs, one object per thread (AsyncS3Saver.apack)
#   {prefix}/store/...     store items and segments (AsyncS3Store / S3Store)
#   table pk/sk (S/S), TTL attribute "expires_at"

locals {
  # The prefix of every account-scoped name this module creates (IAM policy, role).
  # Default: the bucket's name, which is globally unique, so two deployments in one
  # account never collide; dots (legal in bucket names) or more than 48 characters
  # switch to a truncated form plus 8 hex digits of the bucket name's SHA-256.
  default_name = (
    length(var.bucket_name) <= 48 && !strcontains(var.bucket_name, ".")
    ? var.bucket_name
    : "${trimsuffix(substr(replace(var.bucket_name, ".", "-"), 0, 39), "-")}-${substr(sha256(var.bucket_name), 0, 8)}"
  )
  name             = coalesce(var.name, local.default_name)
  policy_name      = "${local.name}-agent"   # <= 54 characters (IAM policies: 128)
  lambda_role_name = "${local.name}-lambda"  # <= 55 characters (IAM roles: 64)
  sweeper_name     = "${local.name}-sweeper" # <= 56 characters (roles: 64, functions: 64)

  root          = var.prefix == "" ? "" : "${var.prefix}/"
  kms           = var.kms_key_arn != null
  ttl_tag       = "lgs3-ttl"                                              # langgraph_s3.store.format.TTL_TAG
  ttl_classes   = [1, 2, 3, 7, 14, 30, 60, 90, 180, 365, 730, 1825, 3650] # items.TTL_CLASSES_DAYS
  bucket_arn    = aws_s3_bucket.this.arn
  objects_arn   = "${aws_s3_bucket.this.arn}/${local.root}*"
  list_prefixes = var.prefix == "" ? ["*"] : ["${local.root}*"]
  store_url     = "s3://${aws_s3_bucket.this.id}${var.prefix == "" ? "" : "/${var.prefix}"}"

  # The deployment's manifest partition keys (langgraph_s3.ops.deploy.iam.leading_keys): every
  # key its runtime names starts with "{bucket}/{prefix}/", each part as keys.encode
  # writes it: [A-Za-z0-9_-] as they are, every other UTF-8 byte as ~hh, "" as "~", and
  # a part whose encoding passes 120 characters as "~~" and its SHA-256. urlencode
  # leaves [A-Za-z0-9_.~-] as they are, writes a space "+" and every other byte %HH.
  key_parts = { bucket = var.bucket_name, prefix = trim(var.prefix, "/") }
  escaped_parts = {
    for part, raw in local.key_parts : part => join("", [
      for i, piece in split("%", urlencode(raw)) : format(
        "%s%s",
        i == 0 ? "" : "~${lower(substr(piece, 0, 2))}",
        replace(replace(replace(i == 0 ? piece : substr(piece, 2, -1), "~", "~7e"), ".", "~2e"), "+", "~20"),
      )
    ])
  }
  encoded_parts = {
    for part, raw in local.key_parts : part => (
      raw == "" ? "~" : length(local.escaped_parts[part]) > 120 ? "~~${sha256(raw)}" : local.escaped_parts[part]
    )
  }
  deployment_key = "${local.encoded_parts.bucket}/${local.encoded_parts.prefix}/"
  leading_keys   = ["${local.deployment_key}*"]
  # a Scan names no partition key (IAM evaluates ForAllValues over none as true), so
  # the agent has none: listing every thread is for a role that reads every deployment
  own_keys = { "ForAllValues:StringLike" = { "dynamodb:LeadingKeys" = local.leading_keys } }

  # exactly the calls the library makes at run time (langgraph_s3.ops.deploy.iam.RUNTIME_ACTIONS);
  # creating the bucket, table and lifecycle rules is this module's job, not the agent's
  s3_object_actions = [
    "s3:DeleteObject",
    "s3:GetObject",
    "s3:GetObjectTagging",
    "s3:PutObject",
    "s3:PutObjectTagging",
  ]
  dynamodb_actions = [
    "dynamodb:BatchGetItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
  ]

  lambda_assume_role = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "lambda.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })

  agent_policy = {
    Version = "2012-10-17"
    Statement = concat(
      [
        {
          Sid       = "ListOwnPrefix"
          Effect    = "Allow"
          Action    = ["s3:ListBucket"]
          Resource  = [local.bucket_arn]
          Condition = { StringLike = { "s3:prefix" = local.list_prefixes } }
        },
        {
          Sid      = "ReadWriteOwnObjects"
          Effect   = "Allow"
          Action   = local.s3_object_actions
          Resource = [local.objects_arn]
        },
      ],
      local.in_bucket ? [] : [
        {
          Sid       = "Manifest"
          Effect    = "Allow"
          Action    = local.dynamodb_actions
          Resource  = [local.table_arn]
          Condition = local.own_keys
        },
      ],
      # the manifest in the bucket: forgetting a subject deletes its key record's
      # noncurrent versions by version id (a versioned bucket keeps them otherwise)
      local.in_bucket ? [
        {
          Sid       = "ListManifestVersions"
          Effect    = "Allow"
          Action    = ["s3:ListBucketVersions"]
          Resource  = [local.bucket_arn]
          Condition = { StringLike = { "s3:prefix" = ["${local.root}manifest/*"] } }
        },
      ] : [],
      local.in_bucket ? [
        {
          Sid      = "EraseManifestVersions"
          Effect   = "Allow"
          Action   = ["s3:DeleteObjectVersion"]
          Resource = ["${local.bucket_arn}/${local.root}manifest/*"]
        },
      ] : [],
      # list threads by a metadata value (index_metadata): only Query reads an index, and
      # an index's hash key (ix_K) starts with the deployment key too (core.meta.index_value)
      length(var.index_metadata) > 0 && !local.in_bucket ? [
        {
          Sid       = "ManifestIndexes"
          Effect    = "Allow"
          Action    = ["dynamodb:Query"]
          Resource  = ["${local.table_ref}/index/*"]
          Condition = local.own_keys
        },
      ] : [],
      local.kms ? [
        {
          Sid      = "EncryptionKey"
          Effect   = "Allow"
          Action   = ["kms:Decrypt", "kms:GenerateDataKey"]
          Resource = [var.kms_key_arn]
        },
      ] : [],
    )
  }
}

# ----------------------------------------------------------------- bucket
resource "aws_s3_bucket" "this" {
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = local.kms ? "aws:kms" : "AES256"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = local.kms
  }
}

resource "aws_s3_bucket_versioning" "this" {
  bucket = aws_s3_bucket.this.id
  versioning_configuration {
    status = var.versioning ? "Enabled" : "Suspended"
  }
}

# Deny every request not made over TLS. enforce_tls = false drops it, only for
# local emulators (moto, LocalStack) reached over plain http://.
resource "aws_s3_bucket_policy" "tls_only" {
  count  = var.enforce_tls ? 1 : 0
  bucket = aws_s3_bucket.this.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "DenyInsecureTransport"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [local.bucket_arn, "${local.bucket_arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
  depends_on = [aws_s3_bucket_public_access_block.this]
}

moved { # the policy gained a count: existing deployments keep theirs
  from = aws_s3_bucket_policy.tls_only
  to   = aws_s3_bucket_policy.tls_only[0]
}

resource "aws_s3_bucket_lifecycle_configuration" "this" {
  bucket = aws_s3_bucket.this.id
  # S3's default, stated: no transition moves an object under 128 KB (the colder classes
  # would bill it as 128 KB); the packs rule below also filters on size itself
  transition_default_minimum_object_size = "all_storage_classes_128K"

  rule {
    id     = "langgraph-s3-abort-incomplete-multipart"
    status = "Enabled"
    filter {
      prefix = local.root
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_days
    }
  }

  # Archived history moves to cheaper classes and stays readable. Only packs
  # (AsyncS3Saver.apack: one object per thread) move: S3 skips transitions of
  # objects under 128 KB, and Standard-IA and Glacier IR bill a small object as
  # 128 KB, so a smaller pack stays in Standard on purpose. There is no
  # expiration by age: a blob written on day 1 may be part of today's state;
  # whole threads go through delete_thread, prune or the thread TTL.
  dynamic "rule" {
    for_each = var.transition_to_ia_days != null || var.transition_to_glacier_ir_days != null ? [1] : []
    content {
      id     = "langgraph-s3-archive-packs"
      status = "Enabled"
      dynamic "filter" {
        for_each = var.archive_min_object_bytes > 0 ? [1] : []
        content {
          and {
            prefix                   = "${local.root}packs/"
            object_size_greater_than = var.archive_min_object_bytes
          }
        }
      }
      dynamic "filter" {
        for_each = var.archive_min_object_bytes > 0 ? [] : [1]
        content {
          prefix = "${local.root}packs/"
        }
      }
      dynamic "transition" {
        for_each = var.transition_to_ia_days != null ? [var.transition_to_ia_days] : []
        content {
          days          = transition.value
          storage_class = "STANDARD_IA"
        }
      }
      dynamic "transition" {
        for_each = var.transition_to_glacier_ir_days != null ? [var.transition_to_glacier_ir_days] : []
        content {
          days          = transition.value
          storage_class = "GLACIER_IR"
        }
      }
    }
  }

  # The store's TTL backstop: an item whose TTL fits in N days carries the tag
  # lgs3-ttl=Nd; these are the rules AsyncS3Store.setup() would install.
  dynamic "rule" {
    for_each = local.ttl_classes
    content {
      id     = "langgraph-s3-ttl-${rule.value}d"
      status = "Enabled"
      filter {
        tag {
          key   = local.ttl_tag
          value = "${rule.value}d"
        }
      }
      expiration {
        days = rule.value
      }
    }
  }

  dynamic "rule" {
    for_each = var.versioning ? [1] : []
    content {
      id     = "langgraph-s3-noncurrent-versions"
      status = "Enabled"
      filter {
        prefix = local.root
      }
      noncurrent_version_expiration {
        noncurrent_days = var.noncurrent_version_days
      }
    }
  }

  lifecycle {
    precondition {
      condition = (
        var.transition_to_ia_days == null || var.transition_to_glacier_ir_days == null
        || try(var.transition_to_glacier_ir_days > var.transition_to_ia_days, false)
      )
      error_message = "transition_to_glacier_ir_days must come after transition_to_ia_days."
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}

# ------------------------------------------------------------ the manifest
# Made here (create_table), or another deployment's, shared: deployments keep apart by
# their partition keys (the agent policy's dynamodb:LeadingKeys).
# With manifest = "s3" there is no table: the manifest is in the bucket (objects_arn).
locals {
  in_bucket   = var.manifest == "s3"
  make_table  = var.create_table && !local.in_bucket
  share_table = !var.create_table && !local.in_bucket
  table_name  = local.in_bucket ? null : (local.make_table ? aws_dynamodb_table.manifest[0].name : data.aws_dynamodb_table.shared[0].name)
  table_arn   = local.in_bucket ? null : (local.make_table ? aws_dynamodb_table.manifest[0].arn : data.aws_dynamodb_table.shared[0].arn)
  stream_arn  = local.in_bucket ? null : (local.make_table ? aws_dynamodb_table.manifest[0].stream_arn : data.aws_dynamodb_table.shared[0].stream_arn)
  # the table's ARN in a policy's string (with no table, a name that matches nothing:
  # HCL evaluates both sides of a conditional, and a string may hold no null)
  table_ref = coalesce(local.table_arn, "arn:aws:dynamodb:*:*:table/-")
  # the conn string's manifest: its table, or the bucket
  manifest_query = local.in_bucket ? "manifest=s3" : "table=${coalesce(local.table_name, "-")}"
}

moved { # the table gained a count (create_table): existing deployments keep theirs
  from = aws_dynamodb_table.manifest
  to   = aws_dynamodb_table.manifest[0]
}

data "aws_dynamodb_table" "shared" {
  count = local.share_table ? 1 : 0
  name  = var.table_name

  lifecycle {
    postcondition {
      condition     = self.hash_key == "pk" && self.range_key == "sk"
      error_message = "table_name with create_table = false must name a manifest table (key pk/sk), as this module makes."
    }
    postcondition {
      condition     = alltrue([for t in self.ttl : t.enabled && t.attribute_name == "expires_at"])
      error_message = "the shared table needs TTL on expires_at (thread expiry, tombstones), as this module turns on."
    }
    postcondition {
      condition     = length(setsubtract([for k in var.index_metadata : "meta_${k}"], [for g in self.global_secondary_index : g.name])) == 0
      error_message = "every index_metadata key needs its index on the shared table: declare the keys in the deployment that made it."
    }
    postcondition {
      condition     = !var.enable_ttl_sweeper || (self.stream_enabled && contains(["OLD_IMAGE", "NEW_AND_OLD_IMAGES"], self.stream_view_type))
      error_message = "enable_ttl_sweeper on a shared table needs its stream (OLD_IMAGE): turn the sweeper on in the deployment that made it."
    }
  }
}

resource "aws_dynamodb_table" "manifest" {
  count                       = local.make_table ? 1 : 0
  name                        = var.table_name
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }
  attribute {
    name = "sk"
    type = "S"
  }

  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  # index_metadata: one sparse index per metadata key K, on the string attribute
  # ix_K the library writes, keys only (a query returns thread keys, then reads them)
  dynamic "attribute" {
    for_each = var.index_metadata
    content {
      name = "ix_${attribute.value}"
      type = "S"
    }
  }
  dynamic "global_secondary_index" {
    for_each = var.index_metadata
    content {
      name            = "meta_${global_secondary_index.value}"
      hash_key        = "ix_${global_secondary_index.value}"
      range_key       = "pk"
      projection_type = "KEYS_ONLY"
    }
  }

  # the thread TTL sweeper reads DynamoDB's TTL deletions from the stream: it needs
  # the removed item's old image (its thread, deployment and expiry)
  stream_enabled   = var.enable_ttl_sweeper
  stream_view_type = var.enable_ttl_sweeper ? "OLD_IMAGE" : null

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  server_side_encryption {
    enabled     = true
    kms_key_arn = var.kms_key_arn
  }

  tags = var.tags
}

# ------------------------------------------------------------------- IAM
resource "aws_iam_policy" "agent" {
  name        = local.policy_name
  description = "langgraph-s3: read and write checkpoints and store items under s3://${var.bucket_name}/${local.root}"
  policy      = jsonencode(local.agent_policy)
  tags        = var.tags
}

resource "aws_iam_role" "lambda" {
  count              = var.create_lambda_role ? 1 : 0
  name               = local.lambda_role_name
  assume_role_policy = local.lambda_assume_role
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "agent" {
  count      = var.create_lambda_role ? 1 : 0
  role       = aws_iam_role.lambda[0].name
  policy_arn = aws_iam_policy.agent.arn
}

# what the agent itself reads and calls: its secrets by ARN, and the statements given
locals {
  secret_bases   = [for a in var.secret_arns : split("#", a)[0]]
  secret_manager = [for a in local.secret_bases : a if strcontains(a, ":secretsmanager:")]
  parameters     = [for a in local.secret_bases : a if strcontains(a, ":ssm:")]
  extra_statements = concat(
    length(local.secret_manager) > 0 ? [{
      Sid    = "ReadSecrets"
      Effect = "Allow"
      Action = ["secretsmanager:GetSecretValue"]
      # a secret's ARN ends in 6 random characters; one given without them matches too
      Resource = distinct(flatten([for a in local.secret_manager : [a, "${a}-??????"]]))
    }] : [],
    length(local.parameters) > 0 ? [{
      Sid      = "ReadParameters"
      Effect   = "Allow"
      Action   = ["ssm:GetParameter"]
      Resource = distinct(local.parameters)
    }] : [],
    [for s in var.extra_policy_statements : { for k, v in s : k => v if v != null }],
  )
}

resource "aws_iam_policy" "extra" {
  count       = length(local.extra_statements) > 0 ? 1 : 0
  name        = "${local.name}-extra"
  description = "langgraph-s3: what the agent reads and calls beside its state (secret_arns, extra_policy_statements)"
  policy      = jsonencode({ Version = "2012-10-17", Statement = local.extra_statements })
  tags        = var.tags
}

resource "aws_iam_role_policy_attachment" "extra" {
  count      = var.create_lambda_role && length(local.extra_statements) > 0 ? 1 : 0
  role       = aws_iam_role.lambda[0].name
  policy_arn = aws_iam_policy.extra[0].arn
}

resource "aws_iam_role_policy_attachment" "logs" {
  count      = var.create_lambda_role ? 1 : 0
  role       = aws_iam_role.lambda[0].name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
}

# ------------------------------------------------- the thread TTL sweeper
# DynamoDB's TTL removes an expired thread's root item; the stream carries the
# removal and the sweeper Lambda deletes the thread's objects
# (langgraph_s3.sweeper.handler). Off by default.
locals {
  sweeper = var.enable_ttl_sweeper ? 1 : 0
  sweeper_policy = {
    Version = "2012-10-17"
    Statement = concat(
      [
        {
          Sid      = "ReadTheStream"
          Effect   = "Allow"
          Action   = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"]
          Resource = ["${local.table_ref}/stream/*"]
        },
        { # only its own deployment's threads, on a shared table too
          Sid       = "TombstoneTheThread"
          Effect    = "Allow"
          Action    = ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"]
          Resource  = [local.table_arn]
          Condition = local.own_keys
        },
        {
          Sid       = "ListThreads"
          Effect    = "Allow"
          Action    = ["s3:ListBucket"]
          Resource  = [local.bucket_arn]
          Condition = { StringLike = { "s3:prefix" = ["${local.root}threads/*", "${local.root}packs/*"] } }
        },
        {
          Sid      = "DeleteThreadObjects"
          Effect   = "Allow"
          Action   = ["s3:DeleteObject"]
          Resource = ["${local.bucket_arn}/${local.root}threads/*", "${local.bucket_arn}/${local.root}packs/*"]
        },
        {
          Sid      = "CountPackedCheckpoints"
          Effect   = "Allow"
          Action   = ["s3:GetObject"]
          Resource = ["${local.bucket_arn}/${local.root}packs/*"]
        },
        {
          Sid      = "Logs"
          Effect   = "Allow"
          Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
          Resource = ["arn:aws:logs:*:*:log-group:/aws/lambda/${local.sweeper_name}:*"]
        },
      ],
      local.kms ? [
        {
          Sid      = "EncryptionKey"
          Effect   = "Allow"
          Action   = ["kms:Decrypt"]
          Resource = [var.kms_key_arn]
        },
      ] : [],
    )
  }
}

resource "aws_iam_role" "sweeper" {
  count              = local.sweeper
  name               = local.sweeper_name
  assume_role_policy = local.lambda_assume_role
  tags               = var.tags
}

resource "aws_iam_role_policy" "sweeper" {
  count  = local.sweeper
  name   = "sweep-expired-threads"
  role   = aws_iam_role.sweeper[0].id
  policy = jsonencode(local.sweeper_policy)
}

resource "aws_cloudwatch_log_group" "sweeper" {
  count             = local.sweeper
  name              = "/aws/lambda/${local.sweeper_name}"
  retention_in_days = var.sweeper_log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "sweeper" {
  count            = local.sweeper
  function_name    = local.sweeper_name
  description      = "langgraph-s3: deletes the objects of threads whose TTL expired (DynamoDB stream)"
  role             = aws_iam_role.sweeper[0].arn
  runtime          = var.sweeper_runtime
  handler          = "langgraph_s3.sweeper.handler"
  filename         = var.sweeper_package
  source_code_hash = filebase64sha256(var.sweeper_package)
  memory_size      = var.sweeper_memory_mb
  timeout          = var.sweeper_timeout_seconds
  environment {
    variables = {
      LANGGRAPH_S3_BUCKET = aws_s3_bucket.this.id
      LANGGRAPH_S3_PREFIX = var.prefix
      LANGGRAPH_S3_TABLE  = local.table_name
    }
  }
  tags       = var.tags
  depends_on = [aws_cloudwatch_log_group.sweeper, aws_iam_role_policy.sweeper]

  lifecycle {
    precondition {
      condition     = var.sweeper_package != null
      error_message = "enable_ttl_sweeper needs sweeper_package: the path of the Lambda's zip (see the variable's description)."
    }
    precondition {
      condition     = !local.in_bucket
      error_message = "enable_ttl_sweeper follows a DynamoDB stream: with manifest = \"s3\" there is none; sweep on the archiver's schedule (enable_archiver) instead."
    }
  }
}

resource "aws_lambda_event_source_mapping" "sweeper" {
  count                          = local.sweeper
  event_source_arn               = local.stream_arn
  function_name                  = aws_lambda_function.sweeper[0].arn
  starting_position              = "TRIM_HORIZON"
  batch_size                     = var.sweeper_batch_size
  function_response_types        = ["ReportBatchItemFailures"]
  bisect_batch_on_function_error = true
  maximum_retry_attempts         = 10

  # only DynamoDB's own TTL deletions: writes and hand deletions never invoke it
  filter_criteria {
    filter {
      pattern = jsonencode({
        eventName    = ["REMOVE"]
        userIdentity = { type = ["Service"], principalId = ["dynamodb.amazonaws.com"] }
      })
    }
  }
}

# ------------------------------------------------------------- the archiver
# On a schedule (EventBridge), a Step Functions state machine splits the manifest
# table into archiver_segments shards and a Distributed Map runs one Lambda
# invocation per shard (langgraph_s3.archiver.handler, event {"segment": I,
# "total_segments": N}): it deletes the shard's expired threads, packs its idle
# ones and, with archiver_store_prefix, deletes the store's expired items (see
# langgraph_s3.ops.handlers.archiver). A shard that still fails after its retries
# goes to a dead-letter queue and fails the run; two alarms watch both. Off by
# default.
locals {
  archiver          = var.enable_archiver ? 1 : 0
  archiver_name     = "${local.name}-archiver"     # <= 57 characters (functions, roles: 64; state machines: 80)
  archiver_sfn_role = "${local.name}-archiver-sfn" # <= 61 characters (roles: 64)
  archiver_evt_role = "${local.name}-archiver-evt" # <= 61 characters (roles: 64)
  archiver_dlq_name = "${local.name}-archiver-dlq" # <= 61 characters (queues: 80)

  # what the archiver lists, reads and writes: the deployment's threads and packs, and
  # the store's items (AsyncS3Store(prefix=P) keeps them under "P/store/")
  archiver_key_prefixes = concat(
    ["${local.root}threads/", "${local.root}packs/"],
    local.in_bucket ? ["${local.root}manifest/"] : [], # its versions, read and freed
    var.archiver_store_prefix == null ? [] : ["${var.archiver_store_prefix}/store/"],
  )
  archiver_policy = {
    Version = "2012-10-17"
    Statement = concat(
      local.in_bucket ? [] : [
        { # its shard of the table: a Scan reads every deployment's items (it keeps its own)
          Sid      = "ScanTheManifest"
          Effect   = "Allow"
          Action   = ["dynamodb:Scan"]
          Resource = [local.table_arn]
        },
      ],
      local.in_bucket ? [] : [
        { # what it changes, only its own deployment's items, on a shared table too
          Sid       = "Manifest"
          Effect    = "Allow"
          Action    = ["dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
          Resource  = [local.table_arn, "${local.table_ref}/index/*"]
          Condition = local.own_keys
        },
      ],
      [
        {
          Sid       = "ListOwnData"
          Effect    = "Allow"
          Action    = ["s3:ListBucket"]
          Resource  = [local.bucket_arn]
          Condition = { StringLike = { "s3:prefix" = [for p in local.archiver_key_prefixes : "${p}*"] } }
        },
        {
          Sid      = "PackAndSweepOwnData"
          Effect   = "Allow"
          Action   = ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"]
          Resource = [for p in local.archiver_key_prefixes : "${local.bucket_arn}/${p}*"]
        },
        {
          Sid      = "Logs"
          Effect   = "Allow"
          Action   = ["logs:CreateLogStream", "logs:PutLogEvents"]
          Resource = ["arn:aws:logs:*:*:log-group:/aws/lambda/${local.archiver_name}:*"]
        },
      ],
      local.kms ? [
        {
          Sid      = "EncryptionKey"
          Effect   = "Allow"
          Action   = ["kms:Decrypt", "kms:GenerateDataKey"]
          Resource = [var.kms_key_arn]
        },
      ] : [],
    )
  }

  # the state machine's ARN, built rather than read from the resource: its role's
  # policy names it, and the state machine needs that policy first
  archiver_sm_arn = (
    var.enable_archiver
    ? "arn:${data.aws_partition.current[0].partition}:states:${data.aws_region.current[0].name}:${data.aws_caller_identity.current[0].account_id}:stateMachine:${local.archiver_name}"
    : null
  )
  archiver_executions_arn = (
    var.enable_archiver
    ? "arn:${data.aws_partition.current[0].partition}:states:${data.aws_region.current[0].name}:${data.aws_caller_identity.current[0].account_id}:execution:${local.archiver_name}/*"
    : null
  )
  # the shard numbers 0..N-1; States.Array(0) for one shard (no range to build)
  archiver_shards = (
    var.archiver_segments > 1
    ? "States.ArrayRange(0, ${var.archiver_segments - 1}, 1)"
    : "States.Array(0)"
  )
}

data "aws_partition" "current" {
  count = local.archiver
}

data "aws_region" "current" {
  count = local.archiver
}

data "aws_caller_identity" "current" {
  count = local.archiver
}

# --- the Lambda: one shard per invocation
resource "aws_iam_role" "archiver" {
  count              = local.archiver
  name               = local.archiver_name
  assume_role_policy = local.lambda_assume_role
  tags               = var.tags
}

resource "aws_iam_role_policy" "archiver" {
  count  = local.archiver
  name   = "archive-shards"
  role   = aws_iam_role.archiver[0].id
  policy = jsonencode(local.archiver_policy)
}

resource "aws_cloudwatch_log_group" "archiver" {
  count             = local.archiver
  name              = "/aws/lambda/${local.archiver_name}"
  retention_in_days = var.archiver_log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "archiver" {
  count            = local.archiver
  function_name    = local.archiver_name
  description      = "langgraph-s3: archives one shard of the manifest (run by the archiver state machine)"
  role             = aws_iam_role.archiver[0].arn
  runtime          = var.archiver_runtime
  handler          = "langgraph_s3.archiver.handler"
  filename         = var.archiver_package
  source_code_hash = var.archiver_package == null ? null : filebase64sha256(var.archiver_package) # the precondition names the fault
  memory_size      = var.archiver_memory_mb
  timeout          = var.archiver_timeout_seconds
  environment {
    variables = merge(
      {
        LANGGRAPH_S3_BUCKET          = aws_s3_bucket.this.id
        LANGGRAPH_S3_PREFIX          = var.prefix
        LANGGRAPH_S3_PACK_AFTER_DAYS = tostring(var.archiver_pack_after_days)
      },
      { # the manifest: its table, or the bucket (manifest = "s3")
        for k, v in { LANGGRAPH_S3_MANIFEST = local.in_bucket ? "s3" : null, LANGGRAPH_S3_TABLE = local.table_name } : k => v if v != null
      },
      var.archiver_store_prefix == null ? {} : { LANGGRAPH_S3_STORE_PREFIX = var.archiver_store_prefix },
      length(var.index_metadata) == 0 ? {} : { LANGGRAPH_S3_INDEX_METADATA = join(",", var.index_metadata) },
    )
  }
  tags       = var.tags
  depends_on = [aws_cloudwatch_log_group.archiver, aws_iam_role_policy.archiver]

  lifecycle {
    precondition {
      condition     = var.archiver_package != null
      error_message = "enable_archiver needs archiver_package: the path of the Lambda's zip (see the variable's description)."
    }
  }
}

# --- failed shards: a dead-letter queue
resource "aws_sqs_queue" "archiver_dlq" {
  count                     = local.archiver
  name                      = local.archiver_dlq_name
  message_retention_seconds = 1209600 # 14 days, SQS's maximum
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

# --- the state machine: shards, then a Distributed Map over them
resource "aws_iam_role" "archiver_sfn" {
  count = local.archiver
  name  = local.archiver_sfn_role
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "states.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
  tags = var.tags
}

resource "aws_iam_role_policy" "archiver_sfn" {
  count = local.archiver
  name  = "run-the-archiver"
  role  = aws_iam_role.archiver_sfn[0].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "InvokeTheArchiver"
        Effect   = "Allow"
        Action   = ["lambda:InvokeFunction"]
        Resource = [aws_lambda_function.archiver[0].arn, "${aws_lambda_function.archiver[0].arn}:*"]
      },
      {
        Sid      = "DeadLetters"
        Effect   = "Allow"
        Action   = ["sqs:SendMessage"]
        Resource = [aws_sqs_queue.archiver_dlq[0].arn]
      },
      { # a Distributed Map runs each shard as a child execution of this state machine
        Sid      = "StartChildExecutions"
        Effect   = "Allow"
        Action   = ["states:StartExecution"]
        Resource = [local.archiver_sm_arn]
      },
      {
        Sid      = "WatchChildExecutions"
        Effect   = "Allow"
        Action   = ["states:DescribeExecution", "states:StopExecution"]
        Resource = [local.archiver_executions_arn]
      },
    ]
  })
}

resource "aws_sfn_state_machine" "archiver" {
  count    = local.archiver
  name     = local.archiver_name
  type     = "STANDARD"
  role_arn = aws_iam_role.archiver_sfn[0].arn
  definition = jsonencode({
    Comment = "langgraph-s3 archiver: one Lambda invocation per shard of the manifest table"
    StartAt = "Shards"
    States = {
      Shards = {
        Type       = "Pass"
        Parameters = { "segments.$" = local.archiver_shards }
        Next       = "Archive"
      }
      Archive = {
        Type      = "Map"
        Label     = "Shards"
        ItemsPath = "$.segments"
        ItemSelector = {
          "segment.$"    = "$$.Map.Item.Value"
          total_segments = var.archiver_segments
        }
        MaxConcurrency             = var.archiver_max_concurrency
        ToleratedFailurePercentage = 0 # any failed shard fails the run (and its alarm)
        ItemProcessor = {
          ProcessorConfig = { Mode = "DISTRIBUTED", ExecutionType = "STANDARD" }
          StartAt         = "ArchiveShard"
          States = {
            ArchiveShard = {
              Type     = "Task"
              Resource = "arn:${data.aws_partition.current[0].partition}:states:::lambda:invoke"
              Parameters = {
                FunctionName = aws_lambda_function.archiver[0].arn
                "Payload.$"  = "$"
              }
              OutputPath = "$.Payload" # the shard's report
              Retry = [{
                ErrorEquals = [
                  "Lambda.ServiceException",
                  "Lambda.AWSLambdaException",
                  "Lambda.SdkClientException",
                  "Lambda.TooManyRequestsException",
                  "States.TaskFailed",
                ]
                IntervalSeconds = 5
                BackoffRate     = 2
                MaxAttempts     = var.archiver_retry_attempts
                JitterStrategy  = "FULL"
              }]
              Catch = [{
                ErrorEquals = ["States.ALL"]
                ResultPath  = "$.error"
                Next        = "DeadLetter"
              }]
              End = true
            }
            DeadLetter = {
              Type     = "Task"
              Resource = "arn:${data.aws_partition.current[0].partition}:states:::sqs:sendMessage"
              Parameters = {
                QueueUrl = aws_sqs_queue.archiver_dlq[0].url
                # error: Catch's {"Error", "Cause"} whole (the language does not promise
                # a Cause, and a path to a missing field would lose the dead letter)
                MessageBody = {
                  "segment.$"        = "$.segment"
                  "total_segments.$" = "$.total_segments"
                  "error.$"          = "$.error"
                  "execution.$"      = "$$.Execution.Id"
                }
              }
              Retry = [{
                ErrorEquals     = ["States.TaskFailed"]
                IntervalSeconds = 2
                BackoffRate     = 2
                MaxAttempts     = 3
              }]
              ResultPath = null
              Next       = "ShardFailed"
            }
            ShardFailed = {
              Type  = "Fail"
              Error = "ArchiverShardFailed"
              Cause = "the shard failed after its retries; its error is in the dead-letter queue"
            }
          }
        }
        ResultPath = null # the reports stay in the child executions' histories
        End        = true
      }
    }
  })
  tags       = var.tags
  depends_on = [aws_iam_role_policy.archiver_sfn]
}

# --- the schedule
resource "aws_iam_role" "archiver_events" {
  count = local.archiver
  name  = local.archiver_evt_role
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "events.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
  tags = var.tags
}

resource "aws_iam_role_policy" "archiver_events" {
  count = local.archiver
  name  = "start-the-archiver"
  role  = aws_iam_role.archiver_events[0].id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid      = "StartTheArchiver"
      Effect   = "Allow"
      Action   = ["states:StartExecution"]
      Resource = [aws_sfn_state_machine.archiver[0].arn]
    }]
  })
}

resource "aws_cloudwatch_event_rule" "archiver" {
  count               = local.archiver
  name                = local.archiver_name
  description         = "langgraph-s3: starts the archiver state machine"
  schedule_expression = var.archiver_schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "archiver" {
  count     = local.archiver
  rule      = aws_cloudwatch_event_rule.archiver[0].name
  target_id = "archiver"
  arn       = aws_sfn_state_machine.archiver[0].arn
  role_arn  = aws_iam_role.archiver_events[0].arn
}

# --- alarms
resource "aws_cloudwatch_metric_alarm" "archiver_failed" {
  count               = local.archiver
  alarm_name          = "${local.archiver_name}-failed"
  alarm_description   = "langgraph-s3: an archiver run failed (a shard failed after its retries; see the dead-letter queue)"
  namespace           = "AWS/States"
  metric_name         = "ExecutionsFailed"
  dimensions          = { StateMachineArn = aws_sfn_state_machine.archiver[0].arn }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.archiver_alarm_actions
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "archiver_dlq" {
  count               = local.archiver
  alarm_name          = "${local.archiver_name}-dead-letters"
  alarm_description   = "langgraph-s3: failed archiver shards wait in ${local.archiver_dlq_name}"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.archiver_dlq[0].name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.archiver_alarm_actions
  tags                = var.tags
}
