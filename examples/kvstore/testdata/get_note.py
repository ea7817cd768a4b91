print(get_note("n1"))
