# Helm releases gpuctl rendered (chart, version, values): one stage of them. The root calls
# this once per stage, each after what the stage needs.

terraform {
  required_providers {
    helm = {
      source  = "hashicorp/helm"
      version = ">= 3.0, < 4.0"
    }
  }
}

variable "releases" {
  description = "Releases by name; a local chart lives under the root module."
  type = map(object({
    chart      = string
    repository = optional(string)
    version    = optional(string)
    namespace  = string
    values     = string
    stage      = string
    local      = bool
  }))
}

resource "helm_release" "this" {
  for_each = var.releases

  name             = each.key
  chart            = each.value.local ? "${path.root}/${each.value.chart}" : each.value.chart
  repository       = each.value.repository
  version          = each.value.version
  namespace        = each.value.namespace
  create_namespace = true
  values           = [each.value.values]
  timeout          = 900
}

output "versions" {
  description = "Release name => installed chart version."
  value       = { for name, r in helm_release.this : name => r.version }
}
