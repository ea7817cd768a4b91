import datetime
now = get_time()
print(datetime.datetime.fromisoformat(now.replace("Z", "+00:00")).year)
