variable "bucket_name" {
  description = "Name of the S3 bucket that holds checkpoints and store items."
  type        = string
}

variable "prefix" {
  description = "Key prefix inside the bucket (no leading or trailing slash; empty for the whole bucket)."
  type        = string
  default     = "langgraph"
  validation {
    condition     = !startswith(var.prefix, "/") && !endswith(var.prefix, "/")
    error_message = "prefix must not start or end with a slash."
  }
}

variable "manifest" {
  description = <<-EOT
    Where the manifest lives: "dynamodb" (a table: table_name, create_table), or "s3" (in
    the bucket, under the prefix's manifest/: no table and no DynamoDB permission at all;
    an S3 that honours conditional writes). With "s3", expired threads are removed by the
    archiver's scheduled sweeps (enable_archiver), not by the stream sweeper.
  EOT
  type        = string
  default     = "dynamodb"
  nullable    = false
  validation {
    condition     = contains(["dynamodb", "s3"], var.manifest)
    error_message = "manifest is \"dynamodb\" (a table) or \"s3\" (in the bucket)."
  }
}

variable "table_name" {
  description = "Name of the DynamoDB manifest table: the one this module creates, or, with create_table = false, an existing one to share (unused with manifest = \"s3\")."
  type        = string
  default     = null
  validation {
    condition     = var.manifest == "s3" || var.table_name != null
    error_message = "table_name names the manifest table (or set manifest = \"s3\": the manifest in the bucket, no table)."
  }
}

variable "create_table" {
  description = <<-EOT
    Create the manifest table (true), or serve this deployment on an existing one named
    table_name (false), typically another deployment's: several deployments share one
    table, each agent limited to its own partition keys. The shared table's settings
    (point-in-time recovery, deletion protection, its key, indexes, stream) are its
    owner's: index_metadata keys and enable_ttl_sweeper need the index and the stream
    there already.
  EOT
  type        = bool
  default     = true
  nullable    = false
}

variable "kms_key_arn" {
  description = "KMS key for SSE-KMS on the bucket and the table. Null uses SSE-S3 (AES256) and the AWS owned DynamoDB key."
  type        = string
  default     = null
}

variable "versioning" {
  description = "Enable S3 versioning on the bucket."
  type        = bool
  default     = false
}

variable "noncurrent_version_days" {
  description = "With versioning: days after which overwritten or deleted versions are removed (they are never a live checkpoint's data)."
  type        = number
  default     = 30
}

variable "transition_to_ia_days" {
  description = "Days after which archive packs (over 128 KB) move to S3 Standard-IA (null: never). Reads keep working."
  type        = number
  default     = 30
  validation {
    condition     = var.transition_to_ia_days == null || try(var.transition_to_ia_days >= 30, false)
    error_message = "S3 allows a transition to STANDARD_IA after 30 days at the earliest."
  }
}

variable "transition_to_glacier_ir_days" {
  description = "Days after which archive packs (over 128 KB) move to Glacier Instant Retrieval (null: never). Reads keep working."
  type        = number
  default     = 90
  validation {
    condition     = var.transition_to_glacier_ir_days == null || try(var.transition_to_glacier_ir_days >= 1, false)
    error_message = "transition_to_glacier_ir_days must be a positive number of days."
  }
}

variable "archive_min_object_bytes" {
  description = <<-EOT
    Only archive packs larger than this move to Standard-IA and Glacier IR: those classes
    bill a smaller object as 128 KB, so a small pack is cheaper in Standard. 0 drops the
    size filter from the rule (for an emulator such as moto, which loses it; S3's own
    128 KB default minimum, stated on the configuration, still applies on AWS).
  EOT
  type        = number
  default     = 131072
  nullable    = false
  validation {
    condition     = var.archive_min_object_bytes >= 0
    error_message = "archive_min_object_bytes must be 0 or more."
  }
}

variable "abort_incomplete_multipart_days" {
  description = "Days after which incomplete multipart uploads are aborted."
  type        = number
  default     = 7
}

variable "point_in_time_recovery" {
  description = "Enable DynamoDB point-in-time recovery on the manifest table (one it creates)."
  type        = bool
  default     = true
  nullable    = false
}

