# Written by gpuctl into terraform.tfvars.json from the cluster spec and the preflight.

variable "cluster_name" {
  description = "Name of this gpuctl cluster; prefixes every resource name."
  type        = string
}

variable "region" {
  description = "AWS region."
  type        = string
}

variable "vpc_cidr" {
  description = "IPv4 CIDR of the new VPC (/16 to /20)."
  type        = string
}

variable "kubernetes_cluster" {
  description = "Name of the existing EKS cluster the GPU nodes join."
  type        = string
}

variable "kubernetes_version" {
  description = "Kubernetes minor version for the GPU AMI; null reads it from the EKS cluster."
  type        = string
  default     = null
}

variable "gpu_label_key" {
  description = "Node label key that carries each group's gpu_type."
  type        = string
  default     = "gpu-type"
}

variable "availability_zones" {
  description = "Zones for the VPC's subnets; empty means every zone offering a node group's instance type (at most 6)."
  type        = list(string)
  default     = []
}

variable "node_groups" {
  description = "GPU node groups by name."
  type = map(object({
    instance_type      = string
    min_size           = number
    max_size           = number
    desired_size       = number
    gpu_type           = string
    capacity_type      = string
    taints             = list(object({ key = string, value = string, effect = string }))
    gpu_count          = optional(number)
    ami_id             = optional(string)
    availability_zones = optional(list(string), [])
  }))

  validation {
    condition     = alltrue([for g in values(var.node_groups) : contains(["on-demand", "spot"], g.capacity_type)])
    error_message = "capacity_type must be on-demand or spot."
  }
}
