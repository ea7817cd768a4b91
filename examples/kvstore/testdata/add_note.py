print(add_note("n1", "Shopping", "milk, eggs", "home,urgent"))
print(get_note("n1"))
print(get_note("n2"))
