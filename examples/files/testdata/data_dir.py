# Seeds 000/001: the plugin data directory.
print(read_config())
print(save_log("first log line"))
print(save_image(b"\x89PNG\r\n\x1a\nfake", "cat.png"))
for bad in ["../config.json", "../../../../../../../../tmp/nekro_files_escape", "/tmp/nekro_files_abs_escape", "sub/../../x"]:
    try:
        print("saved?", save_image(b"evil", bad))
    except Exception as e:
        print("refused:", bad, type(e).__name__)
print(list_exports())
print(export_data("a,b\n1,2\n", "table.csv"))
print(open("/app/shared/table.csv").read(), end="")
print(list_exports())
try:
    export_data("x", "../config.json")
except Exception as e:
    print("refused export:", type(e).__name__)
print(cleanup_temp_files(1))
print(cleanup_temp_files())
