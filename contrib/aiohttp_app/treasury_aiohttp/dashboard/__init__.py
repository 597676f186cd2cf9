"""The merchant's and the operator's dashboard: sign-in, pages, charts and amounts."""
