"""typer + rich command groups; no business logic here."""
