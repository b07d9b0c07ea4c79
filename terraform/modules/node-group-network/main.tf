# A node group's own network parts: a security group that lets its nodes reach each other
# on every port and protocol (NCCL; EFA needs all traffic to and from the group itself),
# and for EFA a cluster placement group (one zone, close together).

terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.28, < 7.0"
    }
  }
}

variable "name" {
  description = "Name of the node group's resources (<cluster>-<group>)."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the nodes."
  type        = string
}

variable "efa" {
  description = "The nodes use EFA: add the placement group and the self-referencing egress rule."
  type        = bool
  default     = false
}

resource "aws_security_group" "this" {
  name_prefix = "${var.name}-nodes-"
  description = "GPU nodes of ${var.name}"
  vpc_id      = var.vpc_id
  # Karpenter's EC2NodeClass selects the group's security group by this tag.
  tags = { "gpuctl/node-group" = var.name }

  ingress {
    description = "Node to node (NCCL, EFA, pods)"
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    self        = true
  }

  egress {
    description = "All outbound"
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = ["0.0.0.0/0"]
  }

  dynamic "egress" {
    for_each = var.efa ? ["efa"] : []
    content {
      description = "Node to node EFA (EFA needs an outbound rule to the group itself)"
      from_port   = 0
      to_port     = 0
      protocol    = "-1"
      self        = true
    }
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_placement_group" "this" {
  count    = var.efa ? 1 : 0
  name     = var.name
  strategy = "cluster"
}

output "security_group_id" {
  description = "The node group's security group."
  value       = aws_security_group.this.id
}

output "placement_group" {
  description = "Name of the cluster placement group (null without EFA)."
  value       = one(aws_placement_group.this[*].name)
}
