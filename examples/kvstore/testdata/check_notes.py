missing = [f"{p}{i}" for p in ("a", "b") for i in range(20) if get_note(f"{p}{i}").startswith("未找到")]
print("missing:", missing)
