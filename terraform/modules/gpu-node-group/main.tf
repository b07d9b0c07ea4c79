terraform {
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.28, < 7.0"
    }
  }
}

data "aws_partition" "current" {}

data "aws_ec2_instance_type" "this" {
  instance_type = var.instance_type
}

# The EKS-optimized Amazon Linux 2023 NVIDIA or Neuron AMI (used unless the preflight resolved it).
data "aws_ssm_parameter" "ami" {
  name = "/aws/service/eks/optimized-ami/${var.cluster.version}/amazon-linux-2023/${local.arch}/${var.ami_variant}/recommended/image_id"
}

locals {
  arch      = contains(data.aws_ec2_instance_type.this.supported_architectures, "arm64") ? "arm64" : "x86_64"
  ami_id    = coalesce(var.ami_id, data.aws_ssm_parameter.ami.insecure_value)
  gpu_count = coalesce(var.gpu_count, try(one(data.aws_ec2_instance_type.this.gpus).count, 0))
  spot      = contains(["spot"], var.capacity_type)

  efa_count          = var.efa ? coalesce(var.efa_interfaces, data.aws_ec2_instance_type.this.efa_maximum_interfaces) : 0
  security_group_ids = concat(var.security_group_ids, [module.network.security_group_id])
  reservation_ids    = compact([try(var.capacity_reservation.id, "")])
  capacity_block     = contains(["capacity-block"], try(var.capacity_reservation.type, ""))
}

module "efa" {
  source = "../efa-layout"

  interfaces = local.efa_count
}

module "network" {
  source = "../node-group-network"

  name   = var.name
  vpc_id = var.vpc_id
  efa    = var.efa
}

module "config" {
  source = "../gpu-node-config"

  kubernetes_cluster    = var.cluster.name
  api_server_endpoint   = var.cluster.endpoint
  certificate_authority = var.cluster.certificate_authority
  service_cidr          = var.cluster.service_cidr
  node_group            = var.node_group
  gpu_label_key         = var.gpu_label_key
  gpu_type              = var.gpu_type
  gpu_count             = local.gpu_count
  device_resource       = var.device_resource
  capacity_type         = var.capacity_type
  taints                = var.taints
}

resource "aws_iam_role" "node" {
  name_prefix = "${substr(var.name, 0, 37)}-"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy_attachment" "node" {
  for_each = toset([
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
  ])
  role       = aws_iam_role.node.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/${each.value}"
}

resource "aws_iam_instance_profile" "node" {
  name_prefix = "${substr(var.name, 0, 37)}-"
  role        = aws_iam_role.node.name
}

# Lets the nodes' role join the cluster (EKS authentication mode API or API_AND_CONFIG_MAP).
resource "aws_eks_access_entry" "node" {
  cluster_name  = var.cluster.name
  principal_arn = aws_iam_role.node.arn
  type          = "EC2_LINUX"
}

resource "aws_launch_template" "this" {
  name_prefix   = "${substr(var.name, 0, 90)}-"
  image_id      = local.ami_id
  instance_type = var.instance_type
  user_data     = base64encode(module.config.user_data)
  # With EFA the security groups go on each interface instead.
  vpc_security_group_ids = var.efa ? null : local.security_group_ids
  update_default_version = true

  iam_instance_profile {
    arn = aws_iam_instance_profile.node.arn
  }

  dynamic "network_interfaces" {
    for_each = module.efa.network_interfaces
    content {
      network_card_index          = network_interfaces.value.network_card_index
      device_index                = network_interfaces.value.device_index
      interface_type              = network_interfaces.value.interface_type
      security_groups             = local.security_group_ids
      associate_public_ip_address = false
      delete_on_termination       = true
    }
  }

  # An On-Demand Capacity Reservation or a Capacity Block the instances launch into.
  dynamic "capacity_reservation_specification" {
    for_each = local.reservation_ids
    content {
      capacity_reservation_target {
        capacity_reservation_id = capacity_reservation_specification.value
      }
    }
  }

  dynamic "instance_market_options" {
    for_each = local.capacity_block ? ["capacity-block"] : []
    content {
      market_type = instance_market_options.value
    }
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }

  block_device_mappings {
    device_name = "/dev/xvda"

    ebs {
      volume_size           = var.root_volume_gb
      volume_type           = "gp3"
      encrypted             = true
      delete_on_termination = true
    }
  }

  tag_specifications {
    resource_type = "instance"
    tags          = { Name = var.name, "gpuctl/node-group" = var.node_group }
  }
}

resource "aws_autoscaling_group" "this" {
  name                = var.name
  min_size            = var.min_size
  max_size            = var.max_size
  desired_capacity    = var.desired_size
  vpc_zone_identifier = var.subnet_ids
  capacity_rebalance  = local.spot
  placement_group     = module.network.placement_group

  # Spot or On-Demand through a mixed instances policy; a Capacity Block through the
  # launch template alone (its market type is set there).
  dynamic "mixed_instances_policy" {
    for_each = local.capacity_block ? [] : ["mixed"]
    content {
      instances_distribution {
        on_demand_base_capacity                  = 0
        on_demand_percentage_above_base_capacity = local.spot ? 0 : 100
        spot_allocation_strategy                 = "price-capacity-optimized"
      }

      launch_template {
        launch_template_specification {
          launch_template_id = aws_launch_template.this.id
          version            = aws_launch_template.this.latest_version
        }

        override {
          instance_type = var.instance_type
        }
      }
    }
  }

  dynamic "launch_template" {
    for_each = local.capacity_block ? ["capacity-block"] : []
    content {
      id      = aws_launch_template.this.id
      version = aws_launch_template.this.latest_version
    }
  }

  dynamic "tag" {
    for_each = module.config.asg_tags
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  lifecycle {
    # The cluster autoscaler owns the current size once the group exists.
    ignore_changes = [desired_capacity]

    precondition {
      condition     = can(var.subnet_ids[0])
      error_message = "No subnet is in a zone that offers ${var.instance_type}."
    }
  }

  depends_on = [aws_eks_access_entry.node, aws_iam_role_policy_attachment.node]
}
