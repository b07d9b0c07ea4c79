terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.28, < 7.0"
    }
  }
}

variable "name" {
  description = "Name of the VPC and prefix of its parts."
  type        = string
}

variable "cidr" {
  description = "IPv4 CIDR of the VPC."
  type        = string
}

variable "azs" {
  description = "Availability zones to spread subnets over."
  type        = list(string)
}

variable "single_nat_gateway" {
  description = "One NAT gateway for all zones (cheaper) instead of one per zone's public subnet."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}

variable "private_subnet_tags" {
  description = "Extra tags for the private subnets (the nodes'), e.g. Karpenter's discovery tag."
  type        = map(string)
  default     = {}
}

module "layout" {
  source = "../subnet-layout"

  cidr = var.cidr
  azs  = var.azs
}

module "this" {
  source  = "terraform-aws-modules/vpc/aws"
  version = "6.6.0"

  name = var.name
  cidr = var.cidr
  azs  = var.azs

  private_subnets = module.layout.private_subnets
  public_subnets  = module.layout.public_subnets

  enable_nat_gateway   = true
  single_nat_gateway   = var.single_nat_gateway
  enable_dns_hostnames = true
  enable_dns_support   = true

  private_subnet_tags = merge({ "kubernetes.io/role/internal-elb" = "1" }, var.private_subnet_tags)
  public_subnet_tags  = { "kubernetes.io/role/elb" = "1" }
  tags                = var.tags
}

output "vpc_id" {
  description = "ID of the VPC."
  value       = module.this.vpc_id
}

output "private_subnet_ids" {
  description = "Private subnet IDs, in the order of azs."
  value       = module.this.private_subnets
}

output "public_subnet_ids" {
  description = "Public subnet IDs, in the order of azs."
  value       = module.this.public_subnets
}

output "private_subnets_by_az" {
  description = "Private subnet ID of each zone."
  value       = zipmap(var.azs, module.this.private_subnets)
}
