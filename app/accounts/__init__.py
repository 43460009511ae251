"""Accounts: users and their roles, passwords, sign-in sessions, login throttling, the audit log."""
