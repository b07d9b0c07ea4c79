# Pure, no provider: the network interfaces of an EFA node, one per network card, as AWS
# lays them out for multi-card GPU instances: card 0 carries the primary interface (EFA
# with ENA, device index 0), every other card an EFA-only interface at device index 1.

variable "interfaces" {
  description = "EFA interfaces per node (EC2 NetworkInfo.EfaInfo.MaximumEfaInterfaces); 0 for none."
  type        = number

  validation {
    condition     = contains(range(0, 65), var.interfaces)
    error_message = "Between 0 and 64 EFA interfaces."
  }
}

output "network_interfaces" {
  description = "network_card_index, device_index and interface_type of each interface."
  value = [
    for card in range(var.interfaces) : {
      network_card_index = card
      device_index       = min(card, 1)
      interface_type     = contains([0], card) ? "efa" : "efa-only"
    }
  ]
}
