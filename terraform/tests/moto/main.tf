# The root tests/test_terraform.py applies to a moto server: three deployments in
# one account, in one apply (about the time of one), the third on the second's
# table. IAM names are account-wide, and moto, like AWS, refuses a second role or
# policy of the same name (EntityAlreadyExists), so the apply itself fails if two
# collide.

variable "endpoint_url" {
  description = "The moto server (S3, DynamoDB, IAM, STS, Lambda, CloudWatch Logs and alarms, Step Functions, EventBridge, SQS)."
  type        = string
}

variable "sweeper_package" {
  description = "The thread TTL sweeper's zip, the archiver's too (the test builds one)."
  type        = string
}

# examples/basic as a user runs it, with an explicit name. moto is reached over
# plain http://, so the TLS-only bucket policy is left out; the saver and the
# store then run on this deployment.
module "agents" {
  source       = "../../examples/basic"
  endpoint_url = var.endpoint_url
  name         = "tf-agents"
  bucket_name  = "tf-agents"
  table_name   = "tf-manifest"
  prefix       = "agents/prod"
  enforce_tls  = false
}

provider "aws" {
  region                      = "us-east-1"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  s3_use_path_style           = true

  endpoints {
    s3         = var.endpoint_url
    dynamodb   = var.endpoint_url
    iam        = var.endpoint_url
    sts        = var.endpoint_url
    lambda     = var.endpoint_url
    logs       = var.endpoint_url
    sfn        = var.endpoint_url
    events     = var.endpoint_url
    sqs        = var.endpoint_url
    cloudwatch = var.endpoint_url
  }
}

# The module itself, with its defaults: no name (derived from the bucket) and
# the TLS-only bucket policy in place; the thread TTL sweeper and the archiver
# wired (moto stores the functions and the state machine, it runs neither), and
# a metadata index on the manifest.
module "other" {
  source             = "../.."
  bucket_name        = "tf-other-agents"
  table_name         = "tf-other-manifest"
  create_lambda_role = true
  force_destroy      = true
  enable_ttl_sweeper = true
  sweeper_package    = var.sweeper_package
  enable_archiver    = true
  archiver_package   = var.sweeper_package
  index_metadata     = ["user_id"]
  # moto loses a lifecycle filter's size condition (and terraform then waits for it)
  archive_min_object_bytes = 0
}

# A third deployment on the second's table (create_table = false): its own bucket and
# prefix, the table's index and stream, its own sweeper on that stream; its agent may
# touch only its own partition keys there.
module "shared" {
  source             = "../.."
  bucket_name        = "tf-shared-agents"
  prefix             = "agents/dev"
  create_table       = false
  table_name         = module.other.table_name
  create_lambda_role = true
  force_destroy      = true
  enforce_tls        = false
  index_metadata     = ["user_id"]
  enable_ttl_sweeper = true
  sweeper_package    = var.sweeper_package
  # moto loses a lifecycle filter's size condition (and terraform then waits for it)
  archive_min_object_bytes = 0
}

output "agents" {
  value = module.agents
}

output "other" {
  value = module.other
}

output "shared" {
  value = module.shared
}
