# Pure arithmetic, no provider: one private /prefix+4 subnet per zone for the nodes, and a
# /prefix+8 public one per zone for the NAT gateway, taken from the top of the range so
# that the two sets never overlap for up to 15 zones.

variable "cidr" {
  description = "IPv4 CIDR of the VPC."
  type        = string
}

variable "azs" {
  description = "Availability zones, one subnet pair each."
  type        = list(string)

  validation {
    condition     = contains(range(1, 16), length(var.azs))
    error_message = "Between 1 and 15 availability zones are needed."
  }
}

output "private_subnets" {
  description = "Private subnet CIDRs, in the order of azs."
  value       = [for i, zone in var.azs : cidrsubnet(var.cidr, 4, i)]
}

output "public_subnets" {
  description = "Public subnet CIDRs, in the order of azs."
  value       = [for i, zone in var.azs : cidrsubnet(var.cidr, 8, reverse(range(256))[i])]
}
