output "cluster_name" {
  description = "Name of the EKS cluster."
  value       = local.cluster.name
}

output "cluster_endpoint" {
  description = "API server endpoint of the EKS cluster."
  value       = local.cluster.endpoint
}

output "vpc_id" {
  description = "ID of the VPC the GPU nodes run in."
  value       = local.vpc_id
}

output "private_subnet_ids" {
  description = "IDs of the subnets the GPU nodes run in."
  value       = sort(distinct(flatten(values(local.group_subnets))))
}

output "public_subnet_ids" {
  description = "IDs of the new VPC's public subnets (its NAT gateway); empty for an existing cluster."
  value       = flatten(module.vpc[*].public_subnet_ids)
}

output "asg_names" {
  description = "Auto Scaling group name of each node group (autoscaler: cluster-autoscaler)."
  value       = { for name, group in module.gpu_nodes : name => group.asg_name }
}

output "launch_template_ids" {
  description = "Launch template ID of each node group (autoscaler: cluster-autoscaler)."
  value       = { for name, group in module.gpu_nodes : name => group.launch_template_id }
}

output "placement_groups" {
  description = "Cluster placement group of each node group (null where efa is off)."
  value = merge(
    { for name, group in module.gpu_nodes : name => group.placement_group },
    { for name, group in module.karpenter_groups : name => group.placement_group },
  )
}

output "helm_releases" {
  description = "Installed Helm releases: name => chart version."
  value = merge(
    module.autoscaler_releases.versions,
    module.node_pool_releases.versions,
    module.gpu_stack_releases.versions,
  )
}
