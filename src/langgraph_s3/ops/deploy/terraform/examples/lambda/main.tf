# Deploys an agent on Lambda with the module's role and environment: a zip uploaded
# through S3 (no 50 MB cap on a direct upload), or a container image (image_uri).
# Your own graph:  langgraph-s3 lambda build path/to/graph.py:graph -r requirements.txt
#                  (writes dist/lambda.zip; handler langgraph_s3_handler.handler)
#                  langgraph-s3 lambda terraform   (writes this root and the module into
#                  terraform/ of your project, zip_path pointing at that zip)
# The repository's example agent:  python examples/lambda/build_zip.py --out dist/lambda.zip
# Your model's key: secrets = { OPENAI_API_KEY = "arn:aws:secretsmanager:...:secret:openai-AbCdEf" }
# (read at cold start, set as that environment variable); Bedrock: policy_statements.

variable "bucket_name" {
  type = string
}

variable "table_name" {
  type = string
}

variable "create_table" {
  description = "false: serve this agent on the existing table table_name (another deployment's), each agent limited to its own partition keys there."
  type        = bool
  default     = true
}

variable "name" {
  description = "Prefix of every name this deployment creates (IAM policy and role, the function); unique per deployment in the account."
  type        = string
}

variable "prefix" {
  type    = string
  default = "agents/prod"
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "zip_path" {
  description = "The deployment zip (langgraph-s3 lambda build, or examples/lambda/build_zip.py); uploaded to S3 first."
  type        = string
  default     = "../../../dist/lambda.zip"
}

variable "handler" {
  description = "The zip's handler: langgraph_s3_handler.handler, which `langgraph-s3 lambda build` (and examples/lambda/build_zip.py) generates; handler.handler for the example's hand-written one."
  type        = string
  default     = "langgraph_s3_handler.handler"
}

variable "runtime" {
  description = "Lambda's Python: the one the zip was built for (`lambda build --python`)."
  type        = string
  default     = "python3.11"
}

variable "architecture" {
  description = "x86_64 or arm64: the one the zip was built for (`lambda build --arch`)."
  type        = string
  default     = "x86_64"
}

variable "image_uri" {
  description = "An ECR image built from `langgraph-s3 lambda build --image` (its Dockerfile); when set, no zip is used."
  type        = string
  default     = null
}

variable "artifact_bucket" {
  description = "Where the zip is uploaded (default: the deployment's bucket, under lambda/)."
  type        = string
  default     = null
}

variable "environment" {
  description = "More environment variables for the function (your graph's settings: a model name...). Not for keys: see secrets."
  type        = map(string)
  default     = {}
}

variable "secrets" {
  description = "Environment variables read at cold start from Secrets Manager or SSM Parameter Store, by ARN: { OPENAI_API_KEY = \"arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-AbCdEf\" }; an ARN ending in #FIELD reads that field of a JSON secret. The role may read these and no others."
  type        = map(string)
  default     = {}
}

variable "policy_statements" {
  description = "More IAM statements for the function's role, such as { Action = [\"bedrock:InvokeModel\"], Resource = [\"arn:aws:bedrock:us-east-1::foundation-model/...\"] }."
  type = list(object({
    Sid         = optional(string)
    Effect      = optional(string, "Allow")
    Action      = optional(list(string))
    NotAction   = optional(list(string))
    Resource    = optional(list(string))
    NotResource = optional(list(string))
    Condition   = optional(any)
  }))
  default = []
}

variable "memory_mb" {
  description = "Lambda memory; CPU grows with it, and so does cold-start speed."
  type        = number
  default     = 1024
}

provider "aws" {
  region = var.region
}

module "langgraph_s3" {
  source             = "../.."
  name               = var.name
  bucket_name        = var.bucket_name
  table_name         = var.table_name
  create_table       = var.create_table
  prefix             = var.prefix
  create_lambda_role = true
  # what the agent reads and calls beside its state
  secret_arns             = values(var.secrets)
  extra_policy_statements = var.policy_statements
}

locals {
  zipped = var.image_uri == null
}

resource "aws_s3_object" "zip" {
  count       = local.zipped ? 1 : 0
  bucket      = coalesce(var.artifact_bucket, module.langgraph_s3.bucket_name)
  key         = "lambda/${module.langgraph_s3.name}-agent.zip"
  source      = var.zip_path
  source_hash = filemd5(var.zip_path)
}

resource "aws_lambda_function" "agent" {
  function_name    = "${module.langgraph_s3.name}-agent"
  role             = module.langgraph_s3.lambda_role_arn
  package_type     = local.zipped ? "Zip" : "Image"
  s3_bucket        = local.zipped ? aws_s3_object.zip[0].bucket : null
  s3_key           = local.zipped ? aws_s3_object.zip[0].key : null
  source_code_hash = local.zipped ? filebase64sha256(var.zip_path) : null
  image_uri        = var.image_uri
  handler          = local.zipped ? var.handler : null
  runtime          = local.zipped ? var.runtime : null
  architectures    = [var.architecture]
  memory_size      = var.memory_mb
  timeout          = 60
  environment {
    variables = merge(
      var.environment,
      module.langgraph_s3.environment,
      length(var.secrets) > 0 ? { LANGGRAPH_S3_SECRETS = jsonencode(var.secrets) } : {},
    )
  }
}

output "function_name" {
  value = aws_lambda_function.agent.function_name
}

output "invoke" {
  value = "aws lambda invoke --function-name ${aws_lambda_function.agent.function_name} --cli-binary-format raw-in-base64-out --payload '{\"thread_id\":\"user-42\",\"message\":\"Hi\"}' out.json"
}
