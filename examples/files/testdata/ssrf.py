# Without the operator's permission the host refuses to fetch from 127.0.0.1.
print(cache_external_resource("{{URL}}/resource.txt"))
print(download_model("{{URL}}/model.bin", "tiny"))
print(load_model("tiny"))
