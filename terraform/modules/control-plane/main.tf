# A new EKS cluster: the control plane, its core add-ons, access entries (the identity
# running gpuctl and the spec's admin principals), and a small untainted managed node
# group for the cluster's own pods (CoreDNS, the GPU Operator's and Karpenter's controllers),
# which cannot run on the tainted GPU nodes.

terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.28, < 7.0"
    }
  }
}

variable "name" {
  description = "Name of the EKS cluster."
  type        = string
}

variable "kubernetes_version" {
  description = "Kubernetes minor version, e.g. 1.33."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the cluster."
  type        = string
}

variable "subnet_ids" {
  description = "Private subnets for the control plane's network interfaces and the system nodes."
  type        = list(string)
}

variable "endpoint_public_access" {
  description = "Serve the API on a public endpoint."
  type        = bool
  default     = true
}

variable "endpoint_private_access" {
  description = "Serve the API inside the VPC."
  type        = bool
  default     = true
}

variable "public_access_cidrs" {
  description = "Networks that may reach the public endpoint."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "admin_principals" {
  description = "IAM roles and users made cluster admins, besides the identity running Terraform."
  type        = list(string)
  default     = []
}

variable "system_instance_type" {
  description = "Instance type of the system node group."
  type        = string
  default     = "m6i.large"
}

variable "system_node_count" {
  description = "Nodes in the system node group."
  type        = number
  default     = 2
}

module "eks" {
  source  = "terraform-aws-modules/eks/aws"
  version = "21.19.0"

  name                         = var.name
  kubernetes_version           = var.kubernetes_version
  vpc_id                       = var.vpc_id
  subnet_ids                   = var.subnet_ids
  endpoint_public_access       = var.endpoint_public_access
  endpoint_private_access      = var.endpoint_private_access
  endpoint_public_access_cidrs = var.public_access_cidrs
  authentication_mode          = "API_AND_CONFIG_MAP"

  # The identity that runs Terraform becomes cluster admin: it installs the GPU stack.
  enable_cluster_creator_admin_permissions = true
  access_entries = {
    for i, arn in var.admin_principals : "admin-${i}" => {
      principal_arn = arn
      policy_associations = {
        admin = {
          policy_arn   = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
          access_scope = { type = "cluster" }
        }
      }
    }
  }

  addons = {
    vpc-cni                = { before_compute = true }
    eks-pod-identity-agent = { before_compute = true }
    kube-proxy             = {}
    coredns                = {}
  }

  eks_managed_node_groups = {
    system = {
      ami_type       = "AL2023_x86_64_STANDARD"
      instance_types = [var.system_instance_type]
      min_size       = var.system_node_count
      max_size       = var.system_node_count
      desired_size   = var.system_node_count
      labels         = { "gpuctl/node-group" = "system" }
    }
  }

  # Karpenter finds the node security group by this tag.
  node_security_group_tags = { "karpenter.sh/discovery" = var.name }
}

output "cluster_name" {
  description = "Name of the cluster (known once it exists)."
  value       = module.eks.cluster_name
}

output "cluster_endpoint" {
  description = "API server endpoint."
  value       = module.eks.cluster_endpoint
}

output "certificate_authority" {
  description = "The cluster's CA certificate, base64."
  value       = module.eks.cluster_certificate_authority_data
}

output "service_cidr" {
  description = "The cluster's service CIDR."
  value       = module.eks.cluster_service_cidr
}

output "node_security_group_id" {
  description = "The security group nodes share (control plane to nodes, node to node)."
  value       = module.eks.node_security_group_id
}
