"""Shared building blocks: spec file loader, errors, names, numbers, selectors, settings, output."""
