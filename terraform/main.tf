provider "aws" {
  region = var.region

  default_tags {
    tags = {
      "gpuctl/cluster" = var.cluster_name
      "ManagedBy"      = "gpuctl"
    }
  }
}

# The GPU stack and Karpenter go in through the cluster's API with a token of the identity
# running gpuctl (no aws CLI or kubeconfig needed).
provider "helm" {
  kubernetes = {
    host                   = local.cluster.endpoint
    cluster_ca_certificate = base64decode(local.cluster.certificate_authority)
    token                  = data.aws_eks_cluster_auth.this.token
  }
}

data "aws_availability_zones" "available" {
  state = "available"
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

# An existing cluster: its endpoint, version, VPC, subnets and security group.
data "aws_eks_cluster" "existing" {
  count = var.create_cluster ? 0 : 1
  name  = var.kubernetes_cluster
}

# A token lives 15 minutes: read it once the control plane exists (at apply time for a new
# cluster), not when the plan was made.
data "aws_eks_cluster_auth" "this" {
  name = local.cluster.name

  depends_on = [module.control_plane]
}

locals {
  karpenter = contains(["karpenter"], var.autoscaler)
  group_zones = {
    for name, group in var.node_groups : name => sort(distinct(
      coalescelist(group.availability_zones, data.aws_ec2_instance_type_offerings.gpu[name].locations)
    ))
  }
  gpu_zones = sort(distinct(flatten(values(local.group_zones))))
  # The new VPC: the zones offering the GPU types, topped up to the two EKS needs, at most six.
  vpc_zones = sort(coalescelist(var.availability_zones, slice(
    distinct(concat(local.gpu_zones, sort(data.aws_availability_zones.available.names))),
    0, max(2, min(6, length(local.gpu_zones)))
  )))

  # Exactly one of the two exists: the new cluster's module, or the existing cluster.
  cluster = {
    name                  = one(concat(module.control_plane[*].cluster_name, data.aws_eks_cluster.existing[*].name))
    endpoint              = one(concat(module.control_plane[*].cluster_endpoint, data.aws_eks_cluster.existing[*].endpoint))
    certificate_authority = one(concat(module.control_plane[*].certificate_authority, data.aws_eks_cluster.existing[*].certificate_authority[0].data))
    service_cidr          = one(concat(module.control_plane[*].service_cidr, data.aws_eks_cluster.existing[*].kubernetes_network_config[0].service_ipv4_cidr))
    version               = coalesce(var.kubernetes_version, one(data.aws_eks_cluster.existing[*].version))
  }
  vpc_id = one(concat(module.vpc[*].vpc_id, data.aws_eks_cluster.existing[*].vpc_config[0].vpc_id))
  # What lets a node talk to the control plane: the new cluster's node security group, or
  # the security group EKS made for the existing cluster.
  node_security_group_ids = concat(
    module.control_plane[*].node_security_group_id,
    data.aws_eks_cluster.existing[*].vpc_config[0].cluster_security_group_id,
  )
  new_subnets_by_az   = merge(concat([{}], module.vpc[*].private_subnets_by_az)...)
  existing_subnet_ids = flatten(data.aws_eks_cluster.existing[*].vpc_config[0].subnet_ids)
  # Each group's subnets: the preflight's choice (an existing cluster's private subnets in
  # zones offering the type), else the new VPC's private subnets in those zones, else
  # (a dry run against an existing cluster) all of that cluster's subnets.
  group_subnets = {
    for name, group in var.node_groups : name => coalescelist(
      group.subnet_ids,
      [for zone, id in local.new_subnets_by_az : id if contains(local.group_zones[name], zone)],
      local.existing_subnet_ids,
    )
  }
}

module "vpc" {
  source = "./modules/vpc"
  count  = var.create_cluster ? 1 : 0

  name = var.cluster_name
  cidr = var.vpc_cidr
  azs  = local.vpc_zones
  tags = { "kubernetes.io/cluster/${var.kubernetes_cluster}" = "shared" }
  # Karpenter finds the new cluster's node subnets by this tag.
  private_subnet_tags = { "karpenter.sh/discovery" = var.kubernetes_cluster }
}

module "control_plane" {
  source = "./modules/control-plane"
  count  = var.create_cluster ? 1 : 0

  name                    = var.kubernetes_cluster
  kubernetes_version      = var.kubernetes_version
  vpc_id                  = module.vpc[0].vpc_id
  subnet_ids              = module.vpc[0].private_subnet_ids
  endpoint_public_access  = var.control_plane.endpoint_public_access
  endpoint_private_access = var.control_plane.endpoint_private_access
  public_access_cidrs     = var.control_plane.public_access_cidrs
  admin_principals        = var.control_plane.admin_principals
  system_instance_type    = var.control_plane.system_instance_type
  system_node_count       = var.control_plane.system_node_count
}

# Auto Scaling groups (autoscaler: cluster-autoscaler).
module "gpu_nodes" {
  source   = "./modules/gpu-node-group"
  for_each = local.karpenter ? {} : var.node_groups

  name                 = "${var.cluster_name}-${each.key}"
  node_group           = each.key
  cluster              = local.cluster
  vpc_id               = local.vpc_id
  subnet_ids           = local.group_subnets[each.key]
  security_group_ids   = local.node_security_group_ids
  instance_type        = each.value.instance_type
  min_size             = each.value.min_size
  max_size             = each.value.max_size
  desired_size         = each.value.desired_size
  capacity_type        = each.value.capacity_type
  gpu_type             = each.value.gpu_type
  gpu_label_key        = var.gpu_label_key
  taints               = each.value.taints
  gpu_count            = each.value.gpu_count
  ami_id               = each.value.ami_id
  ami_variant          = each.value.ami_variant
  device_resource      = each.value.device_resource
  efa                  = each.value.efa
  efa_interfaces       = each.value.efa_interfaces
  capacity_reservation = each.value.capacity_reservation

  depends_on = [module.control_plane]
}

# Karpenter (autoscaler: karpenter): its IAM, interruption queue and node role; per node
# group the security group and placement group its EC2NodeClass selects.
module "karpenter" {
  source = "./modules/karpenter"
  count  = local.karpenter ? 1 : 0

  cluster_name    = local.cluster.name
  node_role_name  = var.karpenter.node_role_name
  queue_name      = var.karpenter.queue_name
  namespace       = var.karpenter.namespace
  service_account = var.karpenter.service_account
}

module "karpenter_groups" {
  source   = "./modules/node-group-network"
  for_each = local.karpenter ? var.node_groups : {}

  name   = "${var.cluster_name}-${each.key}"
  vpc_id = local.vpc_id
  efa    = each.value.efa
}

# The Helm releases, stage by stage: Karpenter, then its node pools, then (once the nodes
# exist) the GPU stack and the EFA device plugin.
module "autoscaler_releases" {
  source   = "./modules/helm-releases"
  releases = { for name, r in var.helm_releases : name => r if contains(["autoscaler"], r.stage) }

  depends_on = [module.control_plane, module.karpenter]
}

module "node_pool_releases" {
  source   = "./modules/helm-releases"
  releases = { for name, r in var.helm_releases : name => r if contains(["node-pools"], r.stage) }

  depends_on = [module.autoscaler_releases, module.karpenter_groups]
}

module "gpu_stack_releases" {
  source   = "./modules/helm-releases"
  releases = { for name, r in var.helm_releases : name => r if contains(["gpu-stack"], r.stage) }

  depends_on = [module.control_plane, module.gpu_nodes, module.node_pool_releases]
}
