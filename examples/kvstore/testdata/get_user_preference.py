theme = get_user_preference(user_id="U", preference_key="theme")
if theme:
    print(f"用户的主题是: {theme}")
else:
    print("未找到用户的主题偏好设置。")
print(get_user_preference("U", "no_such_preference"))
