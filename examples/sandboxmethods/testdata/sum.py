print(my_sum_function(2, 3))
