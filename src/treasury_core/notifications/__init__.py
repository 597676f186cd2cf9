"""Notifications: webhook endpoints, deliveries of outbox events, and their retry schedule."""
