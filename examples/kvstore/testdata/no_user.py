try:
    get_preference("theme")
except Exception as e:
    print(type(e).__name__, e)
