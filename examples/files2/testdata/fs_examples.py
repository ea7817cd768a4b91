# Seed 003: files between the plugin and the sandbox through _ctx.fs.
with open("/app/shared/notes.txt", "w") as f:
    f.write("héllo wörld")
print(analyze_file("/app/shared/notes.txt"))
print(analyze_file("shared/missing.txt"))
print(analyze_file("/app/uploads/doc.md"))
for p in ["/etc/passwd", "/app/shared/../../../etc/passwd", "/app/sharedX/notes.txt"]:
    try:
        print("analyzed?", analyze_file(p))
    except Exception as e:
        print("refused:", p)
print(generate_report("Weekly", "- shipped the file bridge"))
print(open("/app/shared/report.md").read())
p = fetch_image("{{URL}}/cat.png")
print(p, len(open(p, "rb").read()))
import json
p = export_result({"score": 3, "tags": ["a"]})
print(p, json.load(open(p)))
p = write_report("# 报告内容")
print(p, open(p).read())
import os
os.remove("/app/shared/report.md")  # files the plugin wrote are the sandbox's to change
print("removed:", not os.path.exists("/app/shared/report.md"))
