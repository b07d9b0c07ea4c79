output "vpc_id" {
  description = "ID of the VPC."
  value       = module.vpc.vpc_id
}

output "private_subnet_ids" {
  description = "IDs of the private subnets the GPU nodes run in."
  value       = module.vpc.private_subnet_ids
}

output "public_subnet_ids" {
  description = "IDs of the public subnets that hold the NAT gateway."
  value       = module.vpc.public_subnet_ids
}

output "asg_names" {
  description = "Auto Scaling group name of each node group."
  value       = { for name, group in module.gpu_nodes : name => group.asg_name }
}

output "launch_template_ids" {
  description = "Launch template ID of each node group."
  value       = { for name, group in module.gpu_nodes : name => group.launch_template_id }
}
