"""GPU capacity on AWS through Terraform, with a boto3 preflight (`provision`, `destroy`)."""
