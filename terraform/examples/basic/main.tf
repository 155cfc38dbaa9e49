# An example root: the module with its outputs. Against real AWS leave
# endpoint_url unset; against a local moto server set it (the tests do).

variable "bucket_name" {
  type    = string
  default = "my-agents-state"
}

variable "table_name" {
  type    = string
  default = "my-agents-manifest"
}

variable "name" {
  description = "Prefix of the IAM policy and role names; unique per deployment in the account."
  type        = string
  default     = "my-agents-prod"
}

variable "prefix" {
  type    = string
  default = "agents/prod"
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "endpoint_url" {
  description = "Only for local testing (moto): an S3/DynamoDB/IAM/STS endpoint."
  type        = string
  default     = null
}

variable "enforce_tls" {
  description = "Deny non-TLS requests to the bucket. Set false only for an emulator reached over http://."
  type        = bool
  default     = true
}

provider "aws" {
  region                      = var.region
  skip_credentials_validation = var.endpoint_url != null
  skip_requesting_account_id  = var.endpoint_url != null
  skip_metadata_api_check     = var.endpoint_url != null
  s3_use_path_style           = var.endpoint_url != null

  endpoints {
    s3       = var.endpoint_url
    dynamodb = var.endpoint_url
    iam      = var.endpoint_url
    sts      = var.endpoint_url
  }
}

module "langgraph_s3" {
  source             = "../.."
  name               = var.name
  bucket_name        = var.bucket_name
  table_name         = var.table_name
  prefix             = var.prefix
  create_lambda_role = true
  enforce_tls        = var.enforce_tls
  force_destroy      = var.endpoint_url != null
  # moto loses a lifecycle filter's size condition (and terraform then waits for it)
  archive_min_object_bytes = var.endpoint_url != null ? 0 : 131072
}

output "checkpointer_conn_string" {
  value = module.langgraph_s3.checkpointer_conn_string
}

output "store_conn_string" {
  value = module.langgraph_s3.store_conn_string
}

output "environment" {
  value = module.langgraph_s3.environment
}

output "policy_json" {
  value = module.langgraph_s3.policy_json
}

output "lambda_role_name" {
  value = module.langgraph_s3.lambda_role_name
}

output "policy_name" {
  value = module.langgraph_s3.policy_name
}

output "lambda_role_arn" {
  value = module.langgraph_s3.lambda_role_arn
}
