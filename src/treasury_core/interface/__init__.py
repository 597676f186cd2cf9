"""The wire: what the HTTP interface says, kept apart from the domain."""
