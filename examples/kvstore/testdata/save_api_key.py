print(save_preference("api_key", "sk-secret-of-U"))
