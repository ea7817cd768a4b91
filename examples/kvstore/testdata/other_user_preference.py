try:
    print(get_user_preference(user_id="U", preference_key="api_key"))
except Exception as e:
    print(type(e).__name__, e)
