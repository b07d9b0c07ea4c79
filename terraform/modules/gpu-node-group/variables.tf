variable "name" {
  description = "Name of the Auto Scaling group and prefix of the group's other resources."
  type        = string
}

variable "node_group" {
  description = "Name of the node group in the cluster spec."
  type        = string
}

variable "cluster" {
  description = "The EKS cluster the nodes join: name, API endpoint, CA (base64), service CIDR, Kubernetes version (picks the AMI)."
  type = object({
    name                  = string
    endpoint              = string
    certificate_authority = string
    service_cidr          = string
    version               = string
  })
}

variable "vpc_id" {
  description = "VPC of the nodes."
  type        = string
}

variable "subnet_ids" {
  description = "Subnets to launch into (in zones that offer the instance type)."
  type        = list(string)
}

variable "security_group_ids" {
  description = "Security groups that let the nodes reach the control plane (the group adds its own)."
  type        = list(string)
}

variable "instance_type" {
  description = "EC2 instance type."
  type        = string
}

variable "min_size" {
  description = "Smallest group size."
  type        = number
}

variable "max_size" {
  description = "Largest group size."
  type        = number
}

variable "desired_size" {
  description = "Size at creation; the cluster autoscaler changes it afterwards."
  type        = number
}

variable "capacity_type" {
  description = "on-demand or spot."
  type        = string
}

variable "gpu_type" {
  description = "Value of the GPU node label."
  type        = string
}

variable "gpu_label_key" {
  description = "Key of the GPU node label."
  type        = string
  default     = "gpu-type"
}

variable "taints" {
  description = "Taints the nodes register with."
  type        = list(object({ key = string, value = string, effect = string }))
  default     = []
}

variable "gpu_count" {
  description = "GPUs per instance; null reads it from the instance type."
  type        = number
  default     = null
}

variable "ami_variant" {
  description = "The EKS-optimized AL2023 accelerated AMI: nvidia, or neuron (Trainium, Inferentia)."
  type        = string
  default     = "nvidia"
}

variable "device_resource" {
  description = "The extended resource a node advertises for its accelerators."
  type        = string
  default     = "nvidia.com/gpu"
}

variable "ami_id" {
  description = "AMI; null uses the EKS-optimized AL2023 NVIDIA AMI from the public SSM parameter."
  type        = string
  default     = null
}

variable "root_volume_gb" {
  description = "Root volume size (GiB); GPU images and container layers are large."
  type        = number
  default     = 200
}

variable "efa" {
  description = "Give each node EFA interfaces and put the group in a cluster placement group."
  type        = bool
  default     = false
}

variable "efa_interfaces" {
  description = "EFA interfaces per node; null reads the instance type's maximum."
  type        = number
  default     = null
}

variable "capacity_reservation" {
  description = "A capacity reservation to launch into: id, and type on-demand (an ODCR) or capacity-block."
  type = object({
    id   = string
    type = string
  })
  default = null
}
