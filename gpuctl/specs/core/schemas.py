"""The JSON Schemas of the job spec and the cluster spec, made from the field tables their
parsers read (gpuctl.jobs.core.spec.JOB, gpuctl.provision.core.spec.CLUSTER)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpuctl.common.spec_fields import Table, json_schema
from gpuctl.jobs.core import service_spec
from gpuctl.jobs.core import spec as job_spec
from gpuctl.provision.core import spec as cluster_spec
from gpuctl.reclaim.core import policy as reclaim_policy

KINDS = ("job", "service", "cluster", "reclaim-policy")


def schema(kind: str) -> dict[str, Any]:
    """The schema of KIND (one of KINDS)."""
    if kind == "service":
        return json_schema(
            _with_kinds(job_spec.JOB.without(*service_spec.JOB_ONLY), ("Service",)),
            title="gpuctl service spec (apiVersion gpuctl/v1, kind Service)",
            schema_id="urn:gpuctl:schema:service",
            required_unless={"image": "template"},
        )
    if kind == "job":
        return json_schema(
            _with_kinds(job_spec.JOB.without(*service_spec.SERVICE_ONLY), ("Job", "Pod")),
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


def _with_kinds(table: Table, kinds: tuple[str, ...]) -> Table:
    """TABLE with its `kind` field allowing only KINDS (a Service's fields are not a Job's);
    a service's kind is required, as without it a spec is a Job."""
    row = table["kind"]
    service = kinds == ("Service",)
    kind = dataclasses.replace(
        row, choices=kinds, default=None if service else row.default, required=service
    )
    return Table(*(kind if f.name == "kind" else f for f in table))


def file_name(kind: str) -> str:
    """Where `gpuctl init` expects the schema: beside the spec, under this name."""
    return f"gpuctl-{kind}.schema.json"
