print("searching")
search_kb("timeout sandbox")
print("this line must not run")
