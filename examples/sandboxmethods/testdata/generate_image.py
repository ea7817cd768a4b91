generate_image_with_comment("sunset")
print("this line must not run")
