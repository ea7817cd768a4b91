"""The reference's adapter schema types plugins use."""
