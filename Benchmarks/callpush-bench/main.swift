print("callpush-bench: not yet")
