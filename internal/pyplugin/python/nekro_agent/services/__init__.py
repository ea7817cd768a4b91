"""The reference's services, as far as plugins use them."""
