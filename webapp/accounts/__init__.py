"""Accounts: users are Django's; this app adds per-user API tokens and the API's authentication."""
