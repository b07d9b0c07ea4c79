# Pure, no provider: what a GPU node group tells the node (nodeadm user data with the
# gpu-type label and the taints) and the cluster autoscaler (ASG tags, including the
# node-template tags it needs to scale a group up from zero).

variable "kubernetes_cluster" {
  description = "Name of the EKS cluster the nodes join."
  type        = string
}

variable "api_server_endpoint" {
  description = "The EKS cluster's API server URL."
  type        = string
}

variable "certificate_authority" {
  description = "The EKS cluster's CA certificate, base64."
  type        = string
}

variable "service_cidr" {
  description = "The EKS cluster's service CIDR."
  type        = string
}

variable "node_group" {
  description = "Name of the gpuctl node group."
  type        = string
}

variable "gpu_label_key" {
  description = "Node label key that carries gpu_type."
  type        = string
}

variable "gpu_type" {
  description = "Value of the GPU label, e.g. a100."
  type        = string
}

variable "gpu_count" {
  description = "Accelerators per instance (the device_resource a node advertises)."
  type        = number
}

variable "device_resource" {
  description = "The extended resource the node advertises for its accelerators."
  type        = string
  default     = "nvidia.com/gpu"
}

variable "capacity_type" {
  description = "on-demand or spot."
  type        = string
}

variable "taints" {
  description = "Taints registered by the kubelet."
  type        = list(object({ key = string, value = string, effect = string }))
}

locals {
  labels = {
    (var.gpu_label_key)              = var.gpu_type
    "gpuctl/node-group"              = var.node_group
    "eks.amazonaws.com/capacityType" = upper(replace(var.capacity_type, "-", "_"))
  }
  taint_texts = [for t in var.taints : "${join("=", compact([t.key, t.value]))}:${t.effect}"]

  kubelet_flags = concat(
    ["--node-labels=${join(",", [for k, v in local.labels : "${k}=${v}"])}"],
    formatlist("--register-with-taints=%s", compact([join(",", local.taint_texts)])),
  )

  node_config = {
    apiVersion = "node.eks.aws/v1alpha1"
    kind       = "NodeConfig"
    spec = {
      cluster = {
        name                 = var.kubernetes_cluster
        apiServerEndpoint    = var.api_server_endpoint
        certificateAuthority = var.certificate_authority
        cidr                 = var.service_cidr
      }
      kubelet = { flags = local.kubelet_flags }
    }
  }
}

output "labels" {
  description = "Labels each node registers with."
  value       = local.labels
}

output "user_data" {
  description = "MIME multi-part user data for nodeadm (EKS-optimized Amazon Linux 2023 AMIs)."
  value       = <<-EOT
    MIME-Version: 1.0
    Content-Type: multipart/mixed; boundary="//"

    --//
    Content-Type: application/node.eks.aws

    ${yamlencode(local.node_config)}
    --//--
  EOT
}

output "asg_tags" {
  description = "Tags for the Auto Scaling group, read by the cluster autoscaler."
  value = merge(
    {
      "kubernetes.io/cluster/${var.kubernetes_cluster}"                          = "owned"
      "k8s.io/cluster-autoscaler/enabled"                                        = "true"
      "k8s.io/cluster-autoscaler/${var.kubernetes_cluster}"                      = "owned"
      "k8s.io/cluster-autoscaler/node-template/label/${var.gpu_label_key}"       = var.gpu_type
      "k8s.io/cluster-autoscaler/node-template/resources/${var.device_resource}" = tostring(var.gpu_count)
    },
    { for t in var.taints : "k8s.io/cluster-autoscaler/node-template/taint/${t.key}" => "${t.value}:${t.effect}" },
  )
}
