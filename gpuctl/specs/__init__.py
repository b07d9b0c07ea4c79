"""Spec files as a tool gives them to people: starter specs (`gpuctl init`) and the JSON
Schemas of the job and cluster specs (`gpuctl schema`)."""
