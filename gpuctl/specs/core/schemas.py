"""The JSON Schemas of the job spec and the cluster spec, made from the field tables their
parsers read (gpuctl.jobs.core.spec.JOB, gpuctl.provision.core.spec.CLUSTER)."""

from __future__ import annotations

from typing import Any

from gpuctl.common.spec_fields import json_schema
from gpuctl.jobs.core import spec as job_spec
from gpuctl.provision.core import spec as cluster_spec
from gpuctl.reclaim.core import policy as reclaim_policy

KINDS = ("job", "cluster", "reclaim-policy")


def schema(kind: str) -> dict[str, Any]:
    """The schema of KIND (one of KINDS)."""
    if kind == "job":
        return json_schema(
            job_spec.JOB,
            title="gpuctl job spec (apiVersion gpuctl/v1, kind Job or Pod)",
            schema_id="urn:gpuctl:schema:job",
            # a site template the job names may give the image
            required_unless={"image": "template"},
        )
    if kind == "cluster":
        return json_schema(
            cluster_spec.CLUSTER,
            title="gpuctl cluster spec (apiVersion gpuctl/v1, kind Cluster)",
            schema_id="urn:gpuctl:schema:cluster",
        )
    if kind == "reclaim-policy":
        return json_schema(
            reclaim_policy.POLICY,
            title="gpuctl reclaim policy (apiVersion gpuctl/v1, kind ReclaimPolicy)",
            schema_id="urn:gpuctl:schema:reclaim-policy",
        )
    raise ValueError(f"no schema for {kind!r}")


def file_name(kind: str) -> str:
    """Where `gpuctl init` expects the schema: beside the spec, under this name."""
    return f"gpuctl-{kind}.schema.json"
