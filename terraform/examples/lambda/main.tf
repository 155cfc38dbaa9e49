# Deploys examples/lambda with the module's role and environment.
# Build the zip first:  python examples/lambda/build_zip.py --out dist/lambda.zip

variable "bucket_name" {
  type = string
}

variable "table_name" {
  type = string
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
  description = "The deployment zip built by examples/lambda/build_zip.py."
  type        = string
  default     = "../../../dist/lambda.zip"
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
  prefix             = var.prefix
  create_lambda_role = true
}

resource "aws_lambda_function" "agent" {
  function_name    = "${module.langgraph_s3.name}-agent"
  role             = module.langgraph_s3.lambda_role_arn
  filename         = var.zip_path
  source_code_hash = filebase64sha256(var.zip_path)
  handler          = "handler.handler"
  runtime          = "python3.11"
  architectures    = ["x86_64"]
  memory_size      = var.memory_mb
  timeout          = 60
  environment {
    variables = module.langgraph_s3.environment
  }
}

output "function_name" {
  value = aws_lambda_function.agent.function_name
}

output "invoke" {
  value = "aws lambda invoke --function-name ${aws_lambda_function.agent.function_name} --cli-binary-format raw-in-base64-out --payload '{\"thread_id\":\"user-42\",\"message\":\"Hi\"}' out.json"
}
