print(get_preference("theme"))
