provider "aws" {
  region = var.region

  default_tags {
    tags = {
      "gpuctl/cluster" = var.cluster_name
      "ManagedBy"      = "gpuctl"
    }
  }
}

# Zones that offer each group's instance type, unless the preflight already found them.
data "aws_ec2_instance_type_offerings" "gpu" {
  for_each      = var.node_groups
  location_type = "availability-zone"

  filter {
    name   = "instance-type"
    values = [each.value.instance_type]
  }
}

locals {
  group_zones = {
    for name, group in var.node_groups : name => sort(distinct(
      coalescelist(group.availability_zones, data.aws_ec2_instance_type_offerings.gpu[name].locations)
    ))
  }
  all_zones = sort(distinct(coalescelist(var.availability_zones, flatten(values(local.group_zones)))))
  zones     = slice(local.all_zones, 0, min(6, length(local.all_zones)))
}

module "vpc" {
  source = "./modules/vpc"

  name = var.cluster_name
  cidr = var.vpc_cidr
  azs  = local.zones
  tags = { "kubernetes.io/cluster/${var.kubernetes_cluster}" = "shared" }
}

module "gpu_nodes" {
  source   = "./modules/gpu-node-group"
  for_each = var.node_groups

  name               = "${var.cluster_name}-${each.key}"
  node_group         = each.key
  kubernetes_cluster = var.kubernetes_cluster
  kubernetes_version = var.kubernetes_version
  vpc_id             = module.vpc.vpc_id
  subnet_ids         = [for zone, id in module.vpc.private_subnets_by_az : id if contains(local.group_zones[each.key], zone)]
  instance_type      = each.value.instance_type
  min_size           = each.value.min_size
  max_size           = each.value.max_size
  desired_size       = each.value.desired_size
  capacity_type      = each.value.capacity_type
  gpu_type           = each.value.gpu_type
  gpu_label_key      = var.gpu_label_key
  taints             = each.value.taints
  gpu_count          = each.value.gpu_count
  ami_id             = each.value.ami_id
}
