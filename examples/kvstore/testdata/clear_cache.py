print(clear_cache())
