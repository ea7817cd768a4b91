my_sum_function("a", 3)
