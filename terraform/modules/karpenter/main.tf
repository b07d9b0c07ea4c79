# What Karpenter needs in AWS: its controller's IAM role with a Pod Identity association, the
# role of the nodes it launches (with the access entry that lets them join), and the SQS
# queue plus EventBridge rules that tell it about spot interruptions.

terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.28, < 7.0"
    }
  }
}

variable "cluster_name" {
  description = "Name of the EKS cluster."
  type        = string
}

variable "node_role_name" {
  description = "Name of the nodes' IAM role (the EC2NodeClasses name it)."
  type        = string
}

variable "queue_name" {
  description = "Name of the interruption queue (the Helm values name it)."
  type        = string
}

variable "namespace" {
  description = "Namespace of Karpenter's service account."
  type        = string
  default     = "kube-system"
}

variable "service_account" {
  description = "Karpenter's service account."
  type        = string
  default     = "karpenter"
}

module "this" {
  source  = "terraform-aws-modules/eks/aws//modules/karpenter"
  version = "21.19.0"

  cluster_name                    = var.cluster_name
  namespace                       = var.namespace
  service_account                 = var.service_account
  create_pod_identity_association = true
  queue_name                      = var.queue_name
  node_iam_role_use_name_prefix   = false
  node_iam_role_name              = var.node_role_name
  node_iam_role_additional_policies = {
    AmazonSSMManagedInstanceCore = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
  }
}

output "node_role_name" {
  description = "The nodes' IAM role."
  value       = module.this.node_iam_role_name
}

output "queue_name" {
  description = "The interruption queue."
  value       = module.this.queue_name
}
