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

variable "table_name" {
  description = "Name of the DynamoDB manifest table."
  type        = string
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
  description = "Enable DynamoDB point-in-time recovery on the manifest table."
  type        = bool
  default     = true
  nullable    = false
}

variable "deletion_protection" {
  description = "Protect the manifest table from deletion."
  type        = bool
  default     = false
}

variable "create_lambda_role" {
  description = "Also create a Lambda execution role with the agent policy (and basic logging) attached."
  type        = bool
  default     = false
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