variable "deletion_protection" {
  description = "Protect the manifest table from deletion (one it creates)."
  type        = bool
  default     = false
}

variable "create_lambda_role" {
  description = "Also create a Lambda execution role with the agent policy (and basic logging) attached."
  type        = bool
  default     = false
}

variable "secret_arns" {
  description = <<-EOT
    Secrets Manager secrets and SSM parameters (by ARN) the agent reads at cold start (a
    model's API key): the Lambda role may read these, and no other secret or parameter.
    An ARN may end in #FIELD (the function reads that field of a JSON secret); the
    permission is on the ARN before it. Secrets encrypted with a customer managed KMS key
    also need kms:Decrypt on it (extra_policy_statements).
  EOT
  type        = list(string)
  default     = []
  nullable    = false
  validation {
    condition = alltrue([
      for a in var.secret_arns : can(regex("^arn:aws[a-z-]*:(secretsmanager|ssm):[a-z0-9-]+:[0-9]{12}:(secret:|parameter/)[^#*?]+(#.+)?$", a))
    ])
    error_message = "secret_arns takes Secrets Manager secret ARNs (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME) and SSM parameter ARNs (arn:aws:ssm:REGION:ACCOUNT:parameter/NAME), each optionally ending in #FIELD; no wildcard (* or ?): each names one secret."
  }
}

variable "extra_policy_statements" {
  description = <<-EOT
    More IAM statements for the Lambda role, as in a policy document: what the agent
    itself calls, such as
      { Effect = "Allow", Action = ["bedrock:InvokeModel"], Resource = ["arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"] }
    A policy of their own ("<name>-extra"), attached with the agent policy.
  EOT
  type = list(object({
    Sid         = optional(string)
    Effect      = optional(string, "Allow")
    Action      = optional(list(string))
    NotAction   = optional(list(string))
    Resource    = optional(list(string))
    NotResource = optional(list(string))
    Condition   = optional(any)
  }))
  default  = []
  nullable = false
  validation {
    condition = alltrue([
      for s in var.extra_policy_statements : contains(["Allow", "Deny"], s.Effect)
      && (s.Action == null) != (s.NotAction == null) && length(coalesce(s.Action, s.NotAction, [])) > 0
      && (s.Resource == null) != (s.NotResource == null) && length(coalesce(s.Resource, s.NotResource, [])) > 0
    ])
    error_message = "each of extra_policy_statements needs Effect Allow or Deny, one of Action and NotAction, and one of Resource and NotResource (each not empty); Condition is passed on as given."
  }
}

variable "name" {
  description = <<-EOT
    Prefix of every account-scoped name the module creates: the IAM policy is
    "<name>-agent", the Lambda role "<name>-lambda". Must be unique per deployment
    in the account. Null derives it from bucket_name (globally unique). 1-48
    characters: letters, digits, hyphens, underscores; starts and ends with a
    letter or digit.
  EOT
  type        = string
  default     = null
  validation {
    condition     = var.name == null || can(regex("^[A-Za-z0-9]([A-Za-z0-9_-]{0,46}[A-Za-z0-9])?$", var.name))
    error_message = "name must be 1-48 characters of letters, digits, hyphens and underscores, and start and end with a letter or digit."
  }
}

variable "enforce_tls" {
  description = "Attach the bucket policy that denies requests not made over TLS (aws:SecureTransport). Set false only for a local emulator (moto, LocalStack) reached over plain http://."
  type        = bool
  default     = true
  nullable    = false
}

variable "force_destroy" {
  description = "Allow terraform to destroy a bucket that still holds objects (tests, sandboxes)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}

variable "enable_ttl_sweeper" {
  description = <<-EOT
    Turn on the thread TTL sweeper at scale: the manifest table's stream (OLD_IMAGE),
    a Lambda running langgraph_s3.sweeper.handler on its TTL deletions (filtered by
    the event source mapping), and the Lambda's least-privilege role. Requires
    sweeper_package. Use it with AsyncS3Saver(thread_ttl_days=...).
  EOT
  type        = bool
  default     = false
  nullable    = false
}

variable "sweeper_package" {
  description = <<-EOT
    Path of the sweeper Lambda's deployment zip: langgraph-s3 and its dependencies
    for the Lambda's platform, for example
      pip install langgraph-s3 --target build --platform manylinux2014_x86_64 --only-binary=:all: --python-version 3.12
      (cd build && zip -qr ../sweeper.zip .)
  EOT
  type        = string
  default     = null
}

variable "sweeper_runtime" {
  description = "The sweeper Lambda's runtime."
  type        = string
  default     = "python3.12"
}

variable "sweeper_memory_mb" {
  description = "The sweeper Lambda's memory (MB)."
  type        = number
  default     = 512
}

variable "sweeper_timeout_seconds" {
  description = "The sweeper Lambda's timeout: a batch deletes whole threads (1,000 objects per DeleteObjects)."
  type        = number
  default     = 300
}

variable "sweeper_batch_size" {
  description = "Stream records per sweeper invocation."
  type        = number
  default     = 20
}

variable "sweeper_log_retention_days" {
  description = "Retention of the sweeper's CloudWatch log group."
  type        = number
  default     = 30
}

variable "index_metadata" {
  description = <<-EOT
    Thread metadata keys to index in the manifest table. For each key K the table gets a
    string attribute ix_K and a global secondary index meta_K (hash key ix_K, range key
    pk, keys only, on demand), and the agent policy may Query the table's indexes. At
    most 20 distinct keys (DynamoDB's default limit of indexes per table) of 1-60
    letters, digits, "_" or "-". Adding or removing a key updates the table in
    place (DynamoDB builds a new index in the background). On a shared table
    (create_table = false), the keys whose indexes it has: its owner declares them.
  EOT
  type        = list(string)
  default     = []
  nullable    = false
  validation {
    condition     = alltrue([for k in var.index_metadata : can(regex("^[A-Za-z0-9_-]{1,60}$", k))])
    error_message = "each index_metadata key must be 1-60 letters, digits, underscores or hyphens (no dots: a dot would be read as a path in DynamoDB expressions)."
  }
  validation {
    condition     = length(distinct(var.index_metadata)) == length(var.index_metadata) && length(var.index_metadata) <= 20
    error_message = "index_metadata must list at most 20 keys, each once."
  }
}

variable "enable_archiver" {
  description = <<-EOT
    Turn on the archiver: on archiver_schedule, an EventBridge rule starts a Step Functions
    state machine whose Distributed Map runs the Lambda langgraph_s3.archiver.handler once
    per shard of the manifest table ({"segment": I, "total_segments": N}): it deletes the
    shard's expired threads, packs its idle ones and, with archiver_store_prefix, deletes
    the store's expired items. A shard that
    still fails after its retries goes to an SQS dead-letter queue and fails the run; two
    CloudWatch alarms watch the runs and the queue. Requires archiver_package.
  EOT
  type        = bool
  default     = false
  nullable    = false
}

variable "archiver_package" {
  description = <<-EOT
    Path of the archiver Lambda's deployment zip: langgraph-s3 and its dependencies for the
    Lambda's platform (the same zip as sweeper_package serves both), for example
      pip install langgraph-s3 --target build --platform manylinux2014_x86_64 --only-binary=:all: --python-version 3.12
      (cd build && zip -qr ../archiver.zip .)
  EOT
  type        = string
  default     = null
  validation {
    condition     = var.archiver_package == null || try(endswith(lower(var.archiver_package), ".zip"), false)
    error_message = "archiver_package must be the path of a .zip file."
  }
}

variable "archiver_schedule" {
  description = "When the archiver runs: an EventBridge schedule expression, rate(...) or cron(...)."
  type        = string
  default     = "rate(1 day)"
  nullable    = false
  validation {
    condition     = can(regex("^(rate|cron)\\(.+\\)$", var.archiver_schedule))
    error_message = "archiver_schedule must be an EventBridge schedule expression: rate(...) or cron(...)."
  }
}

variable "archiver_segments" {
  description = "Shards of the manifest table per run (DynamoDB parallel Scan segments): one Lambda invocation each. 1-1000 (States.ArrayRange's limit)."
  type        = number
  default     = 16
  nullable    = false
  validation {
    condition     = var.archiver_segments >= 1 && var.archiver_segments <= 1000 && floor(var.archiver_segments) == var.archiver_segments
    error_message = "archiver_segments must be a whole number from 1 to 1000."
  }
}

variable "archiver_max_concurrency" {
  description = "Shards processed at once (the Distributed Map's MaxConcurrency): bounds the Lambda's concurrency and the load on the table and the bucket."
  type        = number
  default     = 8
  nullable    = false
  validation {
    condition     = var.archiver_max_concurrency >= 1 && var.archiver_max_concurrency <= 10000 && floor(var.archiver_max_concurrency) == var.archiver_max_concurrency
    error_message = "archiver_max_concurrency must be a whole number from 1 to 10000."
  }
}

variable "archiver_pack_after_days" {
  description = "Pack a thread's history (AsyncS3Saver.apack) once the thread has been idle this many days; 0: do not pack."
  type        = number
  default     = 30
  nullable    = false
  validation {
    condition     = var.archiver_pack_after_days >= 0 && floor(var.archiver_pack_after_days) == var.archiver_pack_after_days
    error_message = "archiver_pack_after_days must be a whole number of days, 0 or more."
  }
}

variable "archiver_store_prefix" {
  description = <<-EOT
    The long-term memory store's prefix in the same bucket (the prefix of its
    store_conn_string, as AsyncS3Store(prefix=...) takes it): each run also deletes the
    store's expired items, under "<prefix>/store/". Null: no store sweep. A store at the
    bucket's root (prefix "") cannot be named: the archiver reads an empty
    LANGGRAPH_S3_STORE_PREFIX as unset.
  EOT
  type        = string
  default     = null
  validation {
    condition     = var.archiver_store_prefix == null || try(var.archiver_store_prefix != "" && !startswith(var.archiver_store_prefix, "/") && !endswith(var.archiver_store_prefix, "/"), false)
    error_message = "archiver_store_prefix must be null or a non-empty prefix that does not start or end with a slash."
  }
}

variable "archiver_runtime" {
  description = "The archiver Lambda's runtime."
  type        = string
  default     = "python3.12"
  nullable    = false
  validation {
    condition     = startswith(var.archiver_runtime, "python3.")
    error_message = "archiver_runtime must be a Python 3 runtime (python3.N)."
  }
}

variable "archiver_memory_mb" {
  description = "The archiver Lambda's memory (MB); CPU and network bandwidth grow with it."
  type        = number
  default     = 1024
  nullable    = false
  validation {
    condition     = var.archiver_memory_mb >= 128 && var.archiver_memory_mb <= 10240
    error_message = "archiver_memory_mb must be from 128 to 10240."
  }
}

variable "archiver_timeout_seconds" {
  description = "The archiver Lambda's timeout: one shard per invocation, so raise archiver_segments rather than this when shards take long."
  type        = number
  default     = 900
  nullable    = false
  validation {
    condition     = var.archiver_timeout_seconds >= 1 && var.archiver_timeout_seconds <= 900
    error_message = "archiver_timeout_seconds must be from 1 to 900 (Lambda's limit)."
  }
}

variable "archiver_log_retention_days" {
  description = "Retention of the archiver Lambda's CloudWatch log group (0: never expire)."
  type        = number
  default     = 30
  nullable    = false
  validation {
    condition     = contains([0, 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.archiver_log_retention_days)
    error_message = "archiver_log_retention_days must be a retention CloudWatch Logs offers (1, 3, 5, 7, 14, 30, 60, 90, ..., 3653) or 0."
  }
}

variable "archiver_alarm_actions" {
  description = "ARNs (an SNS topic, say) notified when an archiver run fails or a failed shard reaches the dead-letter queue."
  type        = list(string)
  default     = []
  nullable    = false
  validation {
    condition     = alltrue([for a in var.archiver_alarm_actions : startswith(a, "arn:")])
    error_message = "archiver_alarm_actions must be ARNs."
  }
}

variable "archiver_retry_attempts" {
  description = "Retries of a failed shard (Step Functions, backoff 5 s doubling, with jitter) before it goes to the dead-letter queue; 0: none."
  type        = number
  default     = 3
  nullable    = false
  validation {
    condition     = var.archiver_retry_attempts >= 0 && var.archiver_retry_attempts <= 10 && floor(var.archiver_retry_attempts) == var.archiver_retry_attempts
    error_message = "archiver_retry_attempts must be a whole number from 0 to 10."
  }
}
