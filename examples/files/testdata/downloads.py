# Seed 000's cache_external_resource and download_model/load_model.
print(cache_external_resource("{{URL}}/resource.txt"))
print(cache_external_resource("{{URL}}/resource.txt"))
print(cache_external_resource("{{URL}}/missing"))
print(download_model("{{URL}}/model.bin", "tiny"))
print(load_model("tiny"))
print(load_model("absent"))
print(download_model("{{URL}}/model.bin", "../../escape"))
