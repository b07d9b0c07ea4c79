# Written by gpuctl into terraform.tfvars.json from the cluster spec and the preflight.

variable "cluster_name" {
  description = "Name of this gpuctl cluster; prefixes every resource name."
  type        = string
}

variable "region" {
  description = "AWS region."
  type        = string
}

variable "create_cluster" {
  description = "Create the EKS cluster (and its VPC); false adds GPU nodes to an existing one."
  type        = bool
}

variable "kubernetes_cluster" {
  description = "Name of the EKS cluster: the one to create, or the existing one the GPU nodes join."
  type        = string
}

variable "kubernetes_version" {
  description = "Kubernetes minor version of a new cluster, and of the GPU AMI; null reads it from the existing cluster."
  type        = string
  default     = null
}

variable "vpc_cidr" {
  description = "IPv4 CIDR of the new VPC (/16 to /20); null for an existing cluster."
  type        = string
  default     = null
}

variable "availability_zones" {
  description = "Zones for the new VPC's subnets; empty means those offering a node group's instance type (at least 2, at most 6)."
  type        = list(string)
  default     = []
}

variable "control_plane" {
  description = "A new cluster's API endpoint access, extra admins and system nodes."
  type = object({
    endpoint_public_access  = bool
    endpoint_private_access = bool
    public_access_cidrs     = list(string)
    admin_principals        = list(string)
    system_instance_type    = string
    system_node_count       = number
  })
}

variable "autoscaler" {
  description = "cluster-autoscaler (Auto Scaling groups) or karpenter (NodePools)."
  type        = string
  default     = "cluster-autoscaler"

  validation {
    condition     = contains(["cluster-autoscaler", "karpenter"], var.autoscaler)
    error_message = "autoscaler must be cluster-autoscaler or karpenter."
  }
}

variable "karpenter" {
  description = "Names Karpenter's Terraform parts and its Helm values share."
  type = object({
    node_role_name  = string
    queue_name      = string
    namespace       = string
    service_account = string
  })
}

variable "gpu_label_key" {
  description = "Node label key that carries each group's gpu_type."
  type        = string
  default     = "gpu-type"
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
    ami_variant        = optional(string, "nvidia")
    device_resource    = optional(string, "nvidia.com/gpu")
    availability_zones = optional(list(string), [])
    subnet_ids         = optional(list(string), [])
    efa                = optional(bool, false)
    efa_interfaces     = optional(number)
    capacity_reservation = optional(object({
      id   = string
      type = string
    }))
  }))

  validation {
    condition     = alltrue([for g in values(var.node_groups) : contains(["on-demand", "spot"], g.capacity_type)])
    error_message = "capacity_type must be on-demand or spot."
  }
}

variable "helm_releases" {
  description = "Helm releases by name, installed stage by stage: autoscaler, node-pools, gpu-stack."
  type = map(object({
    chart      = string
    repository = optional(string)
    version    = optional(string)
    namespace  = string
    values     = string
    stage      = string
    local      = bool
  }))
  default = {}

  validation {
    condition     = alltrue([for r in values(var.helm_releases) : contains(["autoscaler", "node-pools", "gpu-stack"], r.stage)])
    error_message = "stage must be autoscaler, node-pools or gpu-stack."
  }
}
