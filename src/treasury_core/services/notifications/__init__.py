"""Notifications: the outbox dispatcher, webhook endpoints and the events API."""
