import sys
prefix = open("/app/uploads/prefix.txt").read().strip()
for i in range(20):
    add_note(f"{prefix}{i}", f"note {prefix}{i}", "text")
print("done")
