"""The reference's plugin service paths."""
