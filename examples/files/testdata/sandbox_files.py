# Seed 002 and seed 000's process_user_file: files the AI hands the plugin.
print(process_user_file("/app/uploads/notes.txt"))
print(process_image("/app/uploads/photo.png"))
print(get_file_content("uploads/notes.txt"))
try:
    open("/app/uploads/notes.txt", "w")
except OSError as e:
    print("upload read-only:", e.errno)
with open("/app/shared/made_by_code.txt", "w") as f:
    f.write("written in the sandbox")
print(get_file_content("/app/shared/made_by_code.txt"))
print(process_user_file("shared/made_by_code.txt"))
print(process_image("/app/shared/../../../../etc/passwd"))
print(process_image("/app/uploads/missing.png"))
import os
os.symlink("/etc/passwd", "/app/shared/passwd")
os.symlink("../../uploads", "/app/shared/uploads_dir")
for p in ["/app/shared/passwd", "/app/shared/uploads_dir/other/secret.txt", "/etc/hostname", "/app/shared/../uploads/notes.txt"]:
    try:
        print("read?", get_file_content(p))
    except Exception as e:
        print("refused:", p, "|", e)
path = generate_report("quarterly numbers: up")
print(path)
print(open(path).read())
try:
    open(path, "a").write("tampered")
except OSError as e:
    print("report read-only:", e.errno)
