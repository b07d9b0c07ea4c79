"""AWS through boto3: the account of a profile (the AWS settings gpuctl and Terraform share),
sessions in its regions, and what a failed call means, as gpuctl's errors.

`AWS_ENDPOINT_URL` (read by botocore itself) points everything at another endpoint, e.g. a
moto server.
"""

from __future__ import annotations

import os
from typing import Any

from gpuctl.common.errors import BackendError, UsageError
from gpuctl.runtime import extras

# Static keys the AWS SDKs prefer to a profile named in AWS_PROFILE; boto3 ignores them for
# a profile it is given, as AWS's own CLI does for --profile.
_KEY_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


class Aws:
    """The AWS account of PROFILE (None: AWS_PROFILE, else the default chain)."""

    def __init__(self, profile: str | None = None):
        self.profile = profile

    def session(self, region: str | None) -> Any:
        """A boto3 session in REGION (None: the profile's)."""
        extras.require("reading the AWS settings", "boto3")  # the `aws` extra
        import boto3
        from botocore.exceptions import ProfileNotFound

        if self.profile == "":
            raise UsageError("--profile needs the name of a profile in the AWS config files")
        with errors(region or "the default region"):  # a bad AWS config file fails here
            try:
                return boto3.session.Session(profile_name=self.profile, region_name=region)
            except ProfileNotFound:
                where = "--profile" if self.profile else _profile_env()
                name = self.profile or os.environ.get(where, "")
                files = " or ".join(
                    os.environ.get(var) or os.path.expanduser(f"~/.aws/{default}")
                    for var, default in (
                        ("AWS_CONFIG_FILE", "config"),
                        ("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
                    )
                )
                raise UsageError(
                    f"AWS profile {name!r} not found in {files} (from {where})",
                    hint=f"check {where} against `aws configure list-profiles`",
                ) from None

    def default_region(self) -> tuple[str, str] | None:
        """(region, where it came from) for a cluster spec that names no region: AWS_REGION,
        AWS_DEFAULT_REGION, else the profile's `region` in the AWS config file; None if none."""
        for var in ("AWS_REGION", "AWS_DEFAULT_REGION"):
            if os.environ.get(var):
                return os.environ[var], var
        found = self.session(None)
        if not found.region_name:
            return None
        return found.region_name, f"the AWS profile {found.profile_name!r}"

    def terraform_env(self) -> dict[str, str | None]:
        """Terraform's environment for --profile (None: unset): the AWS provider and the S3
        state backend both read AWS_PROFILE, and the backend takes no variables (a
        -backend-config profile would make Terraform see a changed backend whenever the
        profile changes)."""
        if self.profile is None:
            return {}
        return {"AWS_PROFILE": self.profile, **dict.fromkeys(_KEY_ENV)}


def _profile_env() -> str:
    return next((v for v in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE") if os.environ.get(v)), "")


class errors:
    """Around the calls everything else depends on (a session, the preflight's first
    questions): their failures, as one error that stops the preflight."""

    def __init__(self, region: str):
        self.region = region

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):  # noqa: V107 (the context manager protocol)
        if exc is None:
            return False
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            EndpointConnectionError,
            NoCredentialsError,
            NoRegionError,
        )

        if isinstance(exc, NoCredentialsError):
            raise BackendError(
                "no AWS credentials found",
                hint="run `aws configure`, set AWS_PROFILE, or export "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
            ) from None
        if isinstance(exc, EndpointConnectionError):
            raise BackendError(
                f"cannot reach AWS in {self.region}: {first_line(str(exc))}",
                hint="check the network, the region name and AWS_ENDPOINT_URL",
            ) from None
        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {})
            raise BackendError(
                f"AWS refused the preflight in {self.region}: "
                f"{err.get('Code', '')}: {first_line(err.get('Message', ''))}",
                hint="the credentials need ec2:Describe* permissions",
            ) from None
        from botocore.parsers import ResponseParserError

        if isinstance(exc, (BotoCoreError, NoRegionError, ResponseParserError)):
            raise BackendError(f"AWS preflight failed: {first_line(str(exc))}") from None
        if isinstance(exc, ValueError):  # botocore: e.g. an AWS_ENDPOINT_URL that is no URL
            raise BackendError(
                f"AWS preflight failed: {first_line(str(exc))}",
                hint="check AWS_ENDPOINT_URL and the region",
            ) from None
        return False


def first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else ""
