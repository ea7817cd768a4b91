print(save_preference("theme", "dark"))
print(get_preference("theme"))
